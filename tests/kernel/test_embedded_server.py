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


def test_the_server_dies_with_the_thread_that_spawned_it_so_it_is_spawned_on_a_long_lived_one(tmp_path):
    """The death signal follows the forking thread: `make run` once spawned it from an anyio worker thread
    and lost its bus when that thread retired. The app spawns on the event loop's thread and only waits
    for readiness on a worker thread."""
    import threading

    short_lived = EmbeddedNatsServer(tmp_path / "a")
    thread = threading.Thread(target=short_lived.start)
    thread.start()
    thread.join()
    kept = EmbeddedNatsServer(tmp_path / "b")
    try:
        kept.spawn()  # here, on the test's own thread
        waiter = threading.Thread(target=kept.wait_ready)
        waiter.start()
        waiter.join()  # the waiting thread is gone
        deadline = time.monotonic() + 5
        while short_lived.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not short_lived.running() and kept.running()
    finally:
        short_lived.stop()
        kept.stop()
