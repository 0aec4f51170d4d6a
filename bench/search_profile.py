"""Where one search's time goes, part by part, against the floor: the profile behind §3's ratios.

    python bench/search_profile.py [--sizes 100000,1000000] [--queries 20]

On the cached synthetic database of each size (bench/query_latency.py builds it once under
bench/out/), one process with the model loaded runs `search.run` for fresh queries in both scopes
(every project, one project), one strategy after another on one connection (the socket server's
two threads share them on two connections: the sum below is what the two cores share). Each query
times:

  embed      the query's vector (the floor has it precomputed)
  <strategy> every strategy the search runs (KNN and BM25 over ideas, chunks and spans, entities),
             timed by running each job of the search's own job list alone
  rest       everything else of search.run: fusion, rows, the second stage over the head's lines,
             the results
  floor      bench/query_latency.py's floor: one KNN (k = 10) and one FTS5 query (LIMIT 10)
  floor, keyed  the same with the FTS5 query in the form the search uses since migration 0010 (the
             project's key ANDed in the MATCH instead of a join to the owner rows; one project only)

Prints medians per part, each part's share of the search and the search / floor ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import query_latency  # noqa: E402
import synthetic  # noqa: E402

WARM_UP = 3


class TimedEmbedder:
    """The packaged embedder, with the time of every call kept (the query's embedding)."""

    def __init__(self, inner: Any):
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.seconds: list[float] = []

    def embed(self, texts: list[str]) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds.append(time.perf_counter() - started)


def keyed_floor(floor: query_latency.Floor, text: str, project: str) -> None:
    """The floor over one project with its FTS5 query keyed as lookup.bm25 keys it."""
    from total_recall import lookup
    from total_recall.db import int8_blob

    floor.db.execute(
        "SELECT idea_id, distance FROM idea_embeddings WHERE embedding MATCH vec_int8(?) AND k = 10 "
        "AND project = ?",
        (int8_blob(floor.blobs[text]), project),
    ).fetchall()
    if match := floor.matches[text]:
        floor.db.execute(
            "SELECT rowid FROM ideas_fts WHERE ideas_fts MATCH ? ORDER BY bm25(ideas_fts, 1.0, 0.0) LIMIT 10",
            (lookup.keyed_match("ideas_fts", match, project),),
        ).fetchall()


def profile_size(n: int, queries_per_scope: int) -> dict[str, dict[str, list[float]]]:
    from total_recall import config, search, vector_cache
    from total_recall import db as dbmod
    from total_recall.embed import LocalEmbedder

    parts: dict[str, list[float]] = defaultdict(list)
    run_jobs = search._run_jobs

    def timed_jobs(ctx: Any, jobs: dict, vectors: Any = ()) -> dict:
        # The first vector job embeds the query (search.Once): that time is the "embed" part's.
        out = {}
        for name, (kind, fn) in jobs.items():
            embedded = sum(embedder.seconds)
            started = time.perf_counter()
            out[name] = (kind, fn(ctx))
            parts[name].append(time.perf_counter() - started - (sum(embedder.seconds) - embedded))
        return out

    root = harness.OUT / f"latency-{n}"
    result: dict[str, dict[str, list[float]]] = {}
    with harness.Sandbox(root) as box:
        database, _ = synthetic.open_cached(box.db_path, n)
        database.close()
        texts = synthetic.queries(WARM_UP + 2 * queries_per_scope, seed=17)
        floor = query_latency.Floor(box, texts)
        settings = config.load()
        db = dbmod.open_store(settings)
        # As the daemon's search server runs it: with the store's vectors in memory (unless they
        # exceed search.vector_cache_mb, as at 1M ideas, when sqlite-vec scans them).
        cache = vector_cache.VectorCache(
            settings.search.vector_cache_mb << 20, lambda: dbmod.open_store(settings)
        )
        cache.load(db)
        db.vectors_in_memory = cache
        result["_vector_cache"] = cache.state  # type: ignore[assignment]
        embedder = TimedEmbedder(LocalEmbedder())
        embedder.embed(["warm up"])
        search._run_jobs = timed_jobs
        try:
            fresh = iter(texts)
            for text in [next(fresh) for _ in range(WARM_UP)]:
                search.run(db, settings, embedder, {"query": text, "k": 10, "all_projects": True})
            for label, scope in query_latency.SCOPES.items():
                project = synthetic.project_path(scope) if scope else None
                times: dict[str, list[float]] = defaultdict(list)
                for _ in range(queries_per_scope):
                    text = next(fresh)
                    parts.clear()
                    embedder.seconds.clear()
                    times["floor"].append(floor.time(text, project))
                    if project:
                        times["floor, keyed"].append(harness.timed(keyed_floor, floor, text, project)[0])
                    request = {"query": text, "k": 10, "project": scope, "all_projects": scope is None}
                    started = time.perf_counter()
                    search.run(db, settings, embedder, request)
                    total = time.perf_counter() - started
                    times["search"].append(total)
                    times["embed"].append(sum(embedder.seconds))
                    for name, values in parts.items():
                        times[name].append(sum(values))
                    times["rest"].append(total - sum(embedder.seconds) - sum(map(sum, parts.values())))
                result[label] = dict(times)
        finally:
            search._run_jobs = run_jobs
            db.close()
            floor.close()
    return result


def render(n: int, result: dict[str, dict[str, list[float]]]) -> str:
    state = result.pop("_vector_cache", "off")
    out = [
        f"## where a search's time goes, {n:,} ideas (in-process, one connection, medians; "
        f"the daemon's vectors in memory: {state})"
    ]
    for label, times in result.items():
        search50 = statistics.median(times["search"])
        floor50 = statistics.median(times["floor"])
        rows = []
        for name, values in sorted(times.items(), key=lambda kv: -statistics.median(kv[1])):
            if name == "search" or name.startswith("floor"):
                continue
            p50 = statistics.median(values)
            rows.append(
                [name, len(values), harness.ms(p50), f"{p50 / search50:.0%}", f"{p50 / floor50:.2f}x"]
            )
        rows.append(
            ["**search**", len(times["search"]), harness.ms(search50), "100%", f"{search50 / floor50:.2f}x"]
        )
        rows.append(["floor (KNN + FTS5)", len(times["floor"]), harness.ms(floor50), "", "1.00x"])
        if keyed := times.get("floor, keyed"):
            k50 = statistics.median(keyed)
            rows.append(["floor, keyed FTS5", len(keyed), harness.ms(k50), "", f"{k50 / floor50:.2f}x"])
            rows.append(["search / keyed floor", "", "", "", f"{search50 / k50:.2f}x"])
        out += [f"\n### {label}\n", harness.table(["part", "runs", "p50", "share", "/ floor p50"], rows)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated idea counts (cached databases)")
    parser.add_argument("--queries", type=int, default=20, help="queries per scope")
    args = parser.parse_args()
    harness.quiet()
    harness.print_machine()
    for n in (int(s) for s in args.sizes.split(",")):
        print(render(n, profile_size(n, args.queries)), flush=True)


if __name__ == "__main__":
    main()
