"""A second process writing to a store while the test's process erases the group (test_erasure_two_processes.py).

    python erasure_writer.py <sqlite|neo4j> <file or bolt uri> <group> <message id> <rendezvous dir>

It ingests one episode; its extractor tells the test it has started (the file `extracting`) and waits for the file
`go` before it returns, so the test erases the group while this write is under way. It prints the outcome's kind:
`stored`, or the exception's class name (`GroupErased`).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio

from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.extract import ExtractedEntity, Extraction
from mnemobus.engine.ingest import Ingestor
from mnemobus.shared.groups import GroupId
from second_process import store_at  # same folder: the script's own directory is on sys.path
from mnemobus.store.model import Episode, episode_id_for


class WaitingExtractor:
    """Says it started, then waits for the test's go: the write is under way meanwhile."""

    name = "waiting"

    def __init__(self, rendezvous: Path) -> None:
        self.rendezvous = rendezvous

    async def extract(self, episode: Episode) -> Extraction:
        (self.rendezvous / "extracting").touch()
        with anyio.fail_after(60):
            while not (self.rendezvous / "go").exists():
                await anyio.sleep(0.01)
        return Extraction(entities=(ExtractedEntity(name="Lisbon", type="place"),))


async def main(backend: str, where: str, group: str, msg: str, rendezvous: Path) -> None:
    store = store_at(backend, where)
    await store.open()
    try:
        now = datetime.now(UTC)
        g = GroupId(group)
        episode = Episode(id=episode_id_for(g, msg, "user"), group_id=g, content="I moved to Lisbon.", role="user",
                          source_message_id=msg, reference_time=now, agent_id="main", platform="test",
                          channel_id="c1", created_at=now)
        (outcome,) = await Ingestor(store, WaitingExtractor(rendezvous), HashEmbedder()).ingest_many([episode])
        print("stored" if not isinstance(outcome, BaseException) else type(outcome).__name__, flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5]))
