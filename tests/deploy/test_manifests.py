"""deploy/: the compose file and the Kubernetes manifests are valid for their tools, and what they configure is what
mnemobus and nats-server accept (no Docker or cluster here: schemas, the real nats-server's config check, and our
own settings loader)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mnemobus.bus.permissions import ROLES
from mnemobus.bus.server import find_nats_server
from mnemobus.cli.nats_users import write_users
from mnemobus.shared.config import load_settings
from mnemobus.kernel import extensions

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose" / "docker-compose.yml"
KUBE = ROOT / "deploy" / "kubernetes"
MNEMOBUS_ROLES = ("plugin", "worker", "api", "worldstate")
KUBERNETES_VERSION = "1.33.0"


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _kube_docs() -> list[dict[str, Any]]:
    return [d for f in sorted(KUBE.glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]


def _kube(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in _kube_docs() if d["kind"] == kind and d["metadata"]["name"] == name)


def _workload(name: str) -> dict[str, Any]:
    return next(d for d in _kube_docs() if d["kind"] in ("Deployment", "StatefulSet") and d["metadata"]["name"] == name)


def _nats_config_is_accepted(tmp_path: Path, conf_text: str, include_dir: str) -> subprocess.CompletedProcess[str]:
    auth_dir = tmp_path / include_dir
    write_users(auth_dir, list(ROLES))
    conf = tmp_path / "nats.conf"
    conf.write_text(conf_text)
    return subprocess.run([str(find_nats_server()), "-t", "-c", str(conf)], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "SERVER_NAME": "nats-1"})


def _settings_from_env(env: dict[str, str], tmp_path: Path):  # type: ignore[no-untyped-def]
    """Our own loader on exactly this environment (and no config file): refused names or values raise."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MNEMOBUS_")}
    for k in saved:
        del os.environ[k]
    os.environ.update(env)
    try:
        empty = tmp_path / "empty.yaml"
        empty.write_text("{}\n")
        return load_settings(empty)
    finally:
        for k in env:
            os.environ.pop(k, None)
        os.environ.update(saved)


def _env_file(path: Path) -> dict[str, str]:
    pairs = [line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {k: v for k, v in pairs}


# -- compose --------------------------------------------------------------------------------------------------


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    done = subprocess.run([_bin("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_runs_three_nats_nodes_and_every_role_with_its_own_nats_user() -> None:
    services = _compose()["services"]
    assert {"nats-1", "nats-2", "nats-3", "neo4j", "prometheus", "grafana", *MNEMOBUS_ROLES} <= set(services)
    for role in MNEMOBUS_ROLES:
        assert services[role]["command"] == ["mnemobus", "run", "--role", role]
        assert services[role]["env_file"] == [{"path": f"./secrets/{role}.env", "required": True}]
    assert services["plugin"]["deploy"]["replicas"] == 2 and services["worker"]["deploy"]["replicas"] == 2


def test_compose_environment_with_a_roles_env_file_is_accepted_by_the_settings_loader(tmp_path: Path) -> None:
    service = _compose()["services"]["api"]
    env = {k: str(v) for k, v in service["environment"].items()}
    env = {k: v.replace("${NEO4J_PASSWORD:?set NEO4J_PASSWORD}", "pw").replace(
        "${MNEMOBUS_API_KEY:?set MNEMOBUS_API_KEY}", "key-0123456789abcdef") for k, v in env.items()}
    write_users(tmp_path / "secrets", ["api"])
    settings = _settings_from_env({**env, **_env_file(tmp_path / "secrets" / "api.env")}, tmp_path)
    assert len(settings.nats.servers) == 3 and settings.nats.streams.replicas == 3
    assert settings.nats.user == "api" and settings.nats.permissions_enforced
    assert settings.store.backend == "neo4j"


def test_compose_nats_config_is_accepted_by_nats_server(tmp_path: Path) -> None:
    conf = (ROOT / "deploy" / "compose" / "nats" / "nats.conf").read_text()
    done = _nats_config_is_accepted(tmp_path, conf, ".")  # authorization.conf beside it, as compose mounts it
    assert done.returncode == 0, done.stdout + done.stderr


# -- kubernetes -----------------------------------------------------------------------------------------------


def test_kubernetes_manifests_are_valid_for_the_kubernetes_api_strictly() -> None:
    files = [str(f) for f in sorted(KUBE.glob("*.yaml")) if f.name != "kustomization.yaml"]
    done = subprocess.run([_bin("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, "--quiet", *files],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    listed = yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(f.name for f in KUBE.glob("*.yaml") if f.name != "kustomization.yaml")


def test_kubernetes_nats_config_is_accepted_by_nats_server(tmp_path: Path) -> None:
    conf = _kube("ConfigMap", "nats-config")["data"]["nats.conf"]
    done = _nats_config_is_accepted(tmp_path, conf, "auth")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("role", MNEMOBUS_ROLES)
def test_each_role_runs_as_itself_probed_on_its_own_health_endpoints(role: str) -> None:
    assert role in extensions.roles()  # worker and plugin too: every role comes in through the hook
    container = _workload(role)["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["mnemobus", "run", "--role", role]
    assert {"secretRef": {"name": f"mnemobus-nats-{role}"}} in container["envFrom"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 9464} in container["ports"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_kubernetes_environment_is_accepted_by_the_settings_loader(tmp_path: Path) -> None:
    env = dict(_kube("ConfigMap", "mnemobus-env")["data"])
    write_users(tmp_path / "secrets", ["worker"])
    settings = _settings_from_env({**env, **_env_file(tmp_path / "secrets" / "worker.env"),
                                   "MNEMOBUS_STORE__NEO4J__PASSWORD": "pw"}, tmp_path)
    assert len(settings.nats.servers) == 3 and settings.nats.streams.replicas == 3
    assert settings.nats.user == "worker" and settings.store.backend == "neo4j"


def test_disruption_budgets_keep_a_nats_quorum_and_one_plugin_and_worker() -> None:
    budgets = {d["metadata"]["name"]: d["spec"]["minAvailable"] for d in _kube_docs()
               if d["kind"] == "PodDisruptionBudget"}
    assert budgets == {"nats": 2, "plugin": 1, "worker": 1}
    assert _workload("nats")["spec"]["replicas"] == 3


# -- the MCP door (issue 41) ---------------------------------------------------------------------------------


def test_compose_runs_the_mcp_door_as_the_api_user_with_a_token_and_its_port() -> None:
    service = _compose()["services"]["mcp"]
    assert service["command"] == ["mnemobus", "run", "--role", "mcp"]
    assert service["env_file"] == [{"path": "./secrets/api.env", "required": True}]
    assert service["environment"]["MNEMOBUS_MCP__HOST"] == "0.0.0.0" and "MNEMOBUS_API__API_KEY" in service["environment"]
    assert service["ports"] == ["127.0.0.1:8765:8765"]


def test_kubernetes_runs_the_mcp_door_probed_scraped_and_behind_a_service() -> None:
    pod = _workload("mcp")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["args"] == ["mnemobus", "run", "--role", "mcp"]
    assert {"secretRef": {"name": "mnemobus-nats-api"}} in container["envFrom"]
    assert {"name": "MNEMOBUS_MCP__HOST", "value": "0.0.0.0"} in container["env"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 9464} in container["ports"]
    assert pod["metadata"]["labels"]["mnemobus.io/metrics"] == "true"  # selected by the headless metrics Service
    assert _kube("Service", "mcp")["spec"]["ports"] == [{"name": "http", "port": 8765, "targetPort": "http"}]


def test_prometheus_scrapes_every_mnemobus_service_compose_runs() -> None:
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())["scrape_configs"]
    names = {n for job in scrape for sd in job.get("dns_sd_configs", []) for n in sd["names"]}
    services = {name for name, s in _compose()["services"].items() if s.get("command", [""])[0] == "mnemobus"}
    assert services == {*MNEMOBUS_ROLES, "mcp"} and names == services


def test_the_mcp_settings_compose_gives_are_accepted_by_the_settings_loader(tmp_path: Path) -> None:
    service = _compose()["services"]["mcp"]
    env = {k: str(v).replace("${NEO4J_PASSWORD:?set NEO4J_PASSWORD}", "pw").replace(
        "${MNEMOBUS_API_KEY:?set MNEMOBUS_API_KEY}", "key-0123456789abcdef") for k, v in service["environment"].items()}
    write_users(tmp_path / "secrets", ["api"])
    settings = _settings_from_env({**env, **_env_file(tmp_path / "secrets" / "api.env")}, tmp_path)
    assert settings.mcp.host == "0.0.0.0" and settings.api.api_key is not None and settings.nats.user == "api"
