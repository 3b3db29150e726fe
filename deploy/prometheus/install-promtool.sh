#!/bin/sh
# Put promtool at .tools/promtool without installing the Prometheus service:
# download Debian's `prometheus` package and extract only the binary.
# Idempotent: returns at once when .tools/promtool already runs.
set -eu

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
DEST="${PROMTOOL_DEST:-$ROOT/.tools/promtool}"

if [ -x "$DEST" ] && "$DEST" --version >/dev/null 2>&1; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || { echo "install-promtool: apt-get not found; install promtool and copy it to $DEST" >&2; exit 1; }
command -v dpkg >/dev/null 2>&1 || { echo "install-promtool: dpkg not found" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cd "$TMP"

if ! apt-get download prometheus >/dev/null 2>&1; then
    # an empty package list (fresh container) knows no `prometheus`; refresh it once and retry
    echo "install-promtool: refreshing the apt package list" >&2
    if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
    apt-get download prometheus
fi

dpkg -x prometheus_*.deb extracted
mkdir -p "$(dirname "$DEST")"
cp extracted/usr/bin/promtool "$DEST.tmp"
chmod +x "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
"$DEST" --version 2>&1 | head -1
