"""Schema, migrations and the connection factory, on real SQLite files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import struct

import pytest

from conftest import STORES
from total_recall import config, db, vectors
from total_recall.errors import MigrationError, SchemaError


def dump(database: db.Database) -> list[str]:
    """Schema and rows of every table, read through the stdlib module (works for any driver's file)."""
    database.close()
    plain = sqlite3.connect(database.path)
    try:
        return list(plain.iterdump())
    finally:
        plain.close()


def test_blank_database_migrates_to_head(tmp_path):
    database = db.connect(tmp_path / "m.db")
    head = len(db.migration_files())
    assert db.schema_version(database) == head
    names = {r[0] for r in database.execute("SELECT name FROM sqlite_master")}
    for table in (
        "spans",
        "ideas",
        "entities",
        "idea_entities",
        "relations",
        "ideas_fts",
        "spans_fts",
        "index_state",
        "work_queue",
        "memory_events",
        "meta",
        "messages",
        "llm_calls",
    ):
        assert table in names


def test_migration_numbers_are_unique_and_contiguous():
    files = db.migration_files()
    numbers = [n for n, _ in files]
    assert numbers == list(range(1, len(numbers) + 1))
    assert len({p.name[:4] for _, p in files}) == len(files)


def migrations_with(tmp_path, number: int, name: str, sql: str):
    """A copy of the shipped migrations plus migration `number` (`name`, `sql`)."""
    folder = tmp_path / "migrations"
    if not folder.exists():
        shutil.copytree(config.resource_dir("migrations"), folder)
    (folder / f"{number:04d}_{name}.sql").write_text(sql)
    return folder


def test_gap_in_migration_numbers_is_refused(tmp_path):
    folder = migrations_with(tmp_path, len(db.migration_files()) + 2, "gap", "CREATE TABLE gap (x);\n")
    with pytest.raises(SchemaError, match="without gaps"):
        db.migration_files(folder)


def test_failed_migration_leaves_database_unchanged(tmp_path):
    path = tmp_path / "m.db"
    database = db.connect(path)
    database.execute("INSERT INTO meta (key, value) VALUES ('probe', 'kept')")
    version = db.schema_version(database)
    before = dump(database)

    folder = migrations_with(
        tmp_path,
        version + 1,
        "broken",
        "CREATE TABLE half_done (x INTEGER);\n"
        "INSERT INTO half_done VALUES (1);\n"
        "ALTER TABLE ideas ADD COLUMN doomed TEXT;\n"
        "INSERT INTO no_such_table VALUES (1);\n",
    )
    with pytest.raises(MigrationError, match="rolled back"):
        db.connect(path, migrations_dir=folder)
    again = db.connect(path, migrate_to_head=False)
    assert db.schema_version(again) == version
    after = dump(again)
    assert after == before
    assert "doomed" not in " ".join(before)


def test_a_migration_runs_without_foreign_key_actions_but_may_not_break_a_reference(tmp_path):
    """Foreign keys are off while a migration runs, so rebuilding a table (0009) does not cascade;
    a migration that leaves a reference pointing nowhere is rolled back."""
    path = tmp_path / "k.db"
    database = db.connect(path)
    database.execute("INSERT INTO entities (id, name, type) VALUES (1, 'Redis', 'technology')")
    database.execute("INSERT INTO files (id, path) VALUES (1, '/t.jsonl')")
    database.execute(
        "INSERT INTO ideas (id, content, content_hash, intent, confidence, file_id, source_line, created_at, "
        "updated_at) VALUES (1, 'we use redis', 'h', 'decision', 0.9, 1, 1, 0, 0)"
    )
    database.execute("INSERT INTO idea_entities (idea_id, entity_id) VALUES (1, 1)")
    version = db.schema_version(database)
    database.close()
    folder = migrations_with(
        tmp_path,
        version + 1,
        "rebuild",
        "CREATE TABLE entities_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE UNIQUE, "
        "type TEXT NOT NULL);\n"
        "INSERT INTO entities_new SELECT id, name, type FROM entities;\n"
        "DROP TABLE entities;\n"
        "ALTER TABLE entities_new RENAME TO entities;\n",
    )
    rebuilt = db.connect(path, migrations_dir=folder)
    assert [tuple(r) for r in rebuilt.all("SELECT idea_id, entity_id FROM idea_entities")] == [(1, 1)]
    assert rebuilt.scalar("PRAGMA foreign_keys") == 1
    rebuilt.close()
    migrations_with(tmp_path, version + 2, "dangling", "DELETE FROM entities;\n")
    with pytest.raises(MigrationError, match="broken references"):
        db.connect(path, migrations_dir=folder)
    kept = db.connect(path, migrate_to_head=False)
    assert db.schema_version(kept) == version + 1 and kept.scalar("SELECT count(*) FROM entities") == 1


def test_database_newer_than_code_is_refused(tmp_path):
    path = tmp_path / "m.db"
    database = db.connect(path)
    database.execute("PRAGMA user_version = 999")
    database.close()
    with pytest.raises(SchemaError, match="newer than this total-recall"):
        db.connect(path)


def test_older_database_with_data_migrates_to_head(tmp_path):
    """Each earlier schema version (a database made by the first N migrations) reaches head with data kept."""
    head = len(db.migration_files())
    for upto in range(1, head + 1):
        folder = tmp_path / f"m{upto}"
        folder.mkdir()
        for number, path in db.migration_files():
            if number <= upto:
                shutil.copy(path, folder / path.name)
        path = tmp_path / f"v{upto}.db"
        old = db.connect(path, migrations_dir=folder)
        assert db.schema_version(old) == upto
        old.execute(
            "INSERT INTO work_queue (transcript_path, event, enqueued_at) VALUES ('/t/a.jsonl', 'Stop', 1.0)"
        )
        old.close()
        new = db.connect(path)
        assert db.schema_version(new) == head
        assert new.scalar("SELECT transcript_path FROM work_queue") == "/t/a.jsonl"
        new.close()


def made_by(tmp_path, last: int):
    """A database (tmp_path / f"v{last}.db") as the code of migration `last` made it, holding one
    transcript (`files` id 1, /t/a.jsonl); open for the test to fill, then close."""
    folder = tmp_path / f"m{last}"
    folder.mkdir()
    for number, path in db.migration_files():
        if number <= last:
            shutil.copy(path, folder / path.name)
    old = db.connect(tmp_path / f"v{last}.db", migrations_dir=folder)
    old.execute("INSERT INTO files (id, path) VALUES (1, '/t/a.jsonl')")
    return old


def test_0019_marks_the_problems_a_solution_answered_as_having_a_fix(tmp_path):
    """A database made before 0019 holds problems a solution answers with answered = 0; migrated, they
    have a fix given (answered = 1), and a problem answered by no solution, or only by a context line,
    stays open."""
    old = made_by(tmp_path, 18)
    for n, intent in enumerate(("problem", "solution", "problem", "problem", "context"), 1):
        old.execute(
            "INSERT INTO ideas (id, content, content_hash, intent, confidence, file_id, source_line, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, 0.9, 1, ?, 1.0, 1.0)",
            (n, f"idea {n}", f"h{n}", intent, n),
        )
    for source, target in ((2, 1), (5, 4)):
        old.execute(
            "INSERT INTO relations (from_id, to_id, relation_type, created_at) VALUES (?, ?, 'answers', 1.0)",
            (source, target),
        )
    old.close()
    new = db.connect(tmp_path / "v18.db")
    assert dict(new.execute("SELECT id, answered FROM ideas WHERE intent = 'problem'").fetchall()) == {
        1: 1,
        3: 0,
        4: 0,
    }
    new.close()


def test_0020_records_the_uuids_of_the_lines_forgotten_before_it(tmp_path):
    """A line forgotten before 0020 kept its blank row with its record uuid; migrated, that uuid is a
    forgotten record (a forked copy of it is forgotten as it arrives, I202), and the lines not
    forgotten are not."""
    old = made_by(tmp_path, 19)
    for n, (skip, uuid) in enumerate(
        (("forgotten", "u-forgotten"), (None, "u-kept"), ("forgotten", None)), 1
    ):
        old.execute(
            "INSERT INTO messages (file_id, source_line, role, kind, content, content_hash, skip_reason, "
            "indexed_at, uuid) VALUES (1, ?, 'user', 'prompt', '', ?, ?, 1.0, ?)",
            (n, f"h{n}", skip, uuid),
        )
    old.close()
    new = db.connect(tmp_path / "v19.db")
    assert [r[0] for r in new.execute("SELECT uuid FROM forgotten_records").fetchall()] == ["u-forgotten"]
    new.close()


def test_home_and_database_are_private(isolated_home):
    database = db.connect()
    database.close()
    assert stat.S_IMODE(os.stat(isolated_home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(isolated_home / "memory.db").st_mode) == 0o600


def test_connection_settings(tmp_path):
    database = db.connect(tmp_path / "s.db")
    assert database.scalar("PRAGMA journal_mode") == "wal"
    assert database.scalar("PRAGMA foreign_keys") == 1
    assert database.scalar("PRAGMA synchronous") == 1  # NORMAL
    assert database.scalar("PRAGMA busy_timeout") == 30000


def test_sqlite_vec_loads_and_vector_tables_follow_the_model(tmp_path):
    database = db.connect(tmp_path / "v.db")
    assert database.has_vec, database.vec_error
    assert db.ensure_vector_tables(database, "model-a", 4)
    with database.write():
        vectors.store(database, "idea_embeddings", "idea_id", [(1, "p", struct.pack("<4f", 1, 0, 0, 0))])
    assert vectors.knn(database, "idea_embeddings", "idea_id", struct.pack("<4f", 0, 1, 0, 0), 1) == [
        (1, pytest.approx(2**0.5, abs=0.01))
    ]
    # Another model is detected and vectors are held back until reembed.
    assert not db.ensure_vector_tables(database, "model-b", 8)
    assert "model-a" in database.get_meta("embed_model_mismatch")
    db.drop_vector_tables(database)
    assert db.ensure_vector_tables(database, "model-b", 8)
    assert database.get_meta("embed_model_mismatch") is None


def test_vectors_are_stored_as_int8_and_read_back_within_half_a_step(tmp_path):
    import random

    database = db.connect(tmp_path / "q.db")
    if not database.has_vec:
        pytest.skip("sqlite-vec unavailable")
    dim, rng = 384, random.Random(5)
    assert db.ensure_vector_tables(database, "m", dim)
    raw = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(v * v for v in raw) ** 0.5
    unit = [v / norm for v in raw]
    spiky = [0.9] + [0.0] * (dim - 1)  # beyond the int8 range of a 384-d model: clipped, not wrapped
    with database.write():
        vectors.store(database, "idea_embeddings", "idea_id", [(1, "p", struct.pack(f"<{dim}f", *unit))])
        vectors.store(database, "idea_embeddings", "idea_id", [(2, "p", struct.pack(f"<{dim}f", *spiky))])
    assert database.scalar("SELECT length(embedding) FROM idea_embeddings WHERE idea_id = 1") == dim
    back = vectors.vectors_of(database, "ideas", [1, 2])
    step = db.int8_scale(dim) / 127
    assert max(abs(a - b) for a, b in zip(struct.unpack(f"<{dim}f", back[1]), unit)) <= step / 2 + 1e-7
    assert struct.unpack(f"<{dim}f", back[2])[0] == pytest.approx(db.int8_scale(dim))
    database.close()


def test_without_sqlite_vec_everything_else_works(tmp_path, monkeypatch):
    """A Python whose sqlite3 cannot load extensions and no fallback driver: FTS5 still works."""
    monkeypatch.setenv("TOTAL_RECALL_DB_DRIVER", "stdlib")
    probe = sqlite3.connect(":memory:")
    if hasattr(probe, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions; the degraded path is not reachable")
    database = db.connect(tmp_path / "d.db")
    assert not database.has_vec
    assert "enable_load_extension" in database.vec_error or "extensions" in database.vec_error
    assert not db.ensure_vector_tables(database, "m", 4)
    database.execute("INSERT INTO files (id, path) VALUES (1, '/t')")
    database.execute(
        "INSERT INTO ideas (content, content_hash, intent, confidence, file_id, source_line, created_at, "
        "updated_at) VALUES ('we chose sqlite', 'h', 'decision', 0.9, 1, 1, 0, 0)"
    )
    assert database.scalar("SELECT rowid FROM ideas_fts WHERE ideas_fts MATCH 'sqlite'") == 1


def test_fts_triggers_follow_updates_and_deletes(tmp_path):
    database = db.connect(tmp_path / "f.db")
    database.execute("INSERT INTO files (id, path) VALUES (1, '/t')")
    database.execute(
        "INSERT INTO ideas (content, content_hash, intent, confidence, file_id, source_line, created_at, "
        "updated_at) VALUES ('use postgres', 'h', 'decision', 0.9, 1, 1, 0, 0)"
    )
    database.execute("UPDATE ideas SET content = 'use mysql' WHERE id = 1")
    assert database.scalar("SELECT count(*) FROM ideas_fts WHERE ideas_fts MATCH 'postgres'") == 0
    assert database.scalar("SELECT count(*) FROM ideas_fts WHERE ideas_fts MATCH 'mysql'") == 1
    database.execute("DELETE FROM ideas")
    assert database.scalar("SELECT count(*) FROM ideas_fts WHERE ideas_fts MATCH 'mysql'") == 0


def _scoped_corpus(database: db.Database) -> dict[int, str]:
    """Ideas, chunks and topics over three projects, one a prefix of another's path; {idea id: project}."""
    import random

    rng = random.Random(7)
    words = "redis cache expiry deploy docker helm caddy tls token login retry queue worker".split()
    projects = {"/p/atlas": 30, "/p/atlas-web": 30, "/p/zephyr": 6}
    database.execute("INSERT INTO files (id, path) VALUES (1, '/t.jsonl')")
    owners = {}
    line = 0
    for project, count in projects.items():
        for _ in range(count):
            line += 1
            text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
            cur = database.execute(
                "INSERT INTO ideas (content, content_hash, intent, confidence, file_id, source_line, "
                "project, created_at, updated_at) VALUES (?, ?, 'decision', 0.9, 1, ?, ?, 0, 0)",
                (text, f"h{line}", line, project),
            )
            owners[cur.lastrowid] = project
            database.execute(
                "INSERT INTO chunks (file_id, source_line, message_line, role, kind, project, content, "
                "context) VALUES (1, ?, ?, 'user', 'prompt', ?, ?, ?)",
                (line, line, project, text, rng.choice(words)),
            )
            # a topic (depth 1) on every line, the session itself (depth 0) on every fifth
            database.execute(
                "INSERT INTO spans (session_id, project, source_file, depth, name, summary, start_line, "
                "end_line, created_at, updated_at) VALUES ('s', ?, '/t.jsonl', ?, ?, ?, ?, ?, 0, 0)",
                (project, 0 if line % 5 == 0 else 1, rng.choice(words), text, line, line),
            )
    return owners


def test_a_search_scoped_to_one_project_ranks_its_rows_as_a_search_of_every_project_does(tmp_path):
    """Full-text search over one project ANDs the project's key inside FTS5 (0010, 0011): it returns
    exactly that project's matches (not those of a project whose path it prefixes) with the scores
    the same query gives them over every project; the key survives forget's index rebuild, and
    with one project left the scoped search is the unscoped one (I92)."""
    from total_recall import erasure, lookup

    database = db.connect(tmp_path / "k.db")
    owners = _scoped_corpus(database)
    chunk_owner = dict(database.all("SELECT id, project FROM chunks"))
    topic_owner = dict(database.all("SELECT id, project FROM spans WHERE depth > 0"))

    def check(project: str, kind: str, weights: str | None) -> None:
        owner = {"idea": owners, "chunk": chunk_owner, "span": topic_owner}[kind]
        for match in ('"redis" OR "tls"', '"deploy" OR "helm" OR "worker"', '"queue"'):
            everywhere = lookup.bm25(database, kind, match, None, 1000, weights)
            scoped = lookup.bm25(database, kind, match, [project], 1000, weights)
            assert scoped, (project, kind, match)
            assert {i for i, _ in scoped} == {i for i, _ in everywhere if owner[i] == project}
            assert dict(scoped) == pytest.approx({i: s for i, s in everywhere if owner[i] == project})
            assert [s for _, s in scoped] == sorted((s for _, s in scoped), reverse=True)

    for project in ("/p/atlas", "/p/atlas-web", "/p/zephyr"):
        check(project, "idea", None)
        check(project, "chunk", "1.0, 0.3")
        check(project, "span", None)
    assert lookup.bm25(database, "idea", '"redis"', ["/p/nowhere"], 100) == []

    erasure.rebuild_fts(database)  # forget rebuilds the indexes from the owner rows
    check("/p/atlas-web", "idea", None)
    check("/p/atlas-web", "chunk", "1.0, 0.3")
    check("/p/atlas-web", "span", None)

    database.execute("DELETE FROM ideas WHERE project != '/p/zephyr'")
    database.execute("DELETE FROM chunks WHERE project != '/p/zephyr'")
    database.execute("DELETE FROM spans WHERE project != '/p/zephyr'")
    check("/p/zephyr", "idea", None)  # the only project: no filter at all
    check("/p/zephyr", "chunk", "1.0, 0.3")
    check("/p/zephyr", "span", None)
    database.close()


# --- one transaction rule: write() nests as a savepoint (issue 11) ------------------------------------
def _meta(database: db.Database, key: str):
    return database.get_meta(key)


@pytest.fixture(params=STORES)
def database(request, tmp_path):
    """The nested-write tests run on both stores: one transaction rule (transactions.savepoint)."""
    if request.param == "sqlite":
        conn = db.connect(tmp_path / "m.db")
    else:
        from total_recall import pg

        conn = pg.connect(request.getfixturevalue("pg_url"))
    yield conn
    conn.close()


def test_a_nested_write_commits_with_the_outer_one(database):
    with database.write():
        database.set_meta("outer", 1)
        with database.write():
            database.set_meta("inner", 2)
        assert database.in_transaction  # the inner block did not commit the outer transaction
    assert (_meta(database, "outer"), _meta(database, "inner")) == ("1", "2")
    assert not database.in_transaction


def test_a_failing_nested_write_undoes_only_itself(database):
    with database.write():
        database.set_meta("outer", 1)
        with pytest.raises(ValueError):
            with database.write():
                database.set_meta("inner", 2)
                raise ValueError("inner step failed")
        database.set_meta("after", 3)
    assert (_meta(database, "outer"), _meta(database, "inner"), _meta(database, "after")) == ("1", None, "3")


def test_an_outer_rollback_takes_the_nested_writes_with_it(database):
    with pytest.raises(RuntimeError):
        with database.write():
            with database.write():
                database.set_meta("inner", 2)
            raise RuntimeError("the batch failed")
    assert _meta(database, "inner") is None
    assert not database.in_transaction


def test_a_dry_run_write_rolls_back_at_the_end(database):
    with database.write(commit=False):
        database.set_meta("tried", 1)
        assert _meta(database, "tried") == "1"
    with database.write():
        with database.write(commit=False):
            database.set_meta("nested_try", 1)
        database.set_meta("kept", 1)
    assert (_meta(database, "tried"), _meta(database, "nested_try"), _meta(database, "kept")) == (
        None,
        None,
        "1",
    )


# The vector tables as every database made before the chunk sizes were chosen has them (vec0's
# default chunk of 1,024 slots per project): a saved older layout, written as that code wrote it.
OLD_VEC_LAYOUT = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS idea_embeddings USING vec0("
    "idea_id INTEGER PRIMARY KEY, project TEXT PARTITION KEY, embedding float[{dim}])",
    "CREATE VIRTUAL TABLE IF NOT EXISTS span_embeddings USING vec0("
    "span_id INTEGER PRIMARY KEY, project TEXT PARTITION KEY, embedding float[{dim}])",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunk_embeddings USING vec0("
    "chunk_id INTEGER PRIMARY KEY, project TEXT PARTITION KEY, embedding float[{dim}])",
]


def test_an_old_vector_layout_is_rebuilt_with_its_vectors_and_the_file_shrinks(tmp_path):
    import random

    dim, path = 64, tmp_path / "old.db"
    database = db.connect(path)
    if not database.has_vec:
        pytest.skip("sqlite-vec unavailable")
    rng = random.Random(3)

    def blob() -> bytes:  # a unit vector, as embedding models give
        vec = [rng.gauss(0, 1) for _ in range(dim)]
        norm = sum(v * v for v in vec) ** 0.5
        return struct.pack(f"<{dim}f", *(v / norm for v in vec))

    with database.write():
        for sql in OLD_VEC_LAYOUT:
            database.execute(sql.format(dim=dim))
        for table, key in db.VECTOR_TABLES.items():
            database.executemany(
                f"INSERT INTO {table} ({key}, project, embedding) VALUES (?, ?, ?)",
                [(i, f"/p/{i % 12}", blob()) for i in range(1, 241)],
            )
        database.set_meta("embed_model", "m")
        database.set_meta("embed_dim", dim)
    queries = [blob() for _ in range(5)]

    before = [
        database.execute(
            f"SELECT {key}, distance FROM {table} WHERE embedding MATCH ? AND k = 20 AND project = ?",
            (q, "/p/3"),
        ).fetchall()
        for table, key in db.VECTOR_TABLES.items()
        for q in queries
    ]
    size_before = path.stat().st_size
    database.close()

    database = db.connect(path)  # an old database opens as it is, then the vector tables are rebuilt
    assert db.ensure_vector_tables(database, "m", dim)
    for table in db.VECTOR_TABLES:
        assert f"chunk_size={db.CHUNK_SIZES[table]}" in database.scalar(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
        )
        assert "int8[64]" in database.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
        assert database.scalar(f"SELECT count(*) FROM {table}") == 240
    # The float32 vectors became int8 ones: every KNN finds the same neighbours at the same
    # distances, to within the quantisation step (two neighbours this close may swap places).
    after = [
        vectors.knn(database, table, key, q, 20, "/p/3")
        for table, key in db.VECTOR_TABLES.items()
        for q in queries
    ]
    for old, new in zip(before, after):
        exact = {int(i): d for i, d in old}
        assert {i for i, _ in new} == set(exact)
        assert all(abs(d - exact[i]) < 0.01 for i, d in new)
    database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.stat().st_size < size_before / 3
    assert db.ensure_vector_tables(database, "m", dim)  # a second start changes nothing
    database.close()


# -- each transcript path once (0009) ------------------------------------------------------------

PROJECT = "/home/dev/projects/atlas"
TALK = [
    ("user", "We decided to keep the session cache in Redis with a 15 minute expiry."),
    ("assistant", "Agreed. The conclusion is that memcached dropped sessions under load."),
    ("user", "The deploy problem: Caddy fails to renew TLS certificates behind the proxy."),
    ("assistant", "The fix is to open port 80 so the ACME HTTP challenge reaches Caddy."),
    ("user", "Todo: write the runbook for rotating the Redis password."),
]
# A path is the longest text in the rows that name it; its own table holds it once.
PATH_OF = "(SELECT path FROM files WHERE id = {}.file_id)"


def _transcripts(tmp_path):
    from helpers import write_transcript

    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas"
    first = write_transcript(folder / "sess-a.jsonl", TALK, cwd=PROJECT)
    # Two facts said again (merged: two sources), and one of its own.
    second = write_transcript(
        folder / "sess-b.jsonl", [*TALK[:2], ("user", "The staging database runs on port 5433.")], cwd=PROJECT
    )
    return first, second


def test_a_transcript_path_is_stored_once_however_many_rows_name_it(tmp_path, fake, store):
    """Messages, chunks, ideas and idea sources name their transcript by a `files` id: each path is
    one row there, whatever the number of lines and memories said in it; results still carry the
    path; a forgotten session's path goes with the last row that named it (I87)."""
    from helpers import cli, cli_json, db_rows

    first, second = _transcripts(tmp_path)
    cli("backfill", "--all", "--wait")
    assert sorted(r[0] for r in db_rows("SELECT path FROM files")) == sorted([str(first), str(second)])
    for table in ("messages", "chunks", "ideas", "idea_sources"):
        named = db_rows(f"SELECT {PATH_OF.format('t')}, count(*) FROM {table} t GROUP BY 1 ORDER BY 1")
        assert all(path is not None for path, _ in named), table
    assert (
        db_rows("SELECT count(*) FROM messages")[0][0] >= len(TALK) + 3 > len(db_rows("SELECT * FROM files"))
    )
    [(mentions,)] = db_rows("SELECT mention_count FROM ideas WHERE content LIKE '%Redis with a 15 minute%'")
    assert mentions == 2  # two sources, two files, each path once
    found = cli_json("search", "session cache Redis expiry", "--all-projects")
    assert {r["source_file"] for r in found} <= {str(first), str(second)} and found[0]["source_line"] >= 1
    assert any(r["source_file"] == str(first) for r in found)

    cli_json("forget", "--session", "sess-a")  # with the memories it said, and so their lines in sess-b
    assert db_rows("SELECT path FROM files") == [(str(second),)]
    assert db_rows("SELECT count(*) FROM messages WHERE file_id NOT IN (SELECT id FROM files)") == [(0,)]


def _made_by(tmp_path, upto: int):
    """A folder holding the first `upto` migrations."""
    folder = tmp_path / f"m{upto}"
    folder.mkdir(exist_ok=True)
    for number, path in db.migration_files():
        if number <= upto:
            shutil.copy(path, folder / path.name)
    return folder


def _back_to_0008(path, tmp_path) -> None:
    """Rewrite a head database in the layout migrations 0001-0008 made (messages, chunks, ideas and
    idea_sources hold the path; no `files`; user_version 8), every id, vector and full-text row kept,
    as a database written by the code before 0009 would be."""
    scratch = db.connect(tmp_path / "v8.db", migrations_dir=_made_by(tmp_path, 8))
    tables = ("messages", "chunks", "ideas", "idea_sources", "spans")  # spans: as 0011 found them
    schema = scratch.all(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN "
        f"({', '.join('?' for _ in tables)})",
        tables,
    )
    scratch.close()
    database = db.connect(path, migrate_to_head=False)
    conn = database.conn
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN")
    for table in tables:
        create = next(r["sql"] for r in schema if r["type"] == "table" and r["name"] == table)
        conn.execute(create.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}_8", 1))
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table}_8)")]
        values = ", ".join(
            PATH_OF.format("t").split(" AS ")[0] if c == "source_file" and table != "spans" else f"t.{c}"
            for c in columns
        )
        conn.execute(f"INSERT INTO {table}_8 ({', '.join(columns)}) SELECT {values} FROM {table} t")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_8 RENAME TO {table}")
        for r in schema:
            if r["tbl_name"] == table and r["type"] in ("index", "trigger"):
                conn.execute(r["sql"])
    conn.execute("DROP TABLE files")
    conn.execute("DROP TABLE vector_changes")  # made by 0012
    conn.execute("ALTER TABLE index_state DROP COLUMN tail_hash")  # made by 0017
    conn.execute("PRAGMA user_version = 8")
    conn.execute("COMMIT")
    database.close()


# Columns a migration after 0009 added: a database made by 0008 has no values for them.
LATER_COLUMNS = ("uuid",)


def _everything(with_vectors: bool = True, without: tuple = ()) -> dict:
    """Every row of the tables that name a transcript, with its path, ids included; their full-text
    and vector rows."""
    from helpers import db_rows, fts_ids, stored_vectors

    out = {}
    for table in ("messages", "chunks", "ideas", "idea_sources"):
        columns = [r[1] for r in db_rows(f"PRAGMA table_info({table})") if r[1] not in without]
        named = [PATH_OF.format("t") if c in ("file_id", "source_file") else f"t.{c}" for c in columns]
        out[table] = sorted(db_rows(f"SELECT {', '.join(named)} FROM {table} t"), key=repr)
    for word in ("redis", "caddy", "runbook"):
        out[f"fts {word}"] = (fts_ids("ideas", word), fts_ids("chunks", word))
    if with_vectors:
        out["vectors"] = stored_vectors("ideas", [r[0] for r in db_rows("SELECT id FROM ideas")])
    return out


def test_a_database_made_by_0008_migrates_to_0009_with_every_row_search_and_forget_unchanged(tmp_path, fake):
    """0009 rebuilds messages, chunks, ideas and idea_sources around `files`: a database with rows
    made before it keeps every row and id, vector and full-text entry; search answers alike and
    forget removes what it removed (I87)."""
    from helpers import cli, cli_json, db_rows

    _transcripts(tmp_path)
    cli("backfill", "--all", "--wait")
    questions = ("session cache Redis expiry", "Caddy TLS certificates", "runbook for the Redis password")
    searched = [cli_json("search", q, "--all-projects") for q in questions]
    assert any(r.get("session") == "sess-a" for found in searched for r in found)
    forget = cli_json("forget", "--session", "sess-a", "--dry-run")
    rows = _everything(without=LATER_COLUMNS)

    path = config.paths().db
    _back_to_0008(path, tmp_path)
    old = db.connect(path, migrate_to_head=False)
    assert db.schema_version(old) == 8
    assert "source_file" in [r[1] for r in old.execute("PRAGMA table_info(ideas)")]
    old.close()

    db.connect(path).close()  # as the daemon or the CLI opens it: migrated
    assert _everything(without=LATER_COLUMNS) == rows
    assert db.schema_version(db.connect(path, migrate_to_head=False)) == len(db.migration_files())
    assert [cli_json("search", q, "--all-projects") for q in questions] == searched
    assert cli_json("forget", "--session", "sess-a", "--dry-run") == forget
    done = cli_json("forget", "--session", "sess-a")
    preview_only = ("dry_run", "would_forget")  # a dry run also lists the memories that would go
    assert {k: done[k] for k in forget if k not in preview_only} == {
        k: v for k, v in forget.items() if k not in preview_only
    }
    assert db_rows("SELECT count(*) FROM messages WHERE session_id = 'sess-a'") == [(0,)]
    assert all(
        r.get("session") != "sess-a" for q in questions for r in cli_json("search", q, "--all-projects")
    )


def test_recover_of_a_database_made_by_0008_keeps_every_row_under_its_path(tmp_path, fake):
    """`recover` copies a damaged file's rows into a new database: one made before 0009 names the
    transcript by its path, which the copy turns into a `files` id (its memories are kept, not
    extracted again)."""
    from helpers import cli, cli_json

    _transcripts(tmp_path)
    cli("backfill", "--all", "--wait")
    rows = _everything(with_vectors=False, without=("needs_embedding", *LATER_COLUMNS))  # embedded again
    _back_to_0008(config.paths().db, tmp_path)
    assert cli_json("recover", timeout=120)["recovered"]
    assert _everything(with_vectors=False, without=("needs_embedding", *LATER_COLUMNS)) == rows
