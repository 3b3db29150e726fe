"""Two writers of one Neo4j that lock two groups in opposite orders: the server fails one as a deadlock's victim.

The victim's transaction is sent again (store/neo4j/write_txn.py `_replay`) when what it had read still reads
the same, so both writes are stored; when the winner changed what the victim read, the victim is told to retry
and nothing of it is stored. Each test makes a real deadlock on the run's Neo4j: each writer holds one group's
lock (a read through the transaction takes it) and then asks for the other's. Only the test's own groups are
locked, so other workers' tests are not held.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import pytest
from neo4j import AsyncGraphDatabase

from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import Settings, StoreSettings
from mnemobus.shared.errors import StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.deadlocks import GAVE_UP, REPLAYED, lost_a_lock_race
from mnemobus.store.neo4j.write_txn import Neo4jWriteTxn
from test_conformance import entity, episode, put, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
Body = Callable[[Neo4jWriteTxn, GroupId, GroupId], Awaitable[None]]


def deadlocks_of(*stores: Neo4jStore) -> Counter[str]:
    """The deadlock outcomes these stores see from now on."""
    outcomes: Counter[str] = Counter()
    for s in stores:
        s.observe_deadlocks(lambda outcome: outcomes.update([outcome]))
    return outcomes


async def crossed(a: Neo4jStore, b: Neo4jStore, g1: GroupId, g2: GroupId,
                  then: Callable[[str], Body], victim: str = "") -> dict[str, BaseException]:
    """`a` locks g1 and then g2, `b` g2 and then g1, each once the other holds its first; then each runs
    `then(name)(txn, mine, theirs)`. What each write raised. With `victim` ("a" or "b") named, the other asks for
    its second lock only once the server shows the victim waiting for its own: Neo4j 5.26 then fails the writer
    that was waiting (three runs of three here), so the victim is known; without, either may be."""
    failed: dict[str, BaseException] = {}
    holding = {"a": anyio.Event(), "b": anyio.Event()}

    async def write(name: str, store: Neo4jStore, mine: GroupId, theirs: GroupId, peer: str) -> None:
        try:
            async with store.transaction() as txn:
                await txn.entity_by_alias(mine, f"first read of {name}")  # takes the lock of `mine`
                holding[name].set()
                await holding[peer].wait()
                if victim and name != victim:
                    await a_transaction_blocked(store.uri)
                await txn.entity_by_alias(theirs, f"second read of {name}")  # waits on the peer: a circle
                await then(name)(txn, mine, theirs)
        except StoreUnavailable as exc:
            failed[name] = exc
        finally:
            holding[name].set()  # a writer that failed before its first lock must not leave its peer waiting

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "a", a, g1, g2, "b")
            tg.start_soon(write, "b", b, g2, g1, "a")
    return failed


async def a_transaction_blocked(uri: str) -> None:
    """Until the server lists a transaction waiting for a lock (the peer's second request, on this test's groups:
    other workers' tests do not hold their locks across a wait)."""
    async with AsyncGraphDatabase.driver(uri, auth=None, notifications_min_severity="OFF") as driver:
        while True:
            records, _, _ = await driver.execute_query(
                "SHOW TRANSACTIONS YIELD status WHERE status STARTS WITH 'Blocked' RETURN count(*) AS n")
            if records[0]["n"]:
                return
            await anyio.sleep(0.05)


async def test_writers_that_lock_two_groups_in_opposite_orders_both_store_their_episodes(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId, other_group: GroupId
) -> None:
    await put(neo, episodes=[episode(group, "m0", "the group's first turn"), episode(other_group, "m0", "first")])

    def store_turns(name: str) -> Body:
        async def body(txn: Neo4jWriteTxn, mine: GroupId, theirs: GroupId) -> None:
            for g in (mine, theirs):
                turn = episode(g, f"by-{name}", f"{name} wrote this")
                await txn.insert_episode(turn, screened=False, embedding=vec(turn.content))
        return body

    outcomes = deadlocks_of(neo, other)
    assert await crossed(neo, other, group, other_group, store_turns) == {}
    assert outcomes == Counter({REPLAYED: 1})  # the server found the circle once, and its victim ran again
    for g in (group, other_group):
        stored = {e.source_message_id for e in await neo.episodes(g, 10)}
        assert stored == {"m0", "by-a", "by-b"}


async def test_a_runtime_on_neo4j_counts_its_stores_deadlocks_in_its_metrics(
    settings: Settings, neo4j_uri: str, other: Neo4jStore, group: GroupId, other_group: GroupId,
    caplog: pytest.LogCaptureFixture
) -> None:
    on_neo4j = settings.model_copy(update={"store": StoreSettings(backend="neo4j", neo4j={"uri": neo4j_uri})})
    async with open_runtime(on_neo4j) as rt:
        store, counted = rt.engine.store, rt.metrics.store_deadlocks.labels(outcome=REPLAYED)
        others, rounds = deadlocks_of(other), 0
        try:
            await put(store, episodes=[episode(group, "m0", "first"), episode(other_group, "m0", "first")])
            while counted._value.get() == 0 and rounds < 40:  # the server picks the victim: not always the same
                pair = (store, other) if rounds % 2 else (other, store)  # each writer waits first in turn
                assert await crossed(*pair, group, other_group, lambda name: _nothing_more, victim="a") == {}
                rounds += 1
        finally:
            for g in (group, other_group):
                await store.delete_group(g)
    assert counted._value.get() == 1 and counted._value.get() + others[REPLAYED] == rounds  # one deadlock a round
    assert "lost a deadlock to another writer" in caplog.text


async def _nothing_more(txn: Neo4jWriteTxn, mine: GroupId, theirs: GroupId) -> None:
    """Both locks held is all the writer wanted."""


async def test_a_victim_whose_reads_the_winner_changed_is_told_to_retry_and_stores_nothing(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId, other_group: GroupId
) -> None:
    await put(neo, episodes=[episode(group, "m0", "the group's first turn"), episode(other_group, "m0", "first")])
    peer = {"a": "b", "b": "a"}

    def answer_the_peers_first_read(name: str) -> Body:
        async def body(txn: Neo4jWriteTxn, mine: GroupId, theirs: GroupId) -> None:
            # what the peer read first, in the group it locked first: its replay would now find this entity
            await txn.insert_entity(entity(theirs, f"Ent{name}", aliases=(f"first read of {peer[name]}",)), None)
            turn = episode(mine, f"by-{name}", f"{name} wrote this")
            await txn.insert_episode(turn, screened=False, embedding=vec(turn.content))
        return body

    outcomes = deadlocks_of(neo, other)
    failed = await crossed(neo, other, group, other_group, answer_the_peers_first_read)
    assert outcomes == Counter({GAVE_UP: 1})
    (loser, exc), = failed.items()
    assert isinstance(exc, StoreUnavailable) and lost_a_lock_race(exc)
    winner = peer[loser]
    stored = {e.source_message_id for g in (group, other_group) for e in await neo.episodes(g, 10)}
    assert stored == {"m0", f"by-{winner}"}


@pytest.fixture
async def impatient_behind_a_held_lock(neo4j_uri: str, neo: Neo4jStore, group: GroupId
                                       ) -> AsyncIterator[Neo4jStore]:
    """A store whose writes time out after 2 s, while `neo` holds the group's lock past the test's wait."""
    await put(neo, episodes=[episode(group, "m0", "the group's first turn")])
    impatient = Neo4jStore(neo4j_uri, write_timeout_s=2.0)
    await impatient.open()
    try:
        async with neo.transaction() as holder:
            await holder.entity_by_alias(group, "held")  # takes the group's lock
            yield impatient
    finally:
        await impatient.close()


async def test_a_write_waiting_for_a_lock_another_writer_never_lets_go_fails_within_its_timeout(
    impatient_behind_a_held_lock: Neo4jStore, group: GroupId
) -> None:
    with anyio.fail_after(30):
        with pytest.raises(StoreUnavailable) as raised:
            async with impatient_behind_a_held_lock.transaction() as waiter:
                await waiter.entity_by_alias(group, "waits")
    assert "timeout" in str(raised.value) and "nothing stored" in str(raised.value)


async def test_a_batch_whose_write_waits_out_its_timeout_fails_every_work_at_once(
    impatient_behind_a_held_lock: Neo4jStore, group: GroupId
) -> None:
    # split into works of their own, each would wait out the timeout again: 3 x 2 s and more
    with anyio.fail_after(5):
        got = await impatient_behind_a_held_lock.run_transactions(
            [lambda txn, n=n: txn.entity_by_alias(group, f"waits {n}") for n in range(3)])
    assert all(isinstance(r, StoreUnavailable) and "timeout" in str(r) for r in got), got
