"""The code's shape, as docs/architecture.md draws it: the kernel above its plugins, no circles, nats in bus/."""

from __future__ import annotations

from import_graph import ROOT, cycles, imports, package_graph, package_names, third_party_imports  # same folder

GRAPH = imports()


def test_no_kernel_module_imports_plugins_or_worldstate() -> None:
    upward = {m: sorted(d for d in deps if d.split(".")[0] in ("plugins", "worldstate"))
              for m, deps in GRAPH.items() if m.startswith("mnemobus")}
    assert {m: d for m, d in upward.items() if d} == {}


def test_no_module_is_part_of_an_import_circle() -> None:
    assert cycles(GRAPH) == []


def test_no_package_is_part_of_an_import_circle() -> None:
    """A package importing a package that imports it back (through any modules) is one unit in two places."""
    assert cycles(package_graph(GRAPH, package_names())) == []


def test_the_circle_finder_finds_a_circle_between_two_packages_through_different_modules() -> None:
    graph = {"p": set(), "p.a": {"q.b"}, "q": set(), "q.b": set(), "q.c": {"p.d"}, "p.d": set(), "r.e": {"p.a"}}
    assert cycles(package_graph(graph, {"p", "q", "r"})) == [["p", "q"]]


def test_the_shared_definitions_import_nothing_else_of_the_project() -> None:
    outside = {m: sorted(d for d in deps if not d.startswith("mnemobus.shared"))
               for m, deps in GRAPH.items() if m.startswith("mnemobus.shared")}
    assert {m: d for m, d in outside.items() if d} == {}


def test_the_root_package_holds_packages_only() -> None:
    """A module at the root is neither shared nor assembly: put it in mnemobus/shared or mnemobus/kernel (and in
    tools/restructure.py's lists, so a re-run moves it on another branch too)."""
    assert sorted(p.name for p in (ROOT / "mnemobus").glob("*.py") if p.name != "__init__.py") == []


def test_the_circle_finder_finds_a_circle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_store_imports_neither_the_bus_nor_the_engine() -> None:
    wrong = {m: sorted(d for d in deps if d.startswith(("mnemobus.bus", "mnemobus.engine")))
             for m, deps in GRAPH.items() if m.startswith("mnemobus.store")}
    assert {m: d for m, d in wrong.items() if d} == {}


def test_nats_is_imported_only_inside_the_bus() -> None:
    users = {m for m, names in third_party_imports().items() if "nats" in names and not m.startswith("mnemobus.bus")}
    assert sorted(users) == []


def test_the_echo_plugin_needs_only_the_public_plugin_api() -> None:
    """plugins/echo is the example an outside plugin copies: it imports nothing but `mnemobus.kernel.plugin` and
    `mnemobus.kernel.hooks`, whose `__all__` is the API a plugin author may rely on."""
    used = {d for m, deps in GRAPH.items() if m.startswith("plugins.echo") for d in deps if d.startswith("mnemobus")}
    assert used <= {"mnemobus.kernel.plugin", "mnemobus.kernel.hooks"}


def test_every_public_name_of_the_plugin_api_resolves() -> None:
    import mnemobus.kernel.hooks
    import mnemobus.kernel.plugin

    for module in (mnemobus.kernel.plugin, mnemobus.kernel.hooks):
        assert [n for n in module.__all__ if not hasattr(module, n)] == []
