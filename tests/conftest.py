"""Shared fixtures: every test gets its own home folder and Claude config dir."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURE_TRANSCRIPTS = SHARED / "fixtures" / "transcripts"
LOCOMO_DEV = SHARED / "bench" / "locomo-dev.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers (fake server)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Point the app's home and Claude's config dir at tmp_path; drop inherited settings."""
    for name in list(os.environ):
        if name.startswith("TOTAL_RECALL_") or name in {
            "OPENAI_API_KEY",
            "OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS",
            "OPENAI_BASE_URL",
        }:
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "tr-home"
    claude = tmp_path / "claude"
    claude.mkdir()
    monkeypatch.setenv("TOTAL_RECALL_HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    return home


@pytest.fixture
def fixture_transcripts():
    if not FIXTURE_TRANSCRIPTS.is_dir():
        pytest.skip("shared transcript fixtures not present")
    return sorted(FIXTURE_TRANSCRIPTS.glob("*.jsonl"))


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """The fake OpenAI server as a process, serving embeddings (fast, deterministic) to every
    daemon and CLI run of the test."""
    from fake_openai import FakeOpenAIProcess

    with FakeOpenAIProcess(tmp_path / "fake") as srv:
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        yield srv
