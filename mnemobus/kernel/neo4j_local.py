"""A real, throw-away Neo4j 5.26 Community server for development and CI.

No Neo4j server package exists for this environment (no Docker, no Debian or
PyPI package, no tarball on Maven Central), but the ``org.neo4j:neo4j`` jars
on Maven Central hold the whole server. ``deploy/neo4j/pom.xml`` fetches them
(``make neo4j-jars``); this module lays out a Neo4j home in a temporary
folder, runs the real server entry point in one JVM on a free loopback Bolt
port with authentication off, waits until Bolt answers a query, and stops the
server again. Tests, benches and developers therefore exercise the same server
that production runs, not a stand-in.

Use it as a context manager::

    with LocalNeo4j() as neo:
        driver = AsyncGraphDatabase.driver(neo.uri, auth=None)

or from a shell (prints ``NEO4J_URI=bolt://127.0.0.1:<port>`` once ready and
runs until interrupted)::

    python -m mnemobus.kernel.neo4j_local --print-uri
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from mnemobus.shared.ports import free_port
from mnemobus.shared.procmem import memory_mb

NEO4J_VERSION = "5.26.30"
ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"
REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "deploy" / "neo4j" / "pom.xml"
DEFAULT_LIB_DIR = REPO_ROOT / "deploy" / "neo4j" / "target" / "lib"
LIB_DIR_ENV = "MNEMOBUS_NEO4J_LIB"

# Java 17 refuses Neo4j's reflective access to NIO internals without these;
# the failure shows up as "LinkageError: Cannot link java.nio.DirectByteBuffer".
JVM_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)


# For a server that lives seconds or minutes (fault tests, the test run's shared server, the chaos deployment's):
# the client JIT only and the serial collector spend less of two cores on compiling and GC threads. A server in
# tests mostly plans statements it meets a few times each, and the C2 compiler threads cost a third of its CPU.
QUICK_START_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1")


# For a server whose data grows from nothing within minutes (the chaos deployment's): Neo4j plans a cached query again
# whenever its statistics have moved far enough (always, from an empty database) and the plan is older than
# min_replan_interval, 10 s by default; each replan cost the server ~0.3 s of CPU here (a fresh server storing 384
# episodes: 27-31 replans and 46-49 s of its CPU; 11 replans, 41 s at 60 s; none, 39 s at 1 h). The run's shared test
# server too (neo4j_shared.py); the tests of the plans themselves ask for a fresh plan (`CYPHER replan=force`,
# tests/store/test_neo4j_plans.py). Not the default: a bench that loads 100k facts and then queries wants its plans
# made again within seconds.
REPLAN_EACH_MINUTE = {"dbms.cypher.min_replan_interval": "60s"}

# For the same servers: a statement is planned once for its text and its parameters' types, not once more for each
# size class of its list and string parameters (Neo4j plans `UNWIND $ids` again when the list grows past 1, 10,
# 100 ... items, and a worker's batches and a recall's reads vary in size all the time). Each plan of a long
# statement cost a cold server 0.1-1 s of CPU; the plan shapes here are fixed by indexes and hints, not by sizes.
FEW_PLANS = {**REPLAN_EACH_MINUTE, "internal.cypher.use_parameter_size": "false"}


class LocalNeo4jError(RuntimeError):
    """The local Neo4j could not be fetched, started or reached; the message says why."""


def lib_dir() -> Path:
    """Where the server jars live: ``$MNEMOBUS_NEO4J_LIB`` or deploy/neo4j/target/lib."""
    env = os.environ.get(LIB_DIR_ENV)
    return Path(env) if env else DEFAULT_LIB_DIR


def jars_present(directory: Path | None = None) -> bool:
    """True when the server jar of the pinned version is in the lib folder."""
    d = directory or lib_dir()
    return (d / f"neo4j-{NEO4J_VERSION}.jar").is_file() and (d / f"neo4j-bolt-{NEO4J_VERSION}.jar").is_file()


def ensure_jars(directory: Path | None = None, timeout_s: float = 900.0) -> Path:
    """Fetch the jars with Maven unless they are already there (3 s warm, ~1 min cold).

    Fetching on demand lets a bare ``pytest`` run work; ``make neo4j-jars`` does
    the same step up front.
    """
    d = directory or lib_dir()
    if jars_present(d):
        return d
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalNeo4jError(
            f"the Neo4j {NEO4J_VERSION} jars are missing from {d} and Maven (mvn) is not on PATH; "
            "install Maven or set MNEMOBUS_NEO4J_LIB to a folder holding the jars"
        )
    cmd = [
        mvn, "-q", "-B", "-f", str(POM),
        "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
        f"-DoutputDirectory={d}",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LocalNeo4jError(f"fetching the Neo4j jars took longer than {timeout_s:.0f} s: {' '.join(cmd)}") from exc
    if proc.returncode != 0 or not jars_present(d):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise LocalNeo4jError(f"fetching the Neo4j jars failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return d


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` or the java on PATH; Neo4j 5.26 needs Java 17 or 21."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise LocalNeo4jError("no java found (set JAVA_HOME or put java 17 on PATH); Neo4j 5.26 runs on Java 17")
    return java


def bolt_handshake(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when something on host:port speaks Bolt (answers the version handshake with a version)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            # magic preamble, then four proposed versions: 5.x range, 4.4, none, none
            s.sendall(b"\x60\x60\xb0\x17" + struct.pack(">IIII", 0x00040805, 0x00000404, 0, 0))
            reply = s.recv(4)
            return len(reply) == 4 and reply != b"\x00\x00\x00\x00"
    except OSError:
        return False


def neo4j_conf(bolt_port: int, routing_port: int, pagecache: str = "256m",
               extra: Mapping[str, str] | None = None) -> str:
    """neo4j.conf for a small, private, loopback-only server that stops fast.

    Every port is loopback-only and chosen per start, so two launches (two
    engineers, two CI jobs) never collide; small transaction logs keep the data
    folder near 120 MB; the quiet Bolt shutdown makes SIGTERM take ~3 s, not 12.
    """
    return "\n".join(
        [
            "dbms.security.auth_enabled=false",
            "server.default_listen_address=127.0.0.1",
            "server.default_advertised_address=127.0.0.1",
            f"server.bolt.listen_address=127.0.0.1:{bolt_port}",
            f"server.bolt.advertised_address=127.0.0.1:{bolt_port}",
            "server.http.enabled=false",
            "server.https.enabled=false",
            "dbms.routing.enabled=false",
            f"server.routing.listen_address=127.0.0.1:{routing_port}",
            f"server.memory.pagecache.size={pagecache}",
            "dbms.usage_report.enabled=false",
            "db.tx_log.preallocate=false",
            "db.tx_log.rotation.size=16m",
            "internal.dbms.bolt.netty_server_shutdown_quiet_period=0",
            "internal.dbms.bolt.netty_server_shutdown_timeout=1s",
            *(f"{k}={v}" for k, v in (extra or {}).items()),
            "",
        ]
    )


class LocalNeo4j:
    """One Neo4j server process with its own home folder; start() and stop() are idempotent."""

    def __init__(
        self,
        *,
        lib: Path | None = None,
        home: Path | None = None,
        port: int | None = None,
        heap: str = "512m",
        pagecache: str = "256m",
        startup_timeout_s: float = 120.0,
        keep_home: bool = False,
        jvm_options: tuple[str, ...] = (),
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self._lib = lib
        self.jvm_options = tuple(jvm_options)
        self.conf = dict(conf or {})  # neo4j.conf settings added to neo4j_conf()'s
        self._home_arg = home
        self._port_arg = port
        self.heap = heap
        self.pagecache = pagecache
        self.startup_timeout_s = startup_timeout_s
        self.keep_home = keep_home or home is not None
        self.home: Path | None = None
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in_s: float | None = None
        self._log_fh: object | None = None

    # -- public ---------------------------------------------------------
    @property
    def uri(self) -> str:
        if self.port is None:
            raise LocalNeo4jError("the local Neo4j is not started")
        return f"bolt://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the server and return its Bolt URI once a query succeeds; raise LocalNeo4jError otherwise."""
        if self.proc is not None and self.proc.poll() is None:
            return self.uri
        lib = self._lib or lib_dir()
        if not jars_present(lib):
            raise LocalNeo4jError(
                f"the Neo4j {NEO4J_VERSION} jars are not in {lib}; run `make neo4j-jars` "
                f"(or `python -m mnemobus.kernel.neo4j_local --fetch`)"
            )
        java = find_java()
        t0 = time.monotonic()
        attempts = 1 if self._port_arg else 3
        last: LocalNeo4jError | None = None
        for _ in range(attempts):
            try:
                self._launch(java, lib, self._port_arg or free_port())
                self._wait_ready(t0)
                self.started_in_s = time.monotonic() - t0
                return self.uri
            except _PortTaken as exc:  # lost the race for a free port: try another one
                last = LocalNeo4jError(str(exc))
                self._terminate()
            except BaseException:
                self.stop()  # never leave a half-started JVM or its temporary home behind
                raise
        self.stop()
        raise last or LocalNeo4jError("the local Neo4j did not start")

    def restart(self, *, kill: bool = False) -> float:
        """Stop the server (SIGTERM, or SIGKILL when `kill`) and start it again on the same port with the same
        data, as an operator's or orchestrator's restart would; the seconds until a query succeeds again."""
        if self.port is None or self.home is None:
            raise LocalNeo4jError("restart() needs a started server")
        if kill and self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self._terminate()
        t0 = time.monotonic()
        self._launch(find_java(), self._lib or lib_dir(), self.port)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - t0

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, wait, then SIGKILL; remove the temporary home unless asked to keep it."""
        self._terminate(timeout_s)
        if self.home is not None and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def rss_bytes(self) -> int | None:
        """Resident memory of the server process (Linux), for the figures in reports."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        mb = memory_mb(self.proc.pid)
        return None if mb is None else int(mb * 1024 * 1024)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the console and debug logs: what a failed start shows the user."""
        if self.home is None:
            return "(no log: the server home was not created)"
        parts = []
        for name in ("console.log", "debug.log"):
            f = self.home / "logs" / name
            if f.is_file():
                text = f.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
                parts.append(f"--- {f} (last {len(text)} lines) ---\n" + "\n".join(text))
        return "\n".join(parts) or f"(no log lines under {self.home / 'logs'})"

    def __enter__(self) -> LocalNeo4j:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals ------------------------------------------------------
    def _layout(self, lib: Path, bolt_port: int) -> Path:
        home = self.home
        if home is None:
            home = self._home_arg or Path(tempfile.mkdtemp(prefix="mnemobus-neo4j-"))
            self.home = home
        for sub in ("conf", "data", "logs", "plugins", "run", "import"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        link = home / "lib"
        if link.is_symlink() or link.exists():
            if link.is_symlink():
                link.unlink()
        if not link.exists():
            link.symlink_to(lib.resolve(), target_is_directory=True)
        (home / "conf" / "neo4j.conf").write_text(
            neo4j_conf(bolt_port, free_port(), self.pagecache, self.conf), encoding="utf-8"
        )
        return home

    def command(self, java: str, home: Path) -> list[str]:
        """The java command line that runs the server in `home` (extra JVM options last, before the entry point)."""
        own_gc = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in self.jvm_options)
        return [
            java,
            "-cp", f"{home / 'conf'}/*:{home / 'lib'}/*",
            f"-Xms{self.heap}", f"-Xmx{self.heap}",
            *(() if own_gc else ("-XX:+UseG1GC",)),  # two collectors on one command line: the JVM refuses to start
            "-XX:-OmitStackTraceInFastThrow", "-Dfile.encoding=UTF-8",
            *JVM_OPENS,
            *self.jvm_options,
            ENTRY_POINT,
            f"--home-dir={home}", f"--config-dir={home / 'conf'}", "--console-mode",
        ]

    def _launch(self, java: str, lib: Path, bolt_port: int) -> None:
        home = self._layout(lib, bolt_port)
        self.port = bolt_port
        cmd = self.command(java, home)
        log = open(home / "logs" / "console.log", "ab")  # noqa: SIM115 - closed in _terminate
        self._log_fh = log
        # own session: a Ctrl-C in the terminal reaches us, and we stop the server in order
        self.proc = subprocess.Popen(
            cmd, cwd=home, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _wait_ready(self, t0: float) -> None:
        assert self.proc is not None and self.port is not None
        deadline = t0 + self.startup_timeout_s
        delay = 0.1
        while True:
            code = self.proc.poll()
            if code is not None:
                tail = self.log_tail()
                if "Address already in use" in tail or "BindException" in tail:
                    raise _PortTaken(f"port {self.port} was taken before Neo4j could bind it")
                raise LocalNeo4jError(
                    f"Neo4j exited with code {code} before Bolt answered on {self.uri}\n{tail}"
                )
            if bolt_handshake("127.0.0.1", self.port) and self._query_ok():
                # Bolt answers; make sure it is *our* process that answers
                if self.proc.poll() is None:
                    return
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self._terminate()
                raise LocalNeo4jError(
                    f"Neo4j did not answer on {self.uri} within {self.startup_timeout_s:.0f} s\n{tail}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _query_ok(self) -> bool:
        """Bolt can be up before the default database is online; a real query proves both."""
        from neo4j import GraphDatabase
        from neo4j.exceptions import Neo4jError, DriverError

        try:
            with GraphDatabase.driver(self.uri, auth=None, connection_timeout=2.0) as drv:
                records, _, _ = drv.execute_query("RETURN 1 AS one")
                return bool(records) and records[0]["one"] == 1
        except (Neo4jError, DriverError, OSError):
            return False

    def _terminate(self, timeout_s: float = 20.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self._log_fh is not None:
            self._log_fh.close()  # type: ignore[attr-defined]
            self._log_fh = None


class _PortTaken(LocalNeo4jError):
    pass


def main(argv: list[str] | None = None) -> int:
    """CLI: fetch the jars, start a server, print its URI, run until SIGINT/SIGTERM (or stop at once with --check)."""
    p = argparse.ArgumentParser(prog="python -m mnemobus.kernel.neo4j_local", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=None, help="Bolt port (default: a free one)")
    p.add_argument("--home", type=Path, default=None, help="server home (default: a temporary folder, removed on stop)")
    p.add_argument("--heap", default="512m")
    p.add_argument("--fetch", action="store_true", help="fetch the jars with Maven if missing, then continue")
    p.add_argument("--fetch-only", action="store_true", help="fetch the jars if missing and exit")
    p.add_argument("--print-uri", action="store_true", help="print NEO4J_URI=... on stdout once ready")
    p.add_argument("--check", action="store_true", help="start, report start time and RSS, stop")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for Bolt")
    args = p.parse_args(argv)
    try:
        if args.fetch or args.fetch_only:
            d = ensure_jars()
            if args.fetch_only:
                print(f"Neo4j {NEO4J_VERSION} jars in {d}")
                return 0
        neo = LocalNeo4j(port=args.port, home=args.home, heap=args.heap, startup_timeout_s=args.timeout)
        stop = False

        def _on_signal(signum: int, frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        with neo:
            if args.print_uri:
                print(f"NEO4J_URI={neo.uri}", flush=True)
            rss = neo.rss_bytes()
            print(
                f"Neo4j {NEO4J_VERSION} ready on {neo.uri} in {neo.started_in_s:.1f} s, "
                f"RSS {rss / 2**20 if rss else 0:.0f} MiB, home {neo.home}",
                file=sys.stderr,
                flush=True,
            )
            while not stop and not args.check:
                if neo.proc is None or neo.proc.poll() is not None:
                    print("Neo4j exited unexpectedly\n" + neo.log_tail(), file=sys.stderr)
                    return 1
                time.sleep(0.5)
        return 0
    except LocalNeo4jError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
