"""One local Neo4j for a whole test run, however many pytest-xdist workers share it.

Why: a JVM per worker would cost each worker ~15 s of two shared cores and ~1 GB of memory, and a server started
by one worker would die with that worker while others still need it. So the first worker that asks starts the
server in a keeper process of its own (under a file lock: the others wait and then read its address), and the
keeper stops the server when the process that owns the run exits (the xdist controller, or pytest itself when
it runs alone). Tests isolate by group id on it, as they always did on the one session server.

    python -m mnemobus.kernel.neo4j_shared --state <file> --owner <pid>   # the keeper (started by shared_uri)
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mnemobus.kernel.neo4j_local import FEW_PLANS, QUICK_START_JVM, LocalNeo4j, LocalNeo4jError, bolt_handshake

STATE = "neo4j.json"
LOCK = "neo4j.lock"
LOG = "neo4j-keeper.log"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _running(state: Path) -> str | None:
    """The URI in `state` when its keeper lives and the server answers Bolt; None otherwise."""
    try:
        info = json.loads(state.read_text())
    except (OSError, ValueError):
        return None
    host_port = info["uri"].removeprefix("bolt://").rsplit(":", 1)
    if _alive(int(info["keeper"])) and bolt_handshake(host_port[0], int(host_port[1])):
        return str(info["uri"])
    return None


def shared_uri(run_dir: Path, owner_pid: int, timeout_s: float = 240.0) -> str:
    """The Bolt URI of the run's Neo4j, started by the first caller and shared by every later one.

    `run_dir` is the folder all workers of the run share; the server lives until `owner_pid` exits.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    state = run_dir / STATE
    with (run_dir / LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter; the others wait here for its address
        uri = _running(state)
        if uri:
            return uri
        state.unlink(missing_ok=True)
        log_path = run_dir / LOG
        with log_path.open("ab") as log:
            keeper = subprocess.Popen(
                [sys.executable, "-m", "mnemobus.kernel.neo4j_shared", "--state", str(state), "--owner", str(owner_pid)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while (uri := _running(state)) is None:
            if keeper.poll() is not None:
                raise LocalNeo4jError(f"the run's Neo4j keeper exited with {keeper.returncode}:\n"
                                      + log_path.read_text(errors="replace")[-3000:])
            if time.monotonic() > deadline:
                keeper.terminate()
                raise LocalNeo4jError(f"the run's Neo4j did not answer within {timeout_s:.0f} s:\n"
                                      + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.1)
        return uri


def keep(state: Path, owner_pid: int) -> int:
    """Start the server, publish its address in `state`, stop it when `owner_pid` exits (or on SIGTERM)."""
    # a signal leaves the wait below as an exit, through the `with` that stops the server
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        # its database grows from nothing during the run, so at Neo4j's default every cached statement was planned
        # again each 10 s (212 replans in the first 223 s of one run), and again for each size class of its lists:
        # FEW_PLANS. Planning is most of what such a server does for the tests (the chaos server's, JFR: ~60% of its
        # Java samples) and the JVM's C2 compiler threads cost another third of its CPU, so it runs the client
        # compiler only (QUICK_START_JVM).
        # The server's CPU over 90 Neo4j tests (-n 2): 149 / 158 s as it was, 112 / 121 s with FEW_PLANS, 85 s both.
        with LocalNeo4j(conf=FEW_PLANS, jvm_options=QUICK_START_JVM) as neo:
            tmp = state.with_suffix(".tmp")
            tmp.write_text(json.dumps({"uri": neo.uri, "keeper": os.getpid()}))
            tmp.replace(state)  # readers see the whole address or none
            print(f"Neo4j on {neo.uri} in {neo.started_in_s:.1f} s for the run of pid {owner_pid}", flush=True)
            while _alive(owner_pid):
                if neo.proc is None or neo.proc.poll() is not None:
                    print("Neo4j exited unexpectedly\n" + neo.log_tail(), flush=True)
                    return 1
                time.sleep(0.5)
    except LocalNeo4jError as exc:
        print(f"error: {exc}", flush=True)
        return 1
    finally:
        state.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mnemobus.kernel.neo4j_shared", description=__doc__.split("\n\n")[0])
    p.add_argument("--state", type=Path, required=True, help="where the server's address is written")
    p.add_argument("--owner", type=int, required=True, help="the server stops when this process exits")
    args = p.parse_args(argv)
    return keep(args.state, args.owner)


if __name__ == "__main__":
    sys.exit(main())
