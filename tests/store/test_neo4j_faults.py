"""Neo4j faults: down at start, lost mid-run. Recall fails open, writes store nothing and can be retried."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from mnemobus.shared.errors import StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.kernel.neo4j_local import QUICK_START_JVM, LocalNeo4j, free_port
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.rows import group_key, lucene_terms
from test_conformance import T0, episode, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def test_open_against_no_server_retries_then_says_what_failed() -> None:
    store = Neo4jStore(f"bolt://127.0.0.1:{free_port()}", connect_timeout_s=1.5)
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"(?s)did not answer within 1\.5 s .*is the server running\?"):
        await store.open()
    assert time.monotonic() - t0 >= 1.5  # it retried with backoff until its deadline instead of giving up early


def test_lucene_terms_escape_every_operator() -> None:
    assert lucene_terms(['a+b', "OR", 'x"y', "(z)", "  "]) == 'a\\+b OR or OR x\\"y OR \\(z\\)'


def test_group_key_is_one_digits_only_token_per_group() -> None:
    a, b = group_key("user_1"), group_key("user-1")
    assert a.isdigit() and b.isdigit() and a != b


@pytest.mark.slow
async def test_lost_server_fails_reads_and_writes_with_store_unavailable_and_stores_nothing(
    new_group: Callable[[str], GroupId],
) -> None:
    """A second, private Neo4j is killed mid-run: the shared session server must not be disturbed."""
    group = new_group("lost")
    # small memory, quick-start JVM flags and no schema: the loss is what is tested, and start-up
    # is most of the test's time (halved by the flags on 2 busy cores: ~21 s instead of ~40 s)
    with LocalNeo4j(heap="256m", pagecache="16m", jvm_options=QUICK_START_JVM) as server:
        store = Neo4jStore(server.uri, max_retry_time_s=1.0, ensure_schema=False)
        await store.open()
        try:
            async with store.transaction() as tx:
                await tx.insert_episode(episode(group, "m1", "before the crash"), screened=False, embedding=vec("x"))
            assert server.proc is not None
            server.proc.kill()
            server.proc.wait(timeout=30)
            with pytest.raises(StoreUnavailable):
                await store.search_facts_vector(group, vec("crash"), T0 + timedelta(days=1), 5)
            with pytest.raises(StoreUnavailable):
                async with store.transaction() as tx:
                    await tx.insert_episode(episode(group, "m2", "after the crash"), screened=False, embedding=None)
            with pytest.raises(StoreUnavailable):
                await store.ping()
        finally:
            await store.close()
