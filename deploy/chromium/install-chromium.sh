#!/bin/sh
# Debian's chromium for the graph page's browser tests (tests/graphio/test_page_browser.py) and
# bench/bench_import.py. Unlike promtool, chromium needs its shared libraries, so the package is installed
# with apt-get rather than extracted. Idempotent: returns at once when `chromium --version` answers.
set -eu

if command -v chromium >/dev/null 2>&1 && chromium --version >/dev/null 2>&1; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || { echo "install-chromium: apt-get not found; install chromium (or set MNEMOBUS_CHROMIUM to a Chrome binary)" >&2; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

echo "install-chromium: refreshing the apt package list" >&2
as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
chromium --version
