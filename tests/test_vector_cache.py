"""The daemon's vectors in memory (vector_cache.py) rank exactly as sqlite-vec does and follow
every write: new, replaced and deleted vectors, a dropped table, a budget it does not fit.

Real SQLite files with sqlite-vec, real vectors.store/delete (the writers the indexer and
`forget` use); the daemon test runs the daemon as a process and asks its socket.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import cli, cli_json, daemon_process, wait_for, write_transcript
from total_recall import config, db, server, vector_cache, vectors

DIM = 32
PROJECTS = ("/p/a", "/p/b", "")  # "" is the partition of rows without a project


def unit(rng: np.random.Generator) -> bytes:
    v = rng.normal(size=DIM).astype("<f4")
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


@pytest.fixture
def store(tmp_path):
    database = db.connect(tmp_path / "memory.db")
    assert db.ensure_vector_tables(database, "m", DIM)
    rng = np.random.default_rng(7)
    with database.write():
        for n in range(1, 301):
            project = PROJECTS[n % 3]
            vectors.store(database, "chunk_embeddings", "chunk_id", [(n, project, unit(rng))])
            vectors.store(database, "idea_embeddings", "idea_id", [(n, project, unit(rng))])
    yield database, rng
    database.close()


def ranked(database, blob: bytes, project: str | None, table: str = "chunk_embeddings") -> list:
    return vectors.knn(database, table, db.VECTOR_TABLES[table], blob, 20, project)


def same_ranking(cached: list, exact: list) -> None:
    """Same neighbours at the same distances (sqlite-vec rounds through float32; ties may swap)."""
    assert len(cached) == len(exact)
    for (ci, cd), (ei, ed) in zip(cached, exact):
        assert abs(cd - ed) < 1e-4
        assert ci == ei or abs(cd - ed) < 1e-4 and dict(exact).get(ci) is not None


def loaded(database) -> vector_cache.VectorCache:
    cache = vector_cache.VectorCache(64 << 20, lambda: db.connect(database.path))
    cache.load(database)
    assert cache.state == "ready"
    database.vectors_in_memory = cache
    return cache


def test_cached_neighbours_are_sqlite_vecs_in_every_scope(store):
    database, rng = store
    queries = [unit(rng) for _ in range(10)]
    exact = {
        (q, p, t): ranked(database, q, p, t)
        for q in queries
        for p in (*PROJECTS, None)
        for t in db.VECTOR_TABLES
    }
    cache = loaded(database)
    for (q, p, t), want in exact.items():
        got = ranked(database, q, p, t)
        if t == "span_embeddings":
            assert got == want == []  # an empty table: nothing either way
            continue
        assert got
        if p is not None:
            assert {i % 3 for i, _ in got} == {PROJECTS.index(p)}  # only that project's vectors
        same_ranking(got, want)
    assert cache.seq == database.scalar("SELECT max(seq) FROM vector_changes")


def test_the_cache_follows_new_replaced_and_deleted_vectors(store):
    database, rng = store
    cache = loaded(database)
    new, replaced = unit(rng), unit(rng)
    with database.write():
        vectors.store(database, "chunk_embeddings", "chunk_id", [(1000, "/p/a", new)])  # new key
        vectors.store(database, "chunk_embeddings", "chunk_id", [(3, "/p/a", replaced)])  # key 3 moves
        vectors.delete(database, "chunks", [6, 9, 12])  # three of /p/a's
    # Each query is one of the vectors: itself first at distance 0.
    assert ranked(database, new, "/p/a")[0] == (1000, pytest.approx(0, abs=1e-3))
    assert ranked(database, replaced, "/p/a")[0] == (3, pytest.approx(0, abs=1e-3))
    assert ranked(database, new, None)[0][0] == 1000
    assert cache.state == "ready" and cache.seq == database.scalar("SELECT max(seq) FROM vector_changes")
    for q in [unit(rng) for _ in range(10)]:
        got = ranked(database, q, "/p/a")
        assert not {6, 9, 12} & {i for i, _ in got}  # deleted: never found again
        database.vectors_in_memory = None
        want = ranked(database, q, "/p/a")
        database.vectors_in_memory = cache
        same_ranking(got, want)
    # A deleted key's old vector is not found by its own vector either.
    with database.write():
        vectors.delete(database, "chunks", [1000])
    assert 1000 not in {i for i, _ in ranked(database, new, None)}


def test_a_dropped_table_or_a_log_it_fell_behind_reloads_everything_in_the_background(store):
    database, rng = store
    cache = loaded(database)
    db.drop_vector_tables(database)  # a new model: every vector goes, key -1 in the log
    assert not cache.current(database)  # cannot serve; loads again in the background
    assert wait_for(lambda: cache.state == "ready", timeout=30, interval=0.05)
    assert cache.tables == {}
    assert db.ensure_vector_tables(database, "m", DIM)
    with database.write():
        vectors.store(database, "chunk_embeddings", "chunk_id", [(5, "/p/b", (v := unit(rng)))])
    # Found by sqlite-vec while the cache, loaded when there were no tables, loads again.
    assert ranked(database, v, None) == [(5, pytest.approx(0, abs=1e-3))]
    assert wait_for(lambda: cache.state == "ready" and cache.current(database), timeout=30, interval=0.05)
    assert ranked(database, v, None) == [(5, pytest.approx(0, abs=1e-3))]
    # The log kept only its newest rows while the cache was not looking: it cannot catch up by
    # reading it, so it loads again (and the vectors written meanwhile are found).
    with database.write():
        for _ in range(2):  # two changes, and the older one trimmed
            database.execute("INSERT INTO vector_changes (vec_table, key) VALUES ('chunk_embeddings', 5)")
        database.execute("DELETE FROM vector_changes WHERE seq < (SELECT max(seq) FROM vector_changes)")
        vectors.store(database, "chunk_embeddings", "chunk_id", [(6, "/p/b", (w := unit(rng)))])
    assert not cache.current(database)
    assert wait_for(lambda: cache.state == "ready", timeout=30, interval=0.05)
    assert ranked(database, w, "/p/b")[0][0] == 6 and ranked(database, v, "/p/b")[0][0] == 5


def test_a_transaction_reads_its_own_vectors_and_the_cache_never_takes_them_in(store):
    """The indexer's duplicate check reads vectors its transaction has not committed: inside a
    transaction sqlite-vec answers, and a rolled-back vector never reaches the cache."""
    database, rng = store
    cache = loaded(database)
    seq = cache.seq
    with database.write(commit=False):  # rolled back at the end
        vectors.store(database, "idea_embeddings", "idea_id", [(5000, "/p/a", (v := unit(rng)))])
        assert ranked(database, v, "/p/a", "idea_embeddings")[0][0] == 5000
        assert cache.seq == seq
    assert cache.current(database) and cache.seq == seq
    assert 5000 not in {i for i, _ in ranked(database, v, "/p/a", "idea_embeddings")}


def test_a_cache_that_cannot_read_its_log_leaves_every_search_to_sqlite_vec(store):
    database, rng = store
    cache = loaded(database)
    q = unit(rng)
    with database.write():
        database.execute("DROP TABLE vector_changes")  # nothing tells it what changed any more
    got = ranked(database, q, "/p/b")
    assert wait_for(lambda: cache.state == "failed", timeout=30, interval=0.05)
    assert cache.tables is None and not cache.current(database)
    database.vectors_in_memory = None
    assert got == ranked(database, q, "/p/b")


def test_vectors_beyond_the_budget_are_left_to_sqlite_vec(store):
    database, rng = store
    cache = vector_cache.VectorCache(100 * DIM, lambda: db.connect(database.path))  # room for 100
    cache.load(database)
    assert cache.state == "too large" and cache.tables is None
    database.vectors_in_memory = cache
    q = unit(rng)
    got = ranked(database, q, "/p/b")
    database.vectors_in_memory = None
    assert got == ranked(database, q, "/p/b")


def test_a_store_that_grows_past_the_budget_is_left_to_sqlite_vec(store):
    database, rng = store
    cache = vector_cache.VectorCache(700 * DIM, lambda: db.connect(database.path))  # 600 held, room for 700
    cache.load(database)
    assert cache.state == "ready"
    database.vectors_in_memory = cache
    with database.write():
        for n in range(2000, 2200):
            vectors.store(database, "chunk_embeddings", "chunk_id", [(n, "/p/a", unit(rng))])
    q = unit(rng)
    got = ranked(database, q, "/p/a")
    assert cache.state == "too large" and cache.tables is None
    database.vectors_in_memory = None
    assert got == ranked(database, q, "/p/a")


def test_the_log_keeps_only_its_newest_rows(store):
    database, _ = store
    assert database.scalar("SELECT count(*) FROM vector_changes") == 600  # 300 ideas, 300 chunks
    with database.write():
        db.log_vector_changes(database, "chunk_embeddings", list(range(db.VECTOR_CHANGES_KEPT + 50)))
    assert database.scalar("SELECT count(*) FROM vector_changes") == db.VECTOR_CHANGES_KEPT


def test_the_daemon_serves_from_memory_and_forgets_what_is_forgotten(tmp_path):
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-vc"
    talk = [("user", "We chose Meilisearch for the catalogue because Elasticsearch is too heavy.")]
    cli("backfill", str(write_transcript(folder / "one.jsonl", talk, cwd="/home/dev/projects/vc")), "--wait")
    socket_path = config.paths().socket
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        assert wait_for(
            lambda: server.ask(socket_path, {"op": "ping"})["vector_cache"] == "ready",
            timeout=60,
            interval=0.2,
        )
        assert cli_json("doctor", "--fast")["daemon"]["vectors_in_memory"] == "ready"
        hits = cli_json("search", "which search engine for the catalogue", "--all-projects")
        idea = next(r for r in hits if r["kind"] == "idea" and "Meilisearch" in r["content"])
        cli("forget", str(idea["id"]))
        after = cli_json("search", "which search engine for the catalogue", "--all-projects")
        assert not [r for r in after if "Meilisearch" in r["content"]]
        assert server.ask(socket_path, {"op": "ping"})["vector_cache"] == "ready"
    assert proc.returncode == 0


def test_a_reload_asked_for_while_a_load_is_ending_is_not_dropped(store):
    """A search that finds the cache behind asks for a reload; if the previous load had set its
    state but not yet returned, that request was dropped and the cache stayed off for good (the
    flake of the test above under load). The next search asks again."""
    database, rng = store
    cache = loaded(database)
    cache._loading = True  # a load thread between setting its state and returning, as the race left it
    with database.write():
        vectors.store(database, "chunk_embeddings", "chunk_id", [(7, "/p/c", (v := unit(rng)))])
        database.execute("DELETE FROM vector_changes WHERE seq < (SELECT max(seq) FROM vector_changes)")
        database.execute("INSERT INTO vector_changes (vec_table, key) VALUES ('chunk_embeddings', -1)")
    assert not cache.current(database)  # behind: a reload is asked for, and refused by the running one
    assert cache.state == "reloading"
    cache._loading = False  # that thread returns
    assert not cache.current(database)  # the next search asks again
    assert wait_for(lambda: cache.state == "ready" and cache.current(database), timeout=30, interval=0.05)
    assert ranked(database, v, "/p/c")[0][0] == 7
