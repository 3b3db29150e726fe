"""The code's shape, as docs/architecture.md draws it: the kernel above its plugins, no circles, nats in bus/."""

from __future__ import annotations

from import_graph import cycles, imports, third_party_imports  # same folder (pytest prepend import mode)

GRAPH = imports()


def test_no_kernel_module_imports_plugins_or_worldstate() -> None:
    upward = {m: sorted(d for d in deps if d.split(".")[0] in ("plugins", "worldstate"))
              for m, deps in GRAPH.items() if m.startswith("mnemobus")}
    assert {m: d for m, d in upward.items() if d} == {}


def test_no_module_is_part_of_an_import_circle() -> None:
    assert cycles(GRAPH) == []


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
    """plugins/echo is the example an outside plugin copies: it imports nothing but `mnemobus.plugin` and
    `mnemobus.hooks`, whose `__all__` is the API a plugin author may rely on."""
    used = {d for m, deps in GRAPH.items() if m.startswith("plugins.echo") for d in deps if d.startswith("mnemobus")}
    assert used <= {"mnemobus.plugin", "mnemobus.hooks"}


def test_every_public_name_of_the_plugin_api_resolves() -> None:
    import mnemobus.hooks
    import mnemobus.plugin

    for module in (mnemobus.plugin, mnemobus.hooks):
        assert [n for n in module.__all__ if not hasattr(module, n)] == []
