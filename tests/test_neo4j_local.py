"""The local Neo4j launcher: it reports why it cannot start, and the session server speaks Bolt."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemobus.kernel.neo4j_local import LocalNeo4j, LocalNeo4jError, bolt_handshake, neo4j_conf


def test_missing_jars_are_reported_with_the_command_that_fetches_them(tmp_path: Path) -> None:
    with pytest.raises(LocalNeo4jError, match="make neo4j-jars"):
        LocalNeo4j(lib=tmp_path / "nothing-here").start()


def test_conf_keeps_every_listener_on_loopback_with_auth_off() -> None:
    conf = neo4j_conf(17001, 17002)
    assert "server.bolt.listen_address=127.0.0.1:17001" in conf
    assert "server.default_listen_address=127.0.0.1" in conf
    assert "dbms.security.auth_enabled=false" in conf
    assert "server.http.enabled=false" in conf


def test_settings_asked_for_are_added_to_the_conf_after_the_defaults() -> None:
    from mnemobus.kernel.neo4j_local import REPLAN_EACH_MINUTE

    lines = neo4j_conf(17001, 17002, extra=REPLAN_EACH_MINUTE).splitlines()
    assert "dbms.cypher.min_replan_interval=60s" in lines
    assert "dbms.cypher.min_replan_interval=60s" not in neo4j_conf(17001, 17002).splitlines()
    assert lines.index("dbms.cypher.min_replan_interval=60s") > lines.index("dbms.security.auth_enabled=false")


def test_nothing_listening_is_not_taken_for_bolt() -> None:
    from mnemobus.kernel.neo4j_local import free_port

    assert bolt_handshake("127.0.0.1", free_port(), timeout_s=0.5) is False


def test_quick_start_options_replace_the_default_collector(tmp_path: Path) -> None:
    """Two collectors on one java command line make the JVM refuse to start."""
    from mnemobus.kernel.neo4j_local import QUICK_START_JVM

    def collectors(cmd: list[str]) -> list[str]:
        return [a for a in cmd if a.startswith("-XX:+Use") and a.endswith("GC")]

    assert collectors(LocalNeo4j().command("java", tmp_path)) == ["-XX:+UseG1GC"]
    quick = LocalNeo4j(jvm_options=QUICK_START_JVM).command("java", tmp_path)
    assert collectors(quick) == ["-XX:+UseSerialGC"]
    assert quick.index("-XX:TieredStopAtLevel=1") < quick.index("org.neo4j.server.CommunityEntryPoint")
