import pytest

from mnemobus.shared.config import load_settings
from mnemobus.shared.errors import ConfigError


def test_environment_overrides_one_nested_key_and_keeps_the_rest_of_the_file(tmp_path, monkeypatch):
    f = tmp_path / "m.yaml"
    f.write_text("nats:\n  url: nats://a:4222\n  request_timeout_s: 3\n")
    monkeypatch.setenv("MNEMOBUS_NATS__URL", "nats://b:4222")
    s = load_settings(f)
    assert s.nats.url == "nats://b:4222" and s.nats.request_timeout_s == 3


def test_invalid_value_in_file_names_file_field_and_reason(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("memory:\n  recall_deadline_ms: -5\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    msg = str(exc.value)
    assert str(f) in msg and "memory.recall_deadline_ms" in msg and "greater than 0" in msg


def test_unknown_key_is_refused_not_ignored(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("memory:\n  recal_deadline_ms: 5\n")
    with pytest.raises(ConfigError, match="recal_deadline_ms"):
        load_settings(f)


def test_bad_environment_value_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOBUS_WORKER__CONCURRENCY", "lots")
    with pytest.raises(ConfigError, match="MNEMOBUS_WORKER__CONCURRENCY"):
        load_settings(tmp_path / "absent.yaml" if False else None)


def test_an_environment_variable_naming_no_section_is_refused_not_ignored(monkeypatch):
    monkeypatch.setenv("MNEMOBUS_METRIC__HOST", "0.0.0.0")
    with pytest.raises(ConfigError, match="MNEMOBUS_METRIC__HOST: no section 'metric'"):
        load_settings(None)


def test_an_unknown_key_in_a_known_section_of_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv("MNEMOBUS_NATS__STREAMS__REPLICA", "3")
    with pytest.raises(ConfigError, match="replica"):
        load_settings(None)


def test_broken_yaml_is_refused_with_the_file_name(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("nats: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(f)


def test_nats_url_must_be_a_nats_url(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("nats:\n  url: http://x\n")
    with pytest.raises(ConfigError, match="nats.url"):
        load_settings(f)


def test_shipped_workspace_config_is_valid():
    s = load_settings("workspace/mnemobus.yaml")
    assert s.nats.url is None and s.store.backend == "sqlite"


def test_llm_extractor_without_a_model_is_refused_naming_the_field(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("extraction:\n  extractor: llm\n  llm:\n    base_url: http://127.0.0.1:8080/v1\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    assert str(f) in str(exc.value) and "extraction.llm.model" in str(exc.value)


def test_llm_base_url_must_be_http(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("extraction:\n  llm:\n    base_url: localhost:8080\n")
    with pytest.raises(ConfigError, match=r"extraction\.llm\.base_url.*http://"):
        load_settings(f)


def test_unknown_structured_output_mode_is_refused(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("extraction:\n  llm:\n    structured_output: grammar\n")
    with pytest.raises(ConfigError, match=r"extraction\.llm\.structured_output"):
        load_settings(f)


def test_a_named_api_key_variable_that_is_not_set_is_refused_at_start(tmp_path, monkeypatch):
    monkeypatch.delenv("MNEMOBUS_TEST_LLM_KEY", raising=False)
    f = tmp_path / "m.yaml"
    f.write_text("extraction:\n  extractor: llm\n  llm:\n    model: gpt-4o-mini\n    api_key_env: MNEMOBUS_TEST_LLM_KEY\n")
    with pytest.raises(ConfigError, match="MNEMOBUS_TEST_LLM_KEY, which is not set"):
        load_settings(f)
    monkeypatch.setenv("MNEMOBUS_TEST_LLM_KEY", "sk-from-env")
    assert load_settings(f).extraction.llm.resolved_api_key() == "sk-from-env"


def test_llm_api_key_from_the_environment_is_used_and_never_shown(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOBUS_EXTRACTION__LLM__API_KEY", "sk-secret-123")
    f = tmp_path / "m.yaml"
    f.write_text("extraction:\n  extractor: llm\n  llm:\n    model: gpt-4o-mini\n")
    s = load_settings(f)
    assert s.extraction.llm.resolved_api_key() == "sk-secret-123"
    assert "sk-secret-123" not in repr(s) and "sk-secret-123" not in str(s.model_dump())


def test_openai_embeddings_need_a_model(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("memory:\n  embedding:\n    provider: openai\n")
    with pytest.raises(ConfigError, match=r"memory\.embedding\.openai\.model"):
        load_settings(f)
def test_recall_tuning_overrides_only_the_keys_set_and_keeps_each_recipes_methods(tmp_path) -> None:
    from mnemobus.engine.recipes import RECIPES, tuned

    path = tmp_path / "mnemobus.yaml"
    path.write_text("memory:\n  recall:\n    age_floor: 0.8\n    forget_after_days: 400\n")
    settings = load_settings(path)
    recipes = tuned(settings.memory.recall.model_dump(exclude_unset=True))
    assert (recipes["hybrid"].age_floor, recipes["hybrid"].forget_after_days) == (0.8, 400)
    assert recipes["hybrid"].rrf_k == RECIPES["hybrid"].rrf_k
    assert recipes["text"].fact_methods == ("text",)


def test_the_walk_is_off_in_hybrid_on_in_the_graph_recipe_and_configurable_for_all(tmp_path) -> None:
    from mnemobus.engine.recipes import tuned

    path = tmp_path / "mnemobus.yaml"
    path.write_text("memory:\n  recall:\n    age_floor: 0.8\n")
    shipped = tuned(load_settings(path).memory.recall.model_dump(exclude_unset=True))
    assert (shipped["hybrid"].walk, shipped["graph"].walk) == (False, True)
    path.write_text("memory:\n  recall:\n    walk: true\n")
    assert all(r.walk for r in tuned(load_settings(path).memory.recall.model_dump(exclude_unset=True)).values())


def test_a_recall_key_given_as_null_keeps_the_recipes_value(tmp_path) -> None:
    from mnemobus.engine.recipes import RECIPES, tuned

    path = tmp_path / "mnemobus.yaml"
    path.write_text("memory:\n  recall:\n    candidates: null\n    rrf_k: 4\n")
    recipes = tuned(load_settings(path).memory.recall.model_dump(exclude_unset=True))
    assert (recipes["hybrid"].candidates, recipes["hybrid"].rrf_k) == (RECIPES["hybrid"].candidates, 4)


def test_an_out_of_range_recall_weight_is_refused_naming_the_field(tmp_path) -> None:
    path = tmp_path / "mnemobus.yaml"
    path.write_text("memory:\n  recall:\n    age_floor: 1.5\n")
    with pytest.raises(ConfigError, match="memory.recall.age_floor"):
        load_settings(path)


def test_a_clusters_url_list_is_kept_and_each_server_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOBUS_NATS__URL", "nats://n1:4222, nats://n2:4222,nats://n3:4222")
    assert load_settings(None).nats.servers == [
        "nats://n1:4222", "nats://n2:4222", "nats://n3:4222"]
    monkeypatch.setenv("MNEMOBUS_NATS__URL", "nats://n1:4222,n2:4222")
    with pytest.raises(ConfigError, match="'n2:4222': each server must start with nats://"):
        load_settings(None)


def _refused(tmp_path, text: str, match: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_settings(f)


def test_stream_replicas_above_one_need_a_configured_cluster(tmp_path):
    _refused(tmp_path, "nats:\n  streams:\n    replicas: 3\n", r"streams.replicas is 3 but no url is set")
    f = tmp_path / "ok.yaml"
    f.write_text("nats:\n  url: nats://n1:4222,nats://n2:4222,nats://n3:4222\n  streams:\n    replicas: 3\n")
    assert load_settings(f).nats.streams.replicas == 3


def test_stream_replicas_beyond_what_jetstream_allows_are_refused(tmp_path):
    _refused(tmp_path, "nats:\n  url: nats://n1:4222\n  streams:\n    replicas: 7\n",
             r"nats.streams.replicas.*less than or equal to 5")


def test_a_duplicate_window_longer_than_the_streams_max_age_is_refused(tmp_path):
    _refused(tmp_path, "nats:\n  streams:\n    episode_max_age_s: 3600\n    duplicate_window_s: 7200\n",
             r"duplicate_window_s \(7200\) may not exceed episode_max_age_s \(3600\)")


def test_an_mcp_token_shorter_than_16_characters_is_refused_naming_the_field(tmp_path):
    _refused(tmp_path, "mcp:\n  clients:\n    - {name: laptop, token: short}\n", "mcp.clients.0.token")


def test_a_zero_community_time_budget_is_refused_naming_the_file_and_field(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("communities:\n  time_budget_s: 0\n")
    with pytest.raises(ConfigError, match=r"m\.yaml.*communities\.time_budget_s.*greater than 0"):
        load_settings(f)


def test_a_zero_community_write_chunk_is_refused_naming_the_file_and_field(tmp_path):
    _refused(tmp_path, "communities:\n  write_chunk: 0\n", r"communities\.write_chunk.*greater than or equal to 1")


def test_a_child_niceness_past_19_is_refused_naming_the_field(tmp_path):
    _refused(tmp_path, "communities:\n  child_nice: 20\n", r"communities\.child_nice.*less than or equal to 19")


def test_community_refreshes_every_n_episodes_from_the_environment(monkeypatch):
    monkeypatch.setenv("MNEMOBUS_COMMUNITIES__REFRESH_EVERY_EPISODES", "7")
    assert load_settings(None).communities.refresh_every_episodes == 7
