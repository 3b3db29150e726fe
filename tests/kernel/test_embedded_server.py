"""The embedded nats-server is ours alone and never outlives us."""

import subprocess
import sys
import time

from mnemobus.bus.server import EmbeddedNatsServer


def test_embedded_server_reports_the_port_of_its_own_process(tmp_path):
    with EmbeddedNatsServer(tmp_path / "a") as a, EmbeddedNatsServer(tmp_path / "b") as b:
        assert a.running() and b.running() and a.port != b.port


def test_restart_keeps_the_port(tmp_path):
    server = EmbeddedNatsServer(tmp_path / "s")
    try:
        url = server.start()
        assert server.restart() == url
    finally:
        server.stop()


def test_server_dies_when_its_parent_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from mnemobus.bus.server import EmbeddedNatsServer\n"
        f"s = EmbeddedNatsServer({str(tmp_path / 'n')!r}); s.start(); print(s.pid, flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child_pid}/status") as f:
                if "State:\tZ" in f.read():
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"nats-server {child_pid} outlived its killed parent")
