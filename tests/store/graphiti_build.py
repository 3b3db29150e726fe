"""A small Graphiti 0.31 graph, written into Neo4j by graphiti-core itself (runs in bench/.venv-graphiti).

Usage: bench/.venv-graphiti/bin/python tests/store/graphiti_build.py <bolt uri> <group id>

Josh's conversation as Graphiti's server would have stored it (messages as "Josh(user): ..."), the entities
and edges its LLM would have drawn (a job that ended, a move), and mentions; saved with Graphiti's own node
and edge classes. Vectors are 8 wide, as another model's would be: the importer must embed again.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from graphiti_core.driver.neo4j_driver import Neo4jDriver  # noqa: E402
from graphiti_core.edges import EntityEdge, EpisodicEdge  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402


def at(month: int, day: int = 1) -> datetime:
    return datetime(2025, month, day, tzinfo=UTC)


def vec(seed: int) -> list[float]:
    return [((seed * 7 + i * 3) % 11) / 11.0 for i in range(8)]


async def main(uri: str, group: str) -> None:
    driver = Neo4jDriver(uri, "neo4j", "unused")
    said = [("I work at Acme.", at(1, 31)), ("I live in Paris.", at(2, 1)),
            ("I no longer work at Acme and I moved to Berlin.", at(4, 1))]
    episodes = [EpisodicNode(uuid=f"{group}-ep{i}", name=f"m{i}", group_id=group, source=EpisodeType.message,
                             source_description="discord", content=f"Josh(user): {text}", valid_at=when,
                             created_at=when)
                for i, (text, when) in enumerate(said)]
    josh = EntityNode(uuid=f"{group}-josh", name="Josh", group_id=group, labels=["Entity", "Person"],
                      summary="Josh, a nurse", created_at=at(1, 31), name_embedding=vec(1))
    acme = EntityNode(uuid=f"{group}-acme", name="Acme", group_id=group, labels=["Entity", "Organization"],
                      created_at=at(1, 31), name_embedding=vec(2))
    paris = EntityNode(uuid=f"{group}-paris", name="Paris", group_id=group, labels=["Entity"],
                       created_at=at(2, 1), name_embedding=vec(3))
    berlin = EntityNode(uuid=f"{group}-berlin", name="Berlin", group_id=group, labels=["Entity"],
                        created_at=at(4, 1), name_embedding=vec(4))
    edges = [
        EntityEdge(uuid=f"{group}-works", group_id=group, source_node_uuid=josh.uuid, target_node_uuid=acme.uuid,
                   name="WORKS_AT", fact="Josh works at Acme", episodes=[episodes[0].uuid, episodes[2].uuid],
                   valid_at=at(1, 31), invalid_at=at(4, 1), expired_at=at(4, 1), created_at=at(1, 31),
                   fact_embedding=vec(5)),
        EntityEdge(uuid=f"{group}-paris-edge", group_id=group, source_node_uuid=josh.uuid,
                   target_node_uuid=paris.uuid, name="LIVES_IN", fact="Josh lives in Paris",
                   episodes=[episodes[1].uuid], valid_at=at(2, 1), invalid_at=at(4, 1), expired_at=at(4, 1),
                   created_at=at(2, 1), fact_embedding=vec(6)),
        EntityEdge(uuid=f"{group}-berlin-edge", group_id=group, source_node_uuid=josh.uuid,
                   target_node_uuid=berlin.uuid, name="LIVES_IN", fact="Josh lives in Berlin",
                   episodes=[episodes[2].uuid], valid_at=at(4, 1), created_at=at(4, 1), fact_embedding=vec(7)),
    ]
    mentions = [(0, josh), (0, acme), (1, josh), (1, paris), (2, josh), (2, acme), (2, berlin)]
    try:
        for node in [*episodes, josh, acme, paris, berlin]:
            await node.save(driver)
        for edge in edges:
            await edge.save(driver)
        for i, (ep, node) in enumerate(mentions):
            await EpisodicEdge(uuid=f"{group}-mention{i}", group_id=group, source_node_uuid=episodes[ep].uuid,
                               target_node_uuid=node.uuid, created_at=episodes[ep].created_at).save(driver)
    finally:
        await driver.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
