"""Shared fixtures: every test gets its own home folder and Claude config dir."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURE_TRANSCRIPTS = SHARED / "fixtures" / "transcripts"
LOCOMO_DEV = SHARED / "bench" / "locomo-dev.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers (fake server)


def isolate_paths(base: Path) -> Path:
    """The home folder isolate(base, ...) points the app at."""
    return base / "tr-home"


def isolate(base: Path, monkeypatch) -> Path:
    """Point the app's home and Claude's config dir into base; drop inherited settings."""
    for name in list(os.environ):
        if name.startswith("TOTAL_RECALL_") or name in {
            "OPENAI_API_KEY",
            "OPENAI_TOKEN_TOTAL_RECALL_EMBEDDINGS",
            "OPENAI_BASE_URL",
        }:
            monkeypatch.delenv(name, raising=False)
    home = isolate_paths(base)
    claude = base / "claude"
    claude.mkdir(exist_ok=True)
    monkeypatch.setenv("TOTAL_RECALL_HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    return home


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Point the app's home and Claude's config dir at tmp_path; drop inherited settings."""
    return isolate(tmp_path, monkeypatch)


def use_copy_of(home: Path, isolated: Path) -> None:
    """Give the test its own copy of a home another fixture indexed once (read-only tests share the
    indexing, never the files)."""
    shutil.copytree(home, isolated, dirs_exist_ok=True)


@pytest.fixture(scope="session")
def indexed_fixture_transcripts(tmp_path_factory):
    """The shared fixture transcripts backfilled once per run by the real CLI (offline extractor,
    local embedder): (home, folder). Tests take a copy with use_copy_of; none writes here.

    Once per run, not once per xdist worker: the first worker to get here builds it under the
    run's common temporary folder while holding a lock; the others wait and reuse it."""
    if not FIXTURE_TRANSCRIPTS.is_dir():
        pytest.skip("shared transcript fixtures not present")
    from helpers import cli

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by every worker of this run
    base = root / "fixtures-indexed"
    folder = base / "claude" / "projects" / "-fixtures"
    with (root / "fixtures-indexed.lock").open("w") as lock, pytest.MonkeyPatch.context() as mp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        home = isolate_paths(base)
        if not (base / "built").exists():
            shutil.rmtree(base, ignore_errors=True)
            folder.mkdir(parents=True)
            isolate(base, mp)
            for src in sorted(FIXTURE_TRANSCRIPTS.glob("*.jsonl")):
                shutil.copy(src, folder / src.name)
            cli("backfill", str(folder), "--wait")
            (base / "built").touch()
    return home, folder


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


# -- a real PostgreSQL + pgvector (issue 19) ---------------------------------------------------------
@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """One PostgreSQL 16 server with pgvector per test process, from the pgserver wheel (DESIGN.md,
    "PostgreSQL store"); stopped at the end of the run."""
    try:
        import pgserver
    except ImportError:
        if os.environ.get("TOTAL_RECALL_REQUIRE_POSTGRES"):
            raise
        pytest.skip("pgserver is not installed (pip install '.[test]')")
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server
    server.cleanup()


def new_pg_database(server, template: str | None = None) -> str:
    """A fresh database on that server (a copy of `template` when given): its postgresql:// URL."""
    import re
    import uuid

    name = "t_" + uuid.uuid4().hex[:12]
    server.psql(f"CREATE DATABASE {name}" + (f" TEMPLATE {template};" if template else ";"))
    return re.sub(r"/postgres\?", f"/{name}?", server.get_uri(), count=1)


def pg_database_name(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[1]


@pytest.fixture
def pg_url(pg_server, request):
    """A fresh, empty database on that server for one test: its postgresql:// URL."""
    return new_pg_database(pg_server)


STORES = ("sqlite", "postgres")
# For the slower tests: @pytest.mark.parametrize("store", SLOW_ON_POSTGRES, indirect=True) keeps their
# PostgreSQL run out of the fast suite (`-m "not slow"`).
SLOW_ON_POSTGRES = ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)]


@pytest.fixture(params=STORES)
def store(request, isolated_home, monkeypatch) -> str:
    """Run the test once per memory store (issue 19): `sqlite` leaves the default local file,
    `postgres` points the test's home at a fresh database of the session's PostgreSQL server
    (TOTAL_RECALL_STORE_URL). Hooks, the work queue and digests stay local either way; read the
    memory tables with helpers.db_rows (the store in use) and the queue with helpers.local_rows."""
    if request.param == "postgres":
        monkeypatch.setenv("TOTAL_RECALL_STORE_URL", request.getfixturevalue("pg_url"))
    return request.param


@pytest.fixture
def another_store(store, request):
    """For a test that sets up a second home: a callable giving it its own empty store of the same
    kind, the URL to set as TOTAL_RECALL_STORE_URL (postgres) or None (sqlite: the home's own file)."""
    if store == "sqlite":
        return lambda: None
    server = request.getfixturevalue("pg_server")
    return lambda: new_pg_database(server)
