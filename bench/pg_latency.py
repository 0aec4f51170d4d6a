"""Warm search p50 on the PostgreSQL store against its raw floor and against the SQLite store, in one run.

    python bench/pg_latency.py [--ideas 100000] [--queries 40]

The synthetic SQLite database of bench/query_latency.py (bench/synthetic.py, cached under
bench/out/latency-<N>/) is copied row for row into a fresh PostgreSQL 16 + pgvector started from
the pgserver wheel (the test extra), with its vectors. Then, in this one process with the model
loaded once (what the daemon does; the socket round trip is measured by query_latency.py), over the
same queries, alternating so drift hits all alike:
  sqlite floor   one raw sqlite-vec KNN (k=10) plus one raw FTS5 query (LIMIT 10);
  sqlite search  search.run on memory.db (every strategy, fusion, second stage, results);
  pg floor       one raw pgvector KNN (ORDER BY embedding <-> q LIMIT 10, HNSW) plus one raw
                 full-text query (tsvector @@ query ORDER BY ts_rank_cd LIMIT 10, GIN);
  pg search      search.run on the PostgreSQL store (the same code, its dialect branches).
Query vectors for the floors are precomputed; every search embeds its query (3-4 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from query_latency import floor_query  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
TABLES = ("files", "spans", "ideas", "idea_sources", "entities", "idea_entities", "relations", "chunks")
VECTORS = (("idea_embeddings", "idea_id"), ("span_embeddings", "span_id"), ("chunk_embeddings", "chunk_id"))


def copy_into_postgres(lite: Any, pgdb: Any, model: str, dim: int) -> float:
    """Every memory row and vector of the SQLite store into the (migrated, empty) PostgreSQL one."""
    from total_recall import pg
    from total_recall.db import float_blob

    started = time.perf_counter()
    pg.ensure_vector_tables(pgdb, model, dim)
    conn = pgdb.conn
    # The synthetic generator repeats some texts within a project verbatim (rows never went through
    # the store's dedup); the copy keeps every row, so the one-fact index is left out here.
    conn.execute("DROP INDEX IF EXISTS ideas_one_fact")
    for table in TABLES:
        cols = [r[1] for r in lite.execute(f"PRAGMA table_info({table})")]
        targets = set(
            pgdb.column("SELECT column_name FROM information_schema.columns WHERE table_name = ?", (table,))
        )
        cols = [c for c in cols if c in targets]
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
            for row in lite.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                copy.write_row(tuple(row))
        if "id" in cols:
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            )
    for table, key in VECTORS:
        if not lite.scalar("SELECT count(*) FROM sqlite_master WHERE name = ?", (table,), 0):
            continue
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({key}, project, embedding) FROM STDIN") as copy:
            for row in lite.execute(f"SELECT {key}, project, embedding FROM {table}"):
                copy.write_row((row[0], row[1], pg.vector_text(float_blob(bytes(row[2])))))
    conn.execute("ANALYZE")
    return time.perf_counter() - started


def pg_floor(pgdb: Any, vector_text: str, words: str | None) -> None:
    pgdb.conn.execute(
        "SELECT idea_id FROM idea_embeddings ORDER BY embedding <-> %s::vector LIMIT 10", (vector_text,)
    ).fetchall()
    if words:
        pgdb.conn.execute(
            "SELECT id FROM ideas, "
            "(SELECT replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery AS q) w "
            "WHERE fts @@ w.q ORDER BY ts_rank_cd(fts, w.q) DESC LIMIT 10",
            (words,),
        ).fetchall()


def measure(lite: Any, pgdb: Any, settings: Any, embedder: Any, blob: bytes, text: str) -> dict[str, float]:
    """One query, four ways (module docstring), in milliseconds."""
    from total_recall import pg, query, search

    q = query.analyze(text)
    request = {"query": text, "all_projects": True, "k": 10}
    return {
        "sqlite floor": timed(floor_query, lite, blob, q.fts(), None),
        "sqlite search": timed(search.run, lite, settings, embedder, request),
        "pg floor": timed(pg_floor, pgdb, pg.vector_text(blob), " ".join(q.terms)),
        "pg search": timed(search.run, pgdb, settings, embedder, request),
    }


def timed(fn, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ideas", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args(argv)

    import pgserver

    from total_recall import config, pg
    from total_recall.embed import LocalEmbedder, to_blob

    folder = OUT / f"latency-{args.ideas}"
    folder.mkdir(parents=True, exist_ok=True)
    lite, built = synthetic.open_cached(folder / "memory.db", args.ideas)
    if built:
        print(f"built the SQLite store: {built}", file=sys.stderr)
    embedder = LocalEmbedder()
    settings = config.load(environ={})
    server = pgserver.get_server(tempfile.mkdtemp(prefix="pg-bench-"), cleanup_mode="delete")
    try:
        pgdb = pg.connect(server.get_uri())
        copied = copy_into_postgres(lite, pgdb, embedder.model_id, embedder.dim)
        print(f"copied {args.ideas} ideas into PostgreSQL in {copied:.1f} s", file=sys.stderr)
        queries = synthetic.queries(args.queries)
        vectors = {q: to_blob(embedder.embed([q])[0]) for q in queries}
        times: dict[str, list[float]] = {
            k: [] for k in ("sqlite floor", "sqlite search", "pg floor", "pg search")
        }
        for warm in queries[:3] + queries:
            sample = measure(lite, pgdb, settings, embedder, vectors[warm], warm)
            for key, ms in sample.items():
                times[key].append(ms)
        print(f"\nwarm search at {args.ideas:,} ideas, {len(queries)} queries, all projects (ms)\n")
        print("| measure | p50 | p95 |\n|---|---|---|")
        for key, values in times.items():
            values = values[3:]  # the first three were warm-up
            p95 = statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]
            print(f"| {key} | {statistics.median(values):.1f} | {p95:.1f} |")
        pgdb.close()
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
