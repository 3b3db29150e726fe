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


def test_a_server_started_or_restarted_from_async_code_outlives_the_worker_threads_that_waited_for_it(tmp_path):
    """A fault test restarted its server with `to_thread.run_sync(restart)`: the server died with that worker
    thread ten idle seconds later, and the test lost its bus. Worker threads end with the event loop, so here a
    server started the wrong way dies at once and the async ones live on."""
    import anyio

    wrong = EmbeddedNatsServer(tmp_path / "wrong")
    started = EmbeddedNatsServer(tmp_path / "started")
    restarted = EmbeddedNatsServer(tmp_path / "restarted")

    async def main() -> None:
        await anyio.to_thread.run_sync(wrong.start)
        await started.start_async()
        url = await restarted.start_async()
        assert await restarted.restart_async() == url

    try:
        anyio.run(main)
        deadline = time.monotonic() + 10
        while wrong.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not wrong.running() and started.running() and restarted.running()
    finally:
        for server in (wrong, started, restarted):
            server.stop()


def _embedded_settings(tmp_path):  # type: ignore[no-untyped-def]
    from mnemobus.shared.config import Settings

    return Settings(nats={"data_dir": tmp_path / "nats"}, store={"sqlite_path": tmp_path / "m.sqlite3"},
                    metrics={"port": 0})


def test_the_embedded_bus_refuses_a_connection_without_its_password_and_takes_one_with_it(tmp_path):
    import anyio
    import nats
    import pytest
    from nats.errors import Error as NatsError

    from mnemobus.kernel.app import nats_url

    async def check() -> tuple[str, bool, int]:
        async with nats_url(_embedded_settings(tmp_path)) as (url, server, connect):
            assert server is not None and connect.permissions_enforced and connect.user
            with pytest.raises((NatsError, OSError)):
                await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)
            url_file = tmp_path / "nats" / "embedded-url"
            owner_url = url_file.read_text().strip()
            nc = await nats.connect(owner_url, allow_reconnect=False, connect_timeout=2)
            ok = nc.is_connected
            await nc.close()
            return owner_url, ok, url_file.stat().st_mode & 0o777

    owner_url, connected, mode = anyio.run(check)
    assert connected and mode == 0o600 and "@127.0.0.1" in owner_url
    assert not (tmp_path / "nats" / "embedded-url").exists()  # gone with the server
