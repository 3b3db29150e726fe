"""The extension surface (mnemobus/kernel/hooks.py): what a package registers is what the kernel runs.

Each test registers a small module with the process's plugin manager, as an installed package's entry point
would be, and takes it off again.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from mnemobus.kernel import extensions, hooks
from mnemobus.kernel.app import expand_roles
from mnemobus.cli import main
from mnemobus.shared.config import Settings
from mnemobus.kernel.backends import open_engine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.extract import ExtractedFact, Extraction, entities_of
from mnemobus.shared.errors import MnemobusError
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, RecallQuery
from mnemobus.store.sqlite import SqliteStore
from tests.engine.engine_support import T0, make_episode


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


class _ToyStore(SqliteStore):
    """A store a package would add: here the SQLite store under another name, to show the hook is what picks it."""


class _ToyExtractor:
    """States one fixed fact about every episode, so the stored fact shows the registered extractor ran."""

    name = "toy"

    async def extract(self, episode: Episode) -> Extraction:
        facts = (ExtractedFact("Toy", "likes", "tea", "semantic", "Toy likes tea"),)
        return Extraction(entities=entities_of(facts), facts=facts)


class _ToyEmbedder(HashEmbedder):
    name = "toy"


def _toy_settings(tmp_path: Path, **parts: dict[str, Any]) -> Settings:
    base: dict[str, Any] = {"store": {"sqlite_path": str(tmp_path / "toy.sqlite3")},
                            "memory": {"embedding": {"provider": "hash"}}}
    for section, values in parts.items():
        base[section] = {**base.get(section, {}), **values}
    return Settings(**base)


@pytest.mark.anyio
async def test_hook_mnemobus_stores_the_store_config_names_is_the_one_the_engine_stores_in(
        register: Any, tmp_path: Path) -> None:
    register(mnemobus_stores=lambda: {"toy": lambda settings, dim: _ToyStore(settings.store.sqlite_path, dim=dim)})
    engine = await open_engine(_toy_settings(tmp_path, store={"backend": "toy"}))
    try:
        assert type(engine.store) is _ToyStore
        await engine.ingest(make_episode("g1", "Anna works at Siemens."))
        assert [e.content for e in await engine.episodes("g1")] == ["Anna works at Siemens."]
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_hook_mnemobus_extractors_the_extractor_config_names_states_the_facts_stored(
        register: Any, tmp_path: Path) -> None:
    register(mnemobus_extractors=lambda: {"toy": lambda settings, offline, metrics: _ToyExtractor()})
    engine = await open_engine(_toy_settings(tmp_path, extraction={"extractor": "toy"}))
    try:
        outcome = await engine.ingest(make_episode("g1", "Nothing about drinks here."))
        assert (outcome.extractor, [f.fact for f in await engine.facts_as_of("g1", T0 + timedelta(days=1))]) == \
            ("toy", ["Toy likes tea"])
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_hook_mnemobus_embedders_the_embedder_config_names_sets_the_stored_vector_size(
        register: Any, tmp_path: Path) -> None:
    register(mnemobus_embedders=lambda: {"toy": lambda settings, metrics: _ToyEmbedder(dim=24)})
    engine = await open_engine(_toy_settings(tmp_path, memory={"embedding": {"provider": "toy"}}))
    try:
        await engine.ingest(make_episode("g1", "Anna works at Siemens."))
        result = await engine.recall(RecallQuery("where does Anna work", (GroupId("g1"),)))
        assert (type(engine.embedder), engine.store.dim, [f.fact.fact for f in result.facts][:1]) == \
            (_ToyEmbedder, 24, ["Anna works at Siemens"])
    finally:
        await engine.close()


@pytest.mark.parametrize(("section", "values", "field", "known"), [
    ("store", {"backend": "mongo"}, "store.backend", "neo4j, sqlite"),
    ("extraction", {"extractor": "gpt"}, "extraction.extractor", "llm, offline"),
    ("memory", {"embedding": {"provider": "bert"}}, "memory.embedding.provider", "hash, local, openai, static"),
])
def test_a_part_nobody_registered_is_refused_at_start_naming_file_field_and_known_names(
        tmp_path: Path, capsys: Any, section: str, values: dict[str, Any], field: str, known: str) -> None:
    config = tmp_path / "mnemobus.yaml"
    config.write_text(yaml.safe_dump({section: values}))
    assert main(["--config", str(config), "doctor"]) == 2
    err = capsys.readouterr().err
    assert f"{config}: field '{field}': no " in err and f"(known: {known};" in err


def test_a_part_named_in_the_environment_is_refused_naming_the_variable(
        tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("MNEMOBUS_STORE__BACKEND", "mongo")
    monkeypatch.chdir(tmp_path)
    assert main(["doctor"]) == 2
    assert "environment variable MNEMOBUS_STORE__BACKEND: field 'store.backend': no store is registered as 'mongo'" \
        in capsys.readouterr().err


def test_hook_mnemobus_stores_two_packages_claiming_one_store_are_refused(register: Any) -> None:
    register(mnemobus_stores=lambda: {"sqlite": lambda settings, dim: None})
    with pytest.raises(MnemobusError, match="store 'sqlite' is registered twice"):
        extensions.stores()


def test_every_hook_has_a_test_named_for_it() -> None:
    specs = {name for name in dir(hooks) if name.startswith("mnemobus_")}
    tested = {name for name in globals() if name.startswith("test_hook_")}
    assert {s for s in specs if not any(t.startswith(f"test_hook_{s}_") for t in tested)} == set()
