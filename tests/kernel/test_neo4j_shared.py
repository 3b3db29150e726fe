"""The run's one Neo4j (mnemobus/kernel/neo4j_shared.py): every worker of a test run gets the same server, it
outlives the worker that started it, and it stops when the process that owns the run exits."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mnemobus.kernel.neo4j_local import bolt_handshake
from mnemobus.kernel.neo4j_shared import STATE

ASK = ("import sys; from pathlib import Path; from mnemobus.kernel.neo4j_shared import shared_uri; "
       "print(shared_uri(Path(sys.argv[1]), int(sys.argv[2])))")


def _port(uri: str) -> int:
    return int(uri.rsplit(":", 1)[1])


def test_two_workers_share_one_server_that_outlives_them_and_stops_with_the_run(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"])  # stands for the controller
    try:
        workers = [subprocess.Popen([sys.executable, "-c", ASK, str(tmp_path), str(owner.pid)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        answers = [w.communicate(timeout=300) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], [err for _, err in answers]
        uris = {out.strip() for out, _ in answers}
        assert len(uris) == 1, uris  # one server, whichever worker asked first
        uri = uris.pop()
        # both workers have exited: the server they share is still up for the rest of the run
        assert bolt_handshake("127.0.0.1", _port(uri))
        assert (tmp_path / STATE).is_file()
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 60
    while bolt_handshake("127.0.0.1", _port(uri)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not bolt_handshake("127.0.0.1", _port(uri)), "the run's Neo4j outlived the run"
    while (tmp_path / STATE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (tmp_path / STATE).exists()  # the next run's first worker starts a server of its own
