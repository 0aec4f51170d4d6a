"""The PostgreSQL + pgvector store (issue 19), against a real PostgreSQL 16 with pgvector started
from the pgserver wheel (conftest.pg_server): the same CLI, the same daemon as a real process,
hooks and work queue still local SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import isolate
from helpers import cli, cli_json, daemon_process, hook, wait_for, write_transcript
from test_exchange import TURNS, _comparable, _export, _index

START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=1)
PROJECT = "/home/dev/projects/shared"
DECISION = "We decided to deploy the shared API on Fly.io with two regions."


def _pg_rows(url: str, sql: str, params=()) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def _indexed(url: str, files: int) -> bool:
    """Both daemons have committed their transcripts (the schema appears with the first one)."""
    try:
        return _pg_rows(url, "SELECT count(*) FROM index_state WHERE byte_offset > 0") == [(files,)]
    except Exception:  # the store is created by the first daemon that connects
        return False


def test_export_from_sqlite_import_into_postgres_export_again_is_equal(tmp_path, monkeypatch, pg_url):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    caddy = cli_json("search", "Caddy TLS", "--project", "atlas")[0]
    cli("pin", str(caddy["id"]))
    gitlab = cli_json("search", "GitLab registry Docker images", "--project", "atlas")[0]
    cli("forget", str(gitlab["id"]))
    first = _export(tmp_path, "from-sqlite", "--vectors")

    monkeypatch.setenv("TOTAL_RECALL_STORE_URL", pg_url)
    imported = cli_json("import", str(tmp_path / "from-sqlite.jsonl"))
    assert imported["ideas_created"] == sum(r["kind"] == "idea" for r in first) > 0
    second = _export(tmp_path, "from-postgres", "--vectors")
    assert _comparable(second) == _comparable(first)
    assert _pg_rows(pg_url, "SELECT count(*) FROM ideas WHERE pinned = 1") == [(1,)]

    # Searched on PostgreSQL: full text (tsvector) and pgvector KNN, the same fusion.
    found = cli_json("search", "which web server terminates TLS", "--all-projects")
    assert found[0]["content"] == caddy["content"] and found[0]["source_line"] == caddy["source_line"]
    assert {"idea_vec", "idea_bm25"} & set(found[0]["matched_by"]), found[0]["matched_by"]
    assert not cli_json("search", "GitLab registry", "--all-projects") or "GitLab" not in json.dumps(
        cli_json("search", "GitLab registry", "--all-projects")
    )


def test_the_password_never_appears_in_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TOTAL_RECALL_STORE_URL", "postgresql://bob:hunter2-secret@127.0.0.1:9/memories")
    proc = cli("search", "anything", "--all-projects", check=False)
    assert proc.returncode == 1 and "unreachable" in proc.stderr, proc.stderr
    assert "hunter2-secret" not in proc.stderr + proc.stdout and "bob:***@" in proc.stderr
    doctor = cli("doctor", "--fast", "--json", check=False)
    assert "hunter2-secret" not in doctor.stdout + doctor.stderr


def _machine(tmp_path: Path, monkeypatch, name: str, url: str) -> Path:
    base = tmp_path / name
    base.mkdir()
    home = isolate(base, monkeypatch)
    monkeypatch.setenv("TOTAL_RECALL_STORE_URL", url)
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", name)
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_HEARTBEAT", "1")
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_BATCH_WINDOW", "0")
    cli("init")
    return home


def _session(base: Path, session: str, turns) -> dict:
    path = base / "claude" / "projects" / "-home-dev-projects-shared" / f"{session}.jsonl"
    write_transcript(path, turns, cwd=PROJECT, start=START, session=session)
    return {"transcript_path": str(path), "session_id": session, "cwd": PROJECT, "hook_event_name": "Stop"}


def _use(base: Path, monkeypatch, name: str, url: str) -> None:
    isolate(base, monkeypatch)
    monkeypatch.setenv("TOTAL_RECALL_STORE_URL", url)
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", name)
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_HEARTBEAT", "1")
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_BATCH_WINDOW", "0")


def test_two_machines_sharing_one_store_find_each_other_and_forget_for_both(tmp_path, monkeypatch, pg_url):
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
    _machine(tmp_path, monkeypatch, "laptop", pg_url)
    payload_a = _session(
        laptop, "sess-laptop", [("user", DECISION), ("user", "The laptop runs the load tests.")]
    )
    _machine(tmp_path, monkeypatch, "desktop", pg_url)
    payload_b = _session(
        desktop, "sess-desktop", [("user", "Desktop builds the docs with mkdocs."), ("user", DECISION)]
    )
    with daemon_process(desktop / "desktop.log"):
        _use(laptop, monkeypatch, "laptop", pg_url)
        with daemon_process(laptop / "laptop.log"):
            assert hook(payload_a).returncode == 0
            _use(desktop, monkeypatch, "desktop", pg_url)
            assert hook(payload_b).returncode == 0
            wait_for(lambda: _indexed(pg_url, 2), timeout=120)

            hits = cli_json("search", "where do we deploy the shared API", "--all-projects")
            decision = [r for r in hits if r["kind"] == "idea" and "Fly.io" in r["content"]]
            assert len(decision) == 1 and decision[0]["mention_count"] == 2, hits
            assert sorted((s["machine"], s["source_line"]) for s in decision[0]["sources"]) == [
                ("desktop", 2),
                ("laptop", 1),
            ]
            docs = cli_json("search", "mkdocs documentation", "--all-projects")[0]
            load = cli_json("search", "load tests", "--all-projects")
            assert docs["machine"] == "desktop" and any(r.get("machine") == "laptop" for r in load)

            _use(laptop, monkeypatch, "laptop", pg_url)
            cli("forget", str(decision[0]["id"]))
            _use(desktop, monkeypatch, "desktop", pg_url)
            again = cli_json("search", "where do we deploy the shared API", "--all-projects")
            assert not [r for r in again if "Fly.io" in r["content"]], again
            digests = desktop / "tr-home" / "digests"
            wait_for(lambda: all("Fly.io" not in p.read_text() for p in digests.glob("*.md")), timeout=30)
            start = subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    str(Path(__file__).resolve().parents[1] / "hooks" / "session_start.py"),
                ],
                input=json.dumps({"session_id": "x", "cwd": PROJECT, "hook_event_name": "SessionStart"}),
                capture_output=True,
                text=True,
                env=dict(os.environ),
                timeout=30,
            )
            assert start.returncode == 0 and "Fly.io" not in start.stdout


@pytest.mark.slow
def test_concurrent_writers_of_one_fact_make_one_memory(tmp_path, monkeypatch, pg_url):
    """Eight processes import the same decision, each from its own line, at the same moment: one
    memory with eight mentions (the project-and-intent lock, not a read-then-write race)."""
    monkeypatch.setenv("TOTAL_RECALL_STORE_URL", pg_url)
    cli("import", str(_one_idea_file(tmp_path / "seed.jsonl", "seed", 1)))  # schema and vector tables
    files = [_one_idea_file(tmp_path / f"w{n}.jsonl", f"w{n}", 10 + n) for n in range(8)]
    procs = [
        subprocess.Popen([sys.executable, "-m", "total_recall", "import", str(f)], env=dict(os.environ))
        for f in files
    ]
    assert [p.wait(timeout=180) for p in procs] == [0] * 8
    assert _pg_rows(pg_url, "SELECT count(*), max(mention_count) FROM ideas") == [(1, 9)]
    assert _pg_rows(pg_url, "SELECT count(*) FROM idea_sources") == [(9,)]


def _one_idea_file(path: Path, session: str, line: int) -> Path:
    records = [
        {"kind": "header", "format": "total-recall-export", "version": 1, "machine": session},
        {
            "kind": "idea",
            "ref": 1,
            "span": None,
            "content": DECISION,
            "intent": "decision",
            "confidence": 0.8,
            "project": PROJECT,
            "sources": [{"file": f"/t/{session}.jsonl", "line": line, "session_id": session}],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def own_pg(tmp_path):
    """A PostgreSQL server of this test alone, which it may stop and start again."""
    pgserver = pytest.importorskip("pgserver")
    server = pgserver.get_server(tmp_path / "own-pg", cleanup_mode="stop")
    yield server
    server.cleanup()
    if (Path(server.pgdata) / "postmaster.pid").exists():  # started again by pg_ctl: cleanup() missed it
        _pg_ctl(server, "-m", "fast", "stop")


def _pg_ctl(server, *args: str) -> None:
    from pgserver import pg_ctl

    pg_ctl(["-w", *args], pgdata=server.pgdata, user=server.system_user)


@pytest.mark.slow
def test_the_server_stopped_while_hooks_fire_loses_nothing_and_indexes_once(tmp_path, monkeypatch, own_pg):
    import re

    url = own_pg.get_uri()
    socket_dir = re.search(r"host=([^&]+)", url)[1]
    home = _machine(tmp_path, monkeypatch, "laptop", url)
    base = tmp_path / "laptop"
    with daemon_process(base / "daemon.log"):
        assert (
            hook(_session(base, "before", [("user", "We decided to keep the cache in Redis.")])).returncode
            == 0
        )
        wait_for(lambda: _indexed(url, 1), timeout=120)

        _pg_ctl(own_pg, "stop")
        during = _session(base, "during", [("user", DECISION), ("user", "The outage test writes this line.")])
        fired = hook(during)
        assert (
            fired.returncode == 0 and fired.stdout == "" and fired.stderr == ""
        )  # nothing reaches Claude Code
        status = wait_for(
            lambda: (s := cli_json("status")) and "unreachable" in json.dumps(s) and s, timeout=60
        )
        assert "hunter" not in json.dumps(status)
        found = cli("search", "cache Redis", "--all-projects", check=False)
        assert found.returncode == 1 and "unreachable" in found.stderr and "Traceback" not in found.stderr
        queue = json.loads(cli("status", "--json").stdout)
        assert "parked" not in json.dumps(queue).lower() or '"parked": 0' in json.dumps(queue)

        _pg_ctl(own_pg, "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(own_pg.log), "start")
        wait_for(lambda: _indexed(url, 2), timeout=180)
    rows = _pg_rows(url, "SELECT content, mention_count FROM ideas WHERE content LIKE %s", ("%Fly.io%",))
    assert rows == [(DECISION, 1)]  # indexed once
    assert (
        _pg_rows(
            url,
            "SELECT count(*) FROM idea_sources s JOIN files f ON f.id = s.file_id WHERE f.path LIKE %s",
            ("%during.jsonl",),
        )[0][0]
        >= 1
    )
    assert (home / "memory.db").exists()


def test_migrate_store_moves_the_memories_and_switches_the_setup(tmp_path, pg_url):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    before = cli_json("search", "Caddy TLS", "--project", "atlas")[0]
    moved = cli_json("migrate-store", pg_url)
    assert moved["imported"]["ideas_created"] == moved["exported"]["ideas"] > 0
    config_file = tmp_path / "tr-home" / "config.toml"
    assert oct(config_file.stat().st_mode & 0o777) == "0o600" and "[store]" in config_file.read_text()
    after = cli_json("search", "Caddy TLS", "--all-projects")[0]  # now answered by PostgreSQL
    assert (after["content"], after["source_line"]) == (before["content"], before["source_line"])
    assert _pg_rows(pg_url, "SELECT count(*) FROM ideas WHERE content = %s", (before["content"],)) == [(1,)]
    again = cli_json("migrate-store", pg_url)  # a second run merges: nothing twice
    assert again["imported"]["ideas_created"] == 0
    assert _pg_rows(pg_url, "SELECT max(mention_count) FROM ideas") == [(1,)]


def test_migrate_store_moves_the_words_index_so_a_line_without_a_memory_is_found(tmp_path, pg_url):
    """migrate-store moves messages and chunks too: a word said only in a tool result (no memory)
    is found in the new store as that line, with its file:line, without a backfill; a second run
    adds nothing."""
    from helpers import local_rows
    from test_recall_units import transcript

    path = transcript(tmp_path / "claude")
    words = local_rows("SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM chunks)")[0]
    assert min(words) > 0
    moved = cli_json("migrate-store", pg_url)
    assert moved["words"] == {"messages": words[0], "chunks": words[1]}
    assert (
        _pg_rows(pg_url, "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM chunks)")[0] == words
    )
    assert _pg_rows(pg_url, "SELECT count(*) FROM chunks WHERE needs_embedding = 1") == [(0,)]  # vectors too

    hits = cli_json("search", "ECONNREFUSED 6379", "--project", "atlas")  # answered by PostgreSQL
    message = next(r for r in hits if r["kind"] == "message")
    assert (message["source_file"], message["source_line"]) == (str(path), 5)
    assert "ECONNREFUSED" in message["content"] and "chunk_bm25" in message["matched_by"]

    again = cli_json("migrate-store", pg_url)
    assert again["words"] == {"messages": 0, "chunks": 0}
    assert (
        _pg_rows(pg_url, "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM chunks)")[0] == words
    )


def test_a_store_made_by_0001_merges_entity_case_twins_and_splits_paths_into_words(tmp_path, pg_url):
    """A store made by 0001 could hold "Redis" and "redis" as two entities; 0002 keeps the oldest,
    moves every idea's link to it, and makes names unique by lower(name) from then on. 0003
    rebuilds the full text so a path's words are words, as in FTS5. 0005 stores each transcript
    path once, in `files`, every row keeping its id and path (I87)."""
    import shutil

    from total_recall import config, pg

    first = tmp_path / "0001-only"
    first.mkdir()
    shutil.copy(config.resource_dir("migrations") / "postgres" / "0001_memory.sql", first)
    database = pg.connect(pg_url, migrate_to_head=False)
    try:
        assert pg.migrate(database, first) == 1
        with database.write():
            for n in (1, 2):
                database.execute(
                    "INSERT INTO ideas (content, content_hash, intent, confidence, source_file, "
                    "source_line, project, created_at, updated_at) "
                    "VALUES (?, ?, 'decision', 0.8, '/t.jsonl', ?, 'p', 0, 0)",
                    (f"idea {n} is in src/pricing/cache.py", f"h{n}", n),
                )
            for name in ("Redis", "redis", "Caddy"):
                database.execute("INSERT INTO entities (name, type) VALUES (?, 'technology')", (name,))
            database.execute("INSERT INTO idea_entities VALUES (1, 1), (2, 2), (1, 2), (2, 3)")
            database.execute(
                "INSERT INTO idea_sources (idea_id, source_file, source_line) "
                "VALUES (1, '/t.jsonl', 1), (2, '/t.jsonl', 2), (2, '/u.jsonl', 7)"
            )
            for n, path in ((1, "/t.jsonl"), (2, "/t.jsonl"), (7, "/u.jsonl")):
                database.execute(
                    "INSERT INTO messages (source_file, source_line, role, kind, content, content_hash, "
                    "indexed_at) VALUES (?, ?, 'user', 'prompt', 'said', ?, 0)",
                    (path, n, f"m{n}"),
                )
                database.execute(
                    "INSERT INTO chunks (source_file, source_line, message_line, role, kind, content) "
                    "VALUES (?, ?, ?, 'user', 'prompt', 'said')",
                    (path, n, n),
                )
        assert database.all("SELECT id FROM ideas WHERE fts @@ plainto_tsquery('english', 'pricing')") == []
        assert pg.migrate(database) == len(pg.migration_files()) >= 3
        assert database.all("SELECT id, name FROM entities ORDER BY id") == [(1, "Redis"), (3, "Caddy")]
        links = database.all("SELECT idea_id, entity_id FROM idea_entities ORDER BY idea_id, entity_id")
        assert [tuple(r) for r in links] == [(1, 1), (2, 1), (2, 3)]
        with pytest.raises(database.dbapi.errors.UniqueViolation), database.write():
            database.execute("INSERT INTO entities (name, type) VALUES ('CADDY', 'technology')")
        found = database.all(
            "SELECT id FROM ideas WHERE fts @@ plainto_tsquery('english', 'pricing') ORDER BY id"
        )
        assert [tuple(r) for r in found] == [(1,), (2,)]
        assert sorted(database.column("SELECT path FROM files")) == ["/t.jsonl", "/u.jsonl"]
        path = "(SELECT path FROM files WHERE id = t.file_id)"
        for table, key in (
            ("ideas", "id"),
            ("messages", "id"),
            ("chunks", "id"),
            ("idea_sources", "idea_id"),
        ):
            rows = database.all(f"SELECT {key}, {path}, source_line FROM {table} t ORDER BY 1, 3")
            assert [tuple(r) for r in rows] == {
                "ideas": [(1, "/t.jsonl", 1), (2, "/t.jsonl", 2)],
                "idea_sources": [(1, "/t.jsonl", 1), (2, "/t.jsonl", 2), (2, "/u.jsonl", 7)],
            }.get(table, [(1, "/t.jsonl", 1), (2, "/t.jsonl", 2), (3, "/u.jsonl", 7)]), table
        with pytest.raises(database.dbapi.errors.UniqueViolation), database.write():
            database.execute(
                "INSERT INTO messages (file_id, source_line, role, kind, content, content_hash, indexed_at) "
                "SELECT file_id, source_line, role, kind, content, content_hash, 1 FROM messages WHERE id = 1"
            )
    finally:
        database.close()


def test_a_vector_search_fills_its_pool_through_the_hnsw_index(pg_url):
    """pgvector's HNSW search keeps hnsw.ef_search candidates (40 by default) and returns no more,
    whatever the LIMIT: a strategy's pool of 60 held 40 vectors. The store's connections search
    with pg.PG_EF_SEARCH candidates, within one project as over all of them."""
    import random

    from total_recall import pg, vectors
    from total_recall.embed import to_blob

    database = pg.connect(pg_url)
    try:
        pg.ensure_vector_tables(database, "test-model", 16, 2)
        database.execute("INSERT INTO files (id, path) VALUES (1, '/t.jsonl')")
        rng = random.Random(7)
        rows = []
        for n in range(1, 1201):
            project = ("atlas", "borealis")[n % 2]
            database.execute(
                "INSERT INTO chunks (id, file_id, source_line, message_line, role, kind, content, project) "
                "VALUES (?, 1, ?, ?, 'user', 'prompt', 'x', ?)",
                (n, n, n, project),
            )
            rows.append((n, project, to_blob([rng.gauss(0, 1) for _ in range(16)])))
        vectors.store(database, "chunk_embeddings", "chunk_id", rows)
        database.conn.execute("SET enable_seqscan = off")  # the index, as on a store of 100k vectors
        probe = to_blob([rng.gauss(0, 1) for _ in range(16)])
        assert len(vectors.knn(database, "chunk_embeddings", "chunk_id", probe, 60)) == 60
        assert len(vectors.knn(database, "chunk_embeddings", "chunk_id", probe, 60, "atlas")) == 60
        database.conn.execute("SET hnsw.ef_search = 40")  # pgvector's default, as before
        assert len(vectors.knn(database, "chunk_embeddings", "chunk_id", probe, 60)) == 40
    finally:
        database.close()


def test_migrate_store_carries_a_reply_s_memories_on_its_text_line_from_a_store_an_older_version_made(
    tmp_path, pg_url
):
    """A local store indexed before pointers of thinking-first replies were fixed has the pass run
    before its rows are copied (repoint.py, I150): in the shared store they are on the text's line."""
    from test_recall_units import as_an_older_version_left_it, billing_reply

    billing_reply(tmp_path / "claude")
    as_an_older_version_left_it()
    cli_json("migrate-store", pg_url)
    assert _pg_rows(pg_url, "SELECT source_line FROM ideas WHERE content LIKE %s", ("%RabbitMQ%",)) == [(3,)]
    assert _pg_rows(
        pg_url, "SELECT DISTINCT source_line, message_line FROM chunks WHERE content LIKE %s", ("%RabbitMQ%",)
    ) == [(3, 2)]
