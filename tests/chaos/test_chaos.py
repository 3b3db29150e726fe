"""Chaos under steady load on the deployment shape: every request answered, every episode stored exactly once.

Each test breaks one part while simulated users talk (6 requests/s, each retried with its id until answered):
the NATS node leading the episode stream (kill -9, then back), one worker (kill -9, then back), one plugin
(kill -9, then back), the stream leader's node frozen for 10 s (SIGSTOP: a node cut off, holding its
sockets), Neo4j (restarted). Then it checks, exactly: requests answered == sent; each request's episodes
stored, none twice (count per group == expected); no dead letter; no episode left in a plugin's outbox;
each user's lives_in chain one chain. What the disruption cost (failed attempts, longest silence, seconds
to a new leader, until the workers store again, to drain) is recorded and printed at the end of the run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.bus.cluster import stream_leader
from tests.chaos.chaos_support import (Chaos, Client, Load, broken_chains, dead_letters_of, outbox_depth, record,
                                       stored_again_s, stored_exactly, wait_stored)

# exclusive: 3 nats-servers, 4 role processes and a Neo4j under a steady load need the two cores to themselves to
# recover within RECOVERY_LIMIT_S; beside three other workers they did not (0 of 192 episodes in 120 s)
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.own_server, pytest.mark.neo4j, pytest.mark.exclusive]

RATE_HZ = 6.0
# 12 s of load, the break 2 s into it (was 16 and 4): the load still runs through each disruption until the broken
# part is back (a node or role killed and restarted 5-6 s later, ready in 2-4 s; a node frozen 10 s), and what is
# asserted is about the requests and episodes around the break, not their number. These tests hold the whole run
# (exclusive), and after the load the workers drain its backlog (10-57 s at load ~12 for 192 episodes): 144 now
LOAD_S = 12.0
USERS = 12
BREAK_AT_S = 2.0  # into the load: 12 requests already answered or in flight
RECOVERY_LIMIT_S = 120.0  # what "recovered" must mean at the latest; the measured times are recorded


async def under_load(system: Chaos, client: Client, name: str,
                     disrupt: Callable[[dict[str, Any]], Awaitable[None]]) -> dict[str, Any]:
    """Run the load with `disrupt` started BREAK_AT_S into it, then account for everything; the figures."""
    load = Load(f"{name}-{uuid.uuid4().hex[:6]}", USERS)
    figures: dict[str, Any] = {}

    async def chaos() -> None:
        await anyio.sleep(BREAK_AT_S)
        figures["_broken_at"] = time.monotonic()
        await disrupt(figures)

    async with anyio.create_task_group() as tg:
        tg.start_soon(chaos)
        await load.run(client.rt.bus, RATE_HZ, LOAD_S)
    broken_at = figures.pop("_broken_at")
    expected = load.expected_episodes(client.rt.identity)
    want = sum(len(ids) for ids in expected.values())
    figures["drain_s"] = round(await wait_stored(client.store, expected, RECOVERY_LIMIT_S), 1)
    found, total = await stored_exactly(client.store, expected)
    with anyio.move_on_after(30):
        while outbox_depth(system.deployment) > 0:
            await anyio.sleep(0.5)
    figures.update(requests=len(load.asked), answered=load.answered(), failed_attempts=load.failed_attempts(),
                   longest_silence_s=round(load.longest_silence_s(broken_at), 1), episodes_expected=want,
                   episodes_found=found, episodes_in_groups=total)
    record(name, figures)

    assert load.answered() == len(load.asked), f"requests never answered: {len(load.asked) - load.answered()}"
    assert (found, total) == (want, want), f"expected {want} episodes once each, found {found}, {total} in all"
    assert await dead_letters_of(client.rt.bus, load.tag) == []
    assert outbox_depth(system.deployment) == 0
    broken = {}
    for group in expected:
        facts = [f for f, _ in (await client.store.export_group(group)).facts]
        if problems := broken_chains(facts):
            broken[group] = problems
    assert broken == {}
    return figures


async def test_killing_the_stream_leader_under_load_loses_and_doubles_nothing(system: Chaos, client: Client) -> None:
    async def kill_leader(figures: dict[str, Any]) -> None:
        leader = await stream_leader(client.rt.bus.js, subjects.EPISODE_STREAM)
        system.cluster.kill(leader)
        t0 = time.monotonic()
        new = leader
        with anyio.fail_after(RECOVERY_LIMIT_S):
            while new == leader:
                await anyio.sleep(0.2)
                try:
                    new = await stream_leader(client.rt.bus.js, subjects.EPISODE_STREAM)
                except Exception:  # noqa: BLE001 - no leader yet
                    continue
        figures["new_leader_s"] = round(time.monotonic() - t0, 1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(note_stored_again, system, figures, time.monotonic())
            await anyio.sleep(max(0.0, t0 + 6 - time.monotonic()))
            system.cluster.spawn(leader)
            figures["node_back_s"] = round(await anyio.to_thread.run_sync(system.cluster.wait_ready, leader), 1)

    figures = await under_load(system, client, "nats_leader_killed", kill_leader)
    assert figures["new_leader_s"] < RECOVERY_LIMIT_S


async def note_stored_again(system: Chaos, figures: dict[str, Any], since: float) -> None:
    """Record how soon the workers stored an episode again after `since` (the broken part back)."""
    figures["stored_again_s"] = round(await stored_again_s(system.deployment, since, RECOVERY_LIMIT_S), 1)


def kill_and_restart(system: Chaos, name: str) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """kill -9 the role process, start it again 5 s later (as an orchestrator would), record how long it took."""
    async def disrupt(figures: dict[str, Any]) -> None:
        proc = system.deployment.role(name)
        proc.kill()
        await anyio.sleep(5)
        proc.start()
        figures[f"{name}_back_s"] = round(await anyio.to_thread.run_sync(proc.wait_ready), 1)

    return disrupt


async def test_killing_a_worker_under_load_loses_and_doubles_nothing(system: Chaos, client: Client) -> None:
    await under_load(system, client, "worker_killed", kill_and_restart(system, "worker-1"))


async def test_killing_a_plugin_under_load_loses_and_doubles_nothing(system: Chaos, client: Client) -> None:
    await under_load(system, client, "plugin_killed", kill_and_restart(system, "plugin-1"))


async def test_freezing_the_stream_leaders_node_for_ten_seconds_loses_and_doubles_nothing(
    system: Chaos, client: Client
) -> None:
    async def freeze_leader(figures: dict[str, Any]) -> None:
        leader = await stream_leader(client.rt.bus.js, subjects.EPISODE_STREAM)
        system.cluster.pause(leader)
        await anyio.sleep(10)
        system.cluster.resume(leader)
        figures["node_back_s"] = round(await anyio.to_thread.run_sync(system.cluster.wait_ready, leader), 1)

    await under_load(system, client, "nats_leader_frozen_10s", freeze_leader)


async def test_restarting_neo4j_under_load_loses_and_doubles_nothing(system: Chaos, client: Client) -> None:
    async def restart_neo4j(figures: dict[str, Any]) -> None:
        figures["neo4j_restart_s"] = round(await anyio.to_thread.run_sync(system.neo4j.restart), 1)
        await note_stored_again(system, figures, time.monotonic())

    await under_load(system, client, "neo4j_restarted", restart_neo4j)
