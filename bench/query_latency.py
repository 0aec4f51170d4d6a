"""Search latency at 10k and 100k ideas, warm (daemon) and cold (fresh process), against the SQL floor.

    python bench/query_latency.py [--sizes 10000,100000] [--warm 40] [--cold 15]

Databases of synthetic ideas (bench/synthetic.py) are cached under bench/out/latency-<N>/ and
reused when present. For each size, over the same varied queries:
  floor         one raw sqlite-vec KNN (k=10, query vector precomputed) plus one raw FTS5 query
                (ORDER BY rank LIMIT 10) on the same database, in this process;
  query embed   embedding one query with the packaged model (part of every search, not of the floor);
  warm socket   the running daemon answering a search request over its socket (round trip alone);
  warm CLI      `total-recall search QUERY --json` while the daemon runs (full command);
  interpreter   the same interpreter running `-c "import json, socket"`: the floor of any CLI
                that talks to the socket (the warm CLI's target is <= 2x this);
  cold CLI      the same command with no daemon: a fresh process that loads everything itself.
Floor, socket and CLI calls alternate per query so drift hits all alike. Both scopes are measured
warm: every project (--all-projects) and one project (--project NAME, the common case).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import synthetic  # noqa: E402

SCOPES = {"all projects": None, "one project": synthetic.PROJECTS[3]}
WARM_UP = 3


def floor_query(db: Any, blob: bytes, match: str | None, project: str | None) -> None:
    """One raw KNN plus one raw FTS5 query: what any hybrid search must at least do (the query
    vector quantised as the store keeps vectors, int8)."""
    from total_recall.db import int8_blob

    blob = int8_blob(blob)
    if project is None:
        db.execute(
            "SELECT idea_id, distance FROM idea_embeddings WHERE embedding MATCH vec_int8(?) AND k = 10",
            (blob,),
        ).fetchall()
        if match:
            db.execute(
                "SELECT rowid FROM ideas_fts WHERE ideas_fts MATCH ? ORDER BY rank LIMIT 10", (match,)
            ).fetchall()
        return
    db.execute(
        "SELECT idea_id, distance FROM idea_embeddings WHERE embedding MATCH vec_int8(?) AND k = 10 "
        "AND project = ?",
        (blob, project),
    ).fetchall()
    if match:
        db.execute(
            "SELECT i.id FROM ideas_fts f JOIN ideas i ON i.id = f.rowid WHERE ideas_fts MATCH ? "
            "AND i.project = ? ORDER BY f.rank LIMIT 10",
            (match, project),
        ).fetchall()


def search_argv(query: str, scope: str | None) -> list[str]:
    return [
        *harness.cli_argv(),
        "search",
        query,
        "--json",
        "-k",
        "10",
        *(["--project", scope] if scope else ["--all-projects"]),
    ]


def run_cli(box: harness.Sandbox, query: str, scope: str | None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(search_argv(query, scope), capture_output=True, text=True, env=box.env())
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"search failed: {proc.stderr[-2000:]}")
    return elapsed


def run_interpreter() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import json, socket"], check=True)
    return time.perf_counter() - started


def ask_socket(box: harness.Sandbox, query: str, scope: str | None) -> float:
    from total_recall import server

    request = {
        "op": "search",
        "query": query,
        "k": 10,
        "project": scope,
        "all_projects": scope is None,
        "cwd": "/",
        "hyde": False,
    }
    started = time.perf_counter()
    answer = server.ask(box.home / "daemon.sock", request)
    elapsed = time.perf_counter() - started
    if not answer or answer.get("error") or "results" not in answer:
        raise RuntimeError(f"socket search failed: {answer}")
    return elapsed


class Floor:
    """The floor queries on one connection, with query vectors computed up front."""

    def __init__(self, box: harness.Sandbox, queries: list[str]):
        from total_recall import db as dbmod
        from total_recall import query as querymod
        from total_recall.embed import LocalEmbedder, to_blob

        self.db = dbmod.connect(box.db_path)
        embedder = LocalEmbedder()
        embedder.embed(["warm up"])
        self.embed_times = [harness.timed(embedder.embed, [q])[0] for q in queries]
        self.blobs = {q: to_blob(v) for q, v in zip(queries, embedder.embed(queries))}
        self.matches = {q: querymod.analyze(q).fts() for q in queries}

    def time(self, query: str, project: str | None) -> float:
        return harness.timed(floor_query, self.db, self.blobs[query], self.matches[query], project)[0]

    def close(self) -> None:
        self.db.close()


def measure_size(n: int, warm_runs: int, cold_runs: int) -> dict[str, Any]:
    root = harness.OUT / f"latency-{n}"
    with harness.Sandbox(root) as box:
        database, built = synthetic.open_cached(box.db_path, n)
        database.close()
        # Every timed call gets a query of its own: the daemon's embedder caches texts it has seen.
        queries = synthetic.queries(WARM_UP + 2 * len(SCOPES) * warm_runs + cold_runs)
        floor = Floor(box, queries)
        try:
            result: dict[str, Any] = {
                "ideas": n,
                "built": built,
                "db_mb": box.db_path.stat().st_size / 1e6,
                "query_embed": floor.embed_times,
            }
            result["warm"] = _warm(box, floor, queries[:-cold_runs] if cold_runs else queries, warm_runs)
            result["rss_kb"] = result["warm"].pop("_rss_kb")
            result["vector_cache"] = result["warm"].pop("_vector_cache")
            result["cold"] = _cold(box, floor, queries[len(queries) - cold_runs :] if cold_runs else [])
        finally:
            floor.close()
    return result


def _warm(
    box: harness.Sandbox, floor: Floor, queries: list[str], runs: int
) -> dict[str, dict[str, list[float]]]:
    daemon = box.start_daemon()
    try:
        box.wait_for_socket(daemon)
        out: dict[str, Any] = {"_vector_cache": box.wait_for_vector_cache(daemon)}
        for q in queries[:WARM_UP]:  # model load and page cache, not counted
            ask_socket(box, q, None)
        fresh = iter(queries[WARM_UP:])
        rss: list[int] = []
        for label, scope in SCOPES.items():
            project = synthetic.project_path(scope) if scope else None
            times: dict[str, list[float]] = {"floor": [], "socket": [], "cli": [], "interpreter": []}
            for _ in range(runs):
                q = next(fresh)
                times["floor"].append(floor.time(q, project))
                times["socket"].append(ask_socket(box, q, scope))
                times["cli"].append(run_cli(box, next(fresh), scope))
                times["interpreter"].append(run_interpreter())
                rss.append((harness.rss_kb(daemon.pid) or 0, harness.rss_kb(daemon.pid, "RssAnon") or 0))
            out[label] = times
        out["_rss_kb"] = rss  # the daemon's VmRSS after each warm round, while it serves searches
        return out
    finally:
        harness.stop(daemon)


def _cold(box: harness.Sandbox, floor: Floor, queries: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"floor": [], "cli": []}
    for q in queries:
        times["floor"].append(floor.time(q, None))
        times["cli"].append(run_cli(box, q, None))
    return times


def render(results: list[dict[str, Any]]) -> str:
    out = ["## query latency"]
    for r in results:
        built = f"built in {r['built']['total_seconds']:.0f} s" if r["built"] else "cached"
        embed50 = statistics.median(r["query_embed"])
        out += [
            "",
            f"### {r['ideas']:,} ideas (database {r['db_mb']:.0f} MB, {built}); "
            f"one query embedding: {harness.ms(embed50)} p50",
        ]
        rows = []
        for scope, t in r["warm"].items():
            f50 = statistics.median(t["floor"])
            rows += [
                _row(f"floor: raw KNN + FTS5 ({scope})", t["floor"], f50),
                _row(f"warm: socket round trip ({scope})", t["socket"], f50),
                _row(f"warm: full CLI call ({scope})", t["cli"], f50),
                _row(f"interpreter: -c 'import json, socket' ({scope})", t["interpreter"], f50),
                [f"warm: full CLI call / interpreter ({scope})", "", "", "", f"{cli_ratio(t):.2f}x"],
            ]
        c = r["cold"]
        if c["floor"]:
            f50 = statistics.median(c["floor"])
            rows += [
                _row("floor: raw KNN + FTS5 (all projects, cold series)", c["floor"], f50),
                _row("cold: fresh CLI process (all projects)", c["cli"], f50),
            ]
        out.append(harness.table(["measurement", "runs", "p50", "p95", "p50 / floor p50"], rows))
        if r.get("vector_cache"):
            state, seconds = r["vector_cache"]
            out.append(f"the daemon's vectors in memory: {state} {seconds:.1f} s after its start")
        if r.get("rss_kb"):
            out.append(
                f"daemon RSS while serving searches (after each warm round): VmRSS max "
                f"{max(v for v, _ in r['rss_kb']) / 1024:.0f} MB, of which anonymous (RssAnon) max "
                f"{max(a for _, a in r['rss_kb']) / 1024:.0f} MB; the rest is the model file and the "
                "memory-mapped database (mmap_size 256 MB), pages the kernel can drop"
            )
    out.append(
        "\ntarget: warm p50 at 100k ideas <= 2x the floor (socket round trip is the search itself; "
        "the CLI adds interpreter start-up)"
    )
    return "\n".join(out)


def cli_ratio(times: dict[str, list[float]]) -> float:
    """The warm CLI's p50 over the bare interpreter's p50, same run (target <= 2x)."""
    return statistics.median(times["cli"]) / statistics.median(times["interpreter"])


def _row(label: str, values: list[float], floor50: float) -> list[Any]:
    p50, p95 = harness.p50_p95(values)
    return [label, len(values), harness.ms(p50), harness.ms(p95), f"{p50 / floor50:.2f}x"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="idea counts, comma-separated")
    parser.add_argument("--warm", type=int, default=40, help="warm queries per scope")
    parser.add_argument("--cold", type=int, default=15, help="cold (fresh process) queries")
    args = parser.parse_args(argv)
    harness.quiet()
    harness.compile_package()
    results = [measure_size(int(n), args.warm, args.cold) for n in args.sizes.split(",") if n.strip()]
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
