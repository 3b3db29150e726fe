"""Issue 38, item 2: the root package split into shared definitions and assembly, as a re-runnable script.

Why a script and not a commit: six branches change these modules at once. After they are merged, running this
again moves what is still at an old place (`git mv`) and rewrites every reference to an old module (imports,
dotted names in strings, `mnemobus/x.py` paths in docs, make files, pyproject, deploy, tests) to the new one.
Running it twice changes nothing the second time.

    python tools/restructure.py           # move and rewrite, then print what changed
    python tools/restructure.py --check   # exit 1, listing it, when anything is left to move or rewrite

Kept as they are: logger names (`getLogger("mnemobus.worker")` names a log stream people filter on, not a
module), generated records of the past (bench/profiles, bench/results), this script and its test.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what imports nothing of the project: the definitions every layer shares
SHARED = ("config", "envelope", "errors", "groups", "identity", "limits", "logthrottle", "metrics", "ports",
          "private_files", "procmem", "redact", "subjects")
#: what puts the parts together into processes, and the processes' helpers
KERNEL = ("app", "backends", "builtin_parts", "builtin_roles", "community_upkeep", "demo", "doctor", "extensions", "headless", "health",
          "hooks", "llama_local", "localcluster", "migrate", "neo4j_local", "peers", "plugin", "runner", "runtime",
          "testing", "upkeep", "warming", "worker")

PACKAGES = {
    "shared": '"""Shared definitions: config, the messages and subjects on the bus, groups, limits, errors, metrics.\n\n'
              'Imports nothing else of mnemobus (tests/architecture checks it), so every layer can use it."""\n',
    "kernel": '"""Assembly: the roles, the processes that run them, the extension surface (`hooks`, `extensions`) '
              'and\nwhat builds the engine from config (`backends`). Imports every layer below it; `api/` and `cli/` '
              'build on it."""\n',
}

#: old dotted module -> new dotted module
MOVES = {f"mnemobus.{m}": f"mnemobus.shared.{m}" for m in SHARED} | {f"mnemobus.{m}": f"mnemobus.kernel.{m}"
                                                                       for m in KERNEL}

SUFFIXES = {".py", ".md", ".mk", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".ini", ".txt", ".xml", ".conf"}
NAMES = {"Makefile", "Dockerfile"}
SKIP = ("bench/profiles/", "bench/results/", "tools/restructure.py", "tests/architecture/test_restructure.py")

_LOGGER = re.compile(r"""getLogger\(\s*f?(["'])[^"']*\1\s*\)""")


_FILE_ROOT = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?\.parents\[)(\d+)\]")


def deeper(text: str) -> str:
    """A moved module sits one folder deeper: `Path(__file__).parents[1]` (the checkout) becomes `parents[2]`."""
    return _FILE_ROOT.sub(lambda m: f"{m[1]}{int(m[2]) + 1}]", text)


def _path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _dotted(old: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)")


def _slashed(old: str) -> re.Pattern[str]:
    return re.compile(rf"(?:(?<=\.\./)|(?<![\w./-])){re.escape(_path(old))}")


#: (the literal every match contains, pattern, replacement): a text without the literal skips the pattern, so
#: `--check` over the whole tree costs a substring search per module instead of 72 regex passes per file
_REWRITES = [(old, _dotted(old), new) for old, new in MOVES.items()] + \
            [(_path(old), _slashed(old), _path(new)) for old, new in MOVES.items()]
_FROM_ROOT = re.compile(r"^(?P<indent>[ \t]*)from mnemobus import (?P<names>\([^)]*\)|[^\n#]+?)(?P<tail>[ \t]*#[^\n]*)?$",
                        re.MULTILINE)


def _split_from_root(match: re.Match[str]) -> str:
    """`from mnemobus import a, b` -> one line per package the names now live in (names that did not move stay)."""
    names = [n.strip() for n in match["names"].strip("()").replace("\n", " ").split(",") if n.strip()]
    by_package: dict[str, list[str]] = {}
    for name in names:
        base = name.split(" as ")[0].strip()
        target = MOVES.get(f"mnemobus.{base}", f"mnemobus.{base}").rpartition(".")[0]
        by_package.setdefault(target, []).append(name)
    if list(by_package) == ["mnemobus"]:
        return match[0]
    tail = match["tail"] or ""
    return "\n".join(f"{match['indent']}from {package} import {', '.join(group)}{tail if i == 0 else ''}"
                     for i, (package, group) in enumerate(by_package.items()))


def rewrite(text: str, *, python: bool) -> str:
    """Every reference to a moved module named the new way; logger names as they were."""
    kept: list[str] = []

    def keep(m: re.Match[str]) -> str:
        kept.append(m[0])
        return f"\x00{len(kept) - 1}\x00"

    text = _LOGGER.sub(keep, text)
    if python:
        text = _FROM_ROOT.sub(_split_from_root, text)
    for literal, pattern, new in _REWRITES:
        if literal in text:
            text = pattern.sub(new, text)
    return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m[1])], text)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def tracked_text_files() -> Iterable[Path]:
    for name in _git("ls-files", "-z").split("\0"):
        path = ROOT / name
        if not name or name.startswith(SKIP) or not path.is_file():
            continue
        if path.suffix in SUFFIXES or path.name in NAMES:
            yield path


def pending_moves() -> list[tuple[str, str]]:
    """(old file, new file) still to move; an old file beside its new one is a merge to settle by hand."""
    todo = []
    for old, new in MOVES.items():
        src, dst = ROOT / _path(old), ROOT / _path(new)
        if src.exists() and dst.exists():
            sys.exit(f"restructure: both {_path(old)} and {_path(new)} exist: fold the old one's changes into the "
                     "new one, delete the old one, and run again")
        if src.exists():
            todo.append((_path(old), _path(new)))
    return todo


def pending_packages() -> list[str]:
    return [f"mnemobus/{p}/__init__.py" for p in PACKAGES if not (ROOT / "mnemobus" / p / "__init__.py").exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 listing what is left to do")
    args = parser.parse_args(argv)
    moves, packages = pending_moves(), pending_packages()
    if not args.check:
        for init in packages:
            (ROOT / init).parent.mkdir(exist_ok=True)
            (ROOT / init).write_text(PACKAGES[Path(init).parent.name])
            _git("add", init)
        for src, dst in moves:
            _git("mv", src, dst)
            (ROOT / dst).write_text(deeper((ROOT / dst).read_text(encoding="utf-8")), encoding="utf-8")
    changed = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, python=path.suffix == ".py")
        if new != text:
            changed.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for line in [*(f"create {p}" for p in packages), *(f"move {s} -> {d}" for s, d in moves),
                 *(f"rewrite {p}" for p in changed)]:
        print(line)
    return 1 if args.check and (moves or packages or changed) else 0


if __name__ == "__main__":
    sys.exit(main())
