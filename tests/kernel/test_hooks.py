"""The extension surface (mnemobus/hooks.py): what a package registers is what the kernel runs.

Each test registers a small module with the process's plugin manager, as an installed package's entry point
would be, and takes it off again.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest

from mnemobus import extensions, hooks
from mnemobus.app import expand_roles
from mnemobus.cli import main
from mnemobus.config import Settings
from mnemobus.errors import MnemobusError


@pytest.fixture
def register() -> Iterator[Any]:
    added: list[object] = []

    def add(**impls: Any) -> None:
        module = types.ModuleType(f"outside_package_{len(added)}")
        for name, fn in impls.items():
            setattr(module, name, hooks.hookimpl(fn))
        extensions.manager().register(module)
        added.append(module)

    yield add
    for module in added:
        extensions.manager().unregister(module)


def test_hook_mnemobus_bus_plugins_gives_the_memory_plugin_and_the_echo_executor_only_in_the_demo() -> None:
    names = lambda demo: sorted(p.name for p in extensions.bus_plugins(Settings(), demo=demo))  # noqa: E731
    assert names(False) == ["memory"]
    assert names(True) == ["echo-executor", "memory"]


def test_hook_mnemobus_roles_a_registered_role_is_part_of_all(register: Any) -> None:
    async def start(rt: Any, *, task_status: Any) -> None: ...

    register(mnemobus_roles=lambda: {"archiver": start})
    assert expand_roles("all") >= {"plugin", "worker", "api", "worldstate", "archiver"}
    assert expand_roles("archiver") == {"archiver"}


def test_hook_mnemobus_roles_two_packages_claiming_one_role_are_refused(register: Any) -> None:
    async def start(rt: Any, *, task_status: Any) -> None: ...

    register(mnemobus_roles=lambda: {"api": start})
    with pytest.raises(MnemobusError, match="'api' is registered twice"):
        extensions.roles()


def test_hook_mnemobus_roles_an_unknown_role_names_the_ones_there_are() -> None:
    with pytest.raises(MnemobusError, match="has: api, mcp, plugin, worker, worldstate"):
        expand_roles("archiver")


def test_hook_mnemobus_commands_a_registered_command_runs_from_the_command_line(register: Any, capsys: Any) -> None:
    def add(subcommands: Any) -> None:
        p = subcommands.add_parser("hello", help="say hello")
        p.set_defaults(handler=lambda settings, args: print("hello from outside") or 7)

    register(mnemobus_commands=add)
    assert main(["hello"]) == 7
    assert capsys.readouterr().out == "hello from outside\n"


def test_hook_mnemobus_status_document_the_first_answer_is_served(register: Any) -> None:
    register(mnemobus_status_document=lambda runtime: {"from": "outside"})
    assert extensions.status_document(types.SimpleNamespace(extra={})) == {"from": "outside"}  # type: ignore[arg-type]


def test_hook_mnemobus_probe_domains_a_registered_domain_is_polled(register: Any) -> None:
    from worldstate.poller import Poller
    from worldstate.probes import Domain

    register(mnemobus_probe_domains=lambda: [lambda ctx: Domain("billing", ())])
    poller = Poller(types.SimpleNamespace())  # type: ignore[arg-type]
    assert sorted(d.name for d in poller.domains) == ["billing", "bus", "graph", "memory"]


def test_every_hook_has_a_test_named_for_it() -> None:
    specs = {name for name in dir(hooks) if name.startswith("mnemobus_")}
    tested = {name for name in globals() if name.startswith("test_hook_")}
    assert {s for s in specs if not any(t.startswith(f"test_hook_{s}_") for t in tested)} == set()
