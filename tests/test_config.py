"""Settings precedence: defaults < config.toml < TOTAL_RECALL_<SECTION>_<KEY>."""

from __future__ import annotations

import pytest

from total_recall import config
from total_recall.errors import ConfigError


def test_defaults_file_and_environment(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[llm]\nmodel = "from-file"\ntimeout = 5\n[daemon]\nbatch_window = 1.5\n')
    s = config.load(environ={"TOTAL_RECALL_LLM_MODEL": "from-env"}, config_path=cfg)
    assert s.get("llm", "model") == "from-env"
    assert s.get("llm", "timeout") == 5.0
    assert s.get("daemon", "batch_window") == 1.5
    assert s.get("embed", "provider") == "local"
    assert s.sources["llm.model"] == "env" and s.sources["llm.timeout"] == "file"


def test_llm_is_off_without_an_endpoint(tmp_path):
    s = config.load(environ={"OPENAI_API_KEY": "sk-test"}, config_path=tmp_path / "none.toml")
    assert not s.llm_enabled()
    s = config.load(
        environ={"TOTAL_RECALL_LLM_BASE_URL": "http://127.0.0.1:1/v1"}, config_path=tmp_path / "n"
    )
    assert s.llm_enabled()


def test_embedding_key_fallbacks(tmp_path):
    none = tmp_path / "none.toml"
    env = {"OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS": "tok-embed", "OPENAI_API_KEY": "tok-openai"}
    assert config.load(environ=env, config_path=none).embed_api_key() == "tok-embed"
    assert (
        config.load(environ={"OPENAI_API_KEY": "tok-openai"}, config_path=none).embed_api_key()
        == "tok-openai"
    )


def test_bad_values_give_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="TOTAL_RECALL_DAEMON_BATCH_WINDOW"):
        config.load(environ={"TOTAL_RECALL_DAEMON_BATCH_WINDOW": "soon"}, config_path=tmp_path / "n")
    cfg = tmp_path / "config.toml"
    cfg.write_text("[llm]\nnot_a_key = 1\n")
    with pytest.raises(ConfigError, match="not_a_key"):
        config.load(environ={}, config_path=cfg)
    cfg.write_text("[llm\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(environ={}, config_path=cfg)


def test_secrets_are_masked_in_reports(tmp_path):
    s = config.load(environ={"TOTAL_RECALL_LLM_API_KEY": "sk-secret"}, config_path=tmp_path / "n")
    assert s.redacted()["llm"]["api_key"] == "***"


# --- loaded once, typed, immutable, range-checked (issue 11) -----------------------------------------
@pytest.mark.parametrize(
    "name, value",
    [
        ("TOTAL_RECALL_DAEMON_POLL_INTERVAL", "0"),
        ("TOTAL_RECALL_DAEMON_POLL_INTERVAL", "nan"),
        ("TOTAL_RECALL_DAEMON_POLL_INTERVAL", "-1"),
        ("TOTAL_RECALL_DAEMON_HEARTBEAT", "inf"),
        ("TOTAL_RECALL_DAEMON_LEASE_SECONDS", "0"),
        ("TOTAL_RECALL_DAEMON_MAX_ATTEMPTS", "0"),
        ("TOTAL_RECALL_DAEMON_BATCH_WINDOW", "-0.5"),
        ("TOTAL_RECALL_SEARCH_K", "0"),
        ("TOTAL_RECALL_EMBED_BATCH_SIZE", "0"),
        ("TOTAL_RECALL_LLM_TIMEOUT", "nan"),
        ("TOTAL_RECALL_SEARCH_HYDE", "sometimes"),
        ("TOTAL_RECALL_EMBED_PROVIDER", "torch"),
    ],
)
def test_out_of_range_values_are_refused_with_a_clear_message(tmp_path, name, value):
    with pytest.raises(ConfigError, match=f"{name}: must be"):
        config.load(environ={name: value}, config_path=tmp_path / "none.toml")


def test_a_bad_value_in_the_file_names_the_file_and_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[daemon]\npoll_interval = nan\n")
    with pytest.raises(
        ConfigError, match=r"config.toml \[daemon\] poll_interval: must be a finite number > 0"
    ):
        config.load(environ={}, config_path=cfg)


def test_zero_is_allowed_where_it_means_something(tmp_path):
    """batch_window 0 = index at once; file_timeout 0 = one read per turn; budget 0 = no limit."""
    s = config.load(
        environ={
            "TOTAL_RECALL_DAEMON_BATCH_WINDOW": "0",
            "TOTAL_RECALL_DAEMON_FILE_TIMEOUT": "0",
            "TOTAL_RECALL_LLM_DAILY_TOKEN_BUDGET": "0",
        },
        config_path=tmp_path / "none.toml",
    )
    assert (s.daemon.batch_window, s.daemon.file_timeout, s.llm.daily_token_budget) == (0.0, 0.0, 0)


def test_settings_are_typed_and_immutable(tmp_path):
    import dataclasses

    s = config.load(environ={"TOTAL_RECALL_SEARCH_K": "7"}, config_path=tmp_path / "none.toml")
    assert s.search.k == 7 and isinstance(s.search.k, int)
    assert isinstance(s.daemon.poll_interval, float)
    assert s.get("search", "k") == s.search.k
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.daemon.poll_interval = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.daemon = None
    s.values["search"]["k"] = 99  # a copy: the settings themselves do not change
    assert s.search.k == 7
