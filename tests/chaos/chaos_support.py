"""What the chaos tests share: steady load from simulated users, and the exact accounting of what it left behind.

Each request is retried with the same id until it is answered (as a chat adapter retries a message), so
"none lost" can be checked exactly: every request answered, every episode of every request stored once,
no dead letter, no episode still parked in a plugin's outbox, and each user's `lives_in` chain one chain.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.shared.config import Settings
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.envelope import Meta, Payload, SkillRequest, SkillResponse, Source
from mnemobus.shared.groups import GroupId
from mnemobus.shared.identity import IdentityRegistry
from mnemobus.kernel.localcluster import LocalDeployment
from mnemobus.kernel.neo4j_local import LocalNeo4j
from mnemobus.store.model import Fact, episode_id_for
from mnemobus.store.neo4j import Neo4jStore

CITIES = ("Lisbon Porto Madrid Seville Valencia Paris Lyon Marseille Nantes Brussels Antwerp Amsterdam Utrecht "
          "Hamburg Bremen Cologne Munich Vienna Graz Zurich Geneva Milan Turin Florence Naples Prague Brno Krakow "
          "Gdansk Warsaw Vilnius Riga Tallinn Helsinki Stockholm Oslo Bergen Copenhagen Aarhus Dublin").split()
REQUEST_TIMEOUT_S = 4.0
GIVE_UP_S = 120.0  # a request not answered within this is lost, and the test says so


@dataclass
class Asked:
    """One request and what became of it."""

    req: SkillRequest
    sent_at: float
    answered_at: float | None = None
    failures: list[str] = field(default_factory=list)  # one entry per failed attempt: what went wrong


@dataclass
class Load:
    """Requests at a steady rate from `users` users, each user moving to a new city with every message."""

    tag: str
    users: int
    asked: list[Asked] = field(default_factory=list)

    def user(self, i: int) -> str:
        return f"{self.tag}-{i % self.users}"

    async def run(self, bus: Bus, rate_hz: float, duration_s: float) -> None:
        """Send for `duration_s`, then wait until every request is answered or given up on."""
        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            for i in range(int(rate_hz * duration_s)):
                await anyio.sleep(max(0.0, start + i / rate_hz - time.monotonic()))
                city = CITIES[(i // self.users) % len(CITIES)]
                req = SkillRequest(source=Source(platform="chaos", user_id=self.user(i), channel_id="c"),
                                   payload=Payload(skill="chat", content=f"I moved to {city}.",
                                                   meta=Meta(agent_id="echo")))
                asked = Asked(req, time.monotonic())
                self.asked.append(asked)
                tg.start_soon(self._until_answered, bus, asked)

    async def _until_answered(self, bus: Bus, asked: Asked) -> None:
        while time.monotonic() - asked.sent_at < GIVE_UP_S:
            try:
                reply = await bus.request(subjects.SKILL_REQUEST, asked.req.to_wire(), timeout_s=REQUEST_TIMEOUT_S)
                response = SkillResponse.model_validate_json(reply.data)
                if response.error is None:
                    asked.answered_at = time.monotonic()
                    return
                asked.failures.append(f"error: {response.error}")
            except Exception as exc:  # noqa: BLE001 - every failed attempt is counted, then retried
                asked.failures.append(type(exc).__name__)
            await anyio.sleep(0.25)

    def answered(self) -> int:
        return sum(a.answered_at is not None for a in self.asked)

    def failed_attempts(self) -> int:
        return sum(len(a.failures) for a in self.asked)

    def longest_silence_s(self, since: float) -> float:
        """The longest time after `since` in which no request got its answer (how long service stopped)."""
        times = sorted([since] + [a.answered_at for a in self.asked if a.answered_at and a.answered_at >= since])
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)

    def expected_episodes(self, identity: IdentityRegistry) -> dict[GroupId, set[str]]:
        """Every episode the requests must have left: one per group each request maps to, by its derived id."""
        out: dict[GroupId, set[str]] = {}
        for a in self.asked:
            who = identity.resolve("chaos", a.req.source.user_id, "echo", None)
            for group in who.groups:
                out.setdefault(group, set()).add(episode_id_for(group, a.req.id, "exchange"))
        return out


async def stored_exactly(store: Neo4jStore, expected: dict[GroupId, set[str]]) -> tuple[int, int]:
    """(episodes stored among those expected, episodes stored in those groups in all): equal to the expected
    total when nothing was lost and nothing doubled."""
    found = total = 0
    for group, ids in expected.items():
        found += len(await store.get_episodes(group, sorted(ids)))
        total += await store.count_episodes(group)
    return found, total


async def wait_stored(store: Neo4jStore, expected: dict[GroupId, set[str]], timeout_s: float) -> float:
    """Seconds until every expected episode is stored (or the timeout passed; the caller checks the counts)."""
    want = sum(len(ids) for ids in expected.values())
    t0 = time.monotonic()
    with anyio.move_on_after(timeout_s):
        while (await stored_exactly(store, expected))[0] < want:
            await anyio.sleep(0.5)
    return time.monotonic() - t0


async def dead_letters_of(bus: Bus, tag: str) -> list[Any]:
    return [letter for letter in await list_letters(bus) if tag in letter.subject]


def role_metric(deployment: LocalDeployment, role: str, name: str) -> float:
    """The sum of metric `name` (every label set) over the processes of `role`, as their own /metrics say."""
    total = 0.0
    for proc in deployment.roles:
        if proc.role != role:
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith((f"{name} ", f"{name}{{")):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def outbox_depth(deployment: LocalDeployment) -> float:
    """Episodes still parked in every plugin's outbox."""
    return role_metric(deployment, "plugin", "mnemobus_episode_outbox_depth")


async def stored_again_s(deployment: LocalDeployment, since: float, timeout_s: float) -> float:
    """Seconds from `since` until the workers store an episode they had not stored when this was called (the
    product's own counter, mnemobus_episodes_stored_total): how soon storing resumed after a part came back."""
    def stored() -> float:
        return role_metric(deployment, "worker", "mnemobus_episodes_stored_total")

    before = await anyio.to_thread.run_sync(stored)
    with anyio.fail_after(timeout_s):
        while await anyio.to_thread.run_sync(stored) <= before:
            await anyio.sleep(0.1)
    return time.monotonic() - since


def broken_chains(facts: Sequence[Fact]) -> list[str]:
    """What is wrong with a group's lives_in chain: more or less than one current fact, or a link that does not
    end where the next begins (each fact superseded by the next one, at the time the next one starts)."""
    lives = sorted((f for f in facts if f.relation == "lives_in"), key=lambda f: (f.valid_at, f.id))
    if not lives:
        return []
    problems = []
    current = [f for f in lives if f.invalid_at is None]
    if len(current) != 1 or current[0] is not lives[-1]:
        problems.append(f"{len(current)} current facts ({', '.join(f.object_name for f in current)})")
    for a, b in zip(lives, lives[1:], strict=False):
        if a.invalid_at != b.valid_at or a.superseded_by != b.id:
            problems.append(f"{a.object_name} -> {b.object_name}: ends {a.invalid_at}, next starts {b.valid_at}")
    return problems


FIGURES: dict[str, dict[str, Any]] = {}

# what differs from a production deployment, and why: hash embeddings (the roles start in seconds, not after
# loading a model), a 3 s ack wait (a killed worker's batch comes back in 3 s, not 30), a 2 s executor timeout
CHAOS_ENV = {
    "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
    "MNEMOBUS_WORKER__ACK_WAIT_S": "3",
    "MNEMOBUS_MEMORY__EXECUTOR_TIMEOUT_S": "2",
    "MNEMOBUS_LOG_LEVEL": "INFO",
}


@dataclass
class Chaos:
    deployment: LocalDeployment
    neo4j: LocalNeo4j

    @property
    def cluster(self):  # type: ignore[no-untyped-def]
        assert self.deployment.cluster is not None
        return self.deployment.cluster

    def settings(self) -> Settings:
        return Settings(nats={"url": self.cluster.url, "streams": {"replicas": 3}},
                        store={"backend": "neo4j", "neo4j": {"uri": self.neo4j.uri}},
                        memory={"embedding": {"provider": "hash"}}, metrics={"port": 0})


@dataclass
class Client:
    """The test's own view: a bus connection (the load and an echo executor), and the store to count in."""

    rt: Any
    store: Neo4jStore


def record(test: str, figures: dict[str, Any]) -> None:
    FIGURES[test] = figures
    path = os.environ.get("MNEMOBUS_CHAOS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(FIGURES, f, indent=2, sort_keys=True)
