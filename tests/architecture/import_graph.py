"""The project's import graph, read from the source with `ast`: every import statement of every module, at the
top, inside functions and under TYPE_CHECKING alike, because each of them is a dependency someone must reason
about (a lazy import that closes a circle is still a circle)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mnemobus", "plugins", "worldstate")


def modules(root: Path = ROOT) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(name: str, path: Path, known: frozenset[str] = frozenset()) -> Iterable[str]:
    """`from pkg import sub` names pkg.sub when that is a module (as import-linter reads it), else pkg."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield full if full in known else module


def imports(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports (a name resolves to the longest module it names)."""
    mods = modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for imported in _imported_names(name, path, frozenset(mods)):
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                deps.add(imported)
        graph[name] = deps
    return graph


def third_party_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> top-level names of what it imports from outside the project."""
    out: dict[str, set[str]] = {}
    for name, path in modules(root).items():
        out[name] = {n.split(".")[0] for n in _imported_names(name, path) if n and n.split(".")[0] not in PACKAGES}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_graph(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """The module graph seen a package at a time: a module stands for its package (a package's __init__ for the
    package itself); imports inside one package are dropped."""
    def of(module: str) -> str:
        return module if module in packages else module.rpartition(".")[0]

    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(of(module), set()).update(of(d) for d in deps if of(d) != of(module))
    return out


def package_names(root: Path = ROOT) -> set[str]:
    return {name for name, path in modules(root).items() if path.name == "__init__.py"}
