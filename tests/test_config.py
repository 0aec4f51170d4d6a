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
    s = config.load(environ={"TOTAL_RECALL_LLM_BASE_URL": "http://127.0.0.1:1/v1"}, config_path=tmp_path / "n")
    assert s.llm_enabled()


def test_embedding_key_fallbacks(tmp_path):
    none = tmp_path / "none.toml"
    env = {"OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS": "tok-embed", "OPENAI_API_KEY": "tok-openai"}
    assert config.load(environ=env, config_path=none).embed_api_key() == "tok-embed"
    assert config.load(environ={"OPENAI_API_KEY": "tok-openai"}, config_path=none).embed_api_key() == "tok-openai"


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
