"""Headless Chromium driven over the DevTools protocol, for the graph page's tests and bench.

Over `--remote-debugging-pipe` (commands on the browser's fd 3, answers on its fd 4, NUL-terminated JSON)
rather than a WebSocket: no port to find or to leak to other users of the machine, and no client library:
the protocol is JSON both ways, so ~100 lines replace chromedriver or a Playwright install. Debian's
`chromium` comes from deploy/chromium/install-chromium.sh (`make chromium`, a prerequisite of `make test`).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

#: the flags every run uses: no sandbox (containers), nothing fetched or synced in the background
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--window-size=1400,900")


class BrowserError(RuntimeError):
    """The browser is missing, died, or a page did not do what was waited for; the message says which."""


def chromium_path() -> str:
    found = os.environ.get("MNEMOBUS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise BrowserError("no chromium: run `make chromium` (deploy/chromium/install-chromium.sh)")
    return found


class Browser:
    """One headless Chromium with a fresh profile and one page; a context manager."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="mnemobus-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash, not sh: dash reads only one-digit descriptors in a redirection, and ours are often 10 or more
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}', chromium_path(), *FLAGS,
             f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    # -- the protocol ------------------------------------------------------------------------------

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser exited (code {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)  # type: ignore[no-any-return]

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        """One command; its result (events that arrive meanwhile are kept in `events`)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})  # type: ignore[no-any-return]
            self.events.append(answer)

    # -- what a test does with a page --------------------------------------------------------------

    def page(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.call(method, params, session=True)

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def open(self, url: str, *, headers: dict[str, str] | None = None, ready: str = "true") -> None:
        """Navigate and wait until `ready` (a JS expression) is true."""
        if headers:
            self.page("Network.setExtraHTTPHeaders", {"headers": headers})
        self.page("Page.navigate", {"url": url})
        self.wait_for(ready)

    def wait_for(self, expression: str) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except BrowserError:
                value = None
            if value:
                return value
            time.sleep(0.02)
        raise BrowserError(f"waited {self.timeout_s} s for {expression!r}")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the first element matching `selector`."""
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.page("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.page("Page.captureScreenshot", {"format": "png"})["data"]))
        return path

    def requested(self) -> list[str]:
        """Every URL the page asked the network for since it was opened."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]
