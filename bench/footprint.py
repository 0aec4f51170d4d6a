"""Database bytes per indexed message, and the daemon's resident memory idle and during a backfill.

    python bench/footprint.py [--data PATH] [--messages 800]

Starts `total-recall daemon` in a throw-away home, reads its VmRSS from /proc once it answers on
its socket (idle, model not loaded yet), queues LoCoMo transcripts with `total-recall backfill
DIR` (the daemon does the work), samples VmRSS every 100 ms until the queue is empty (peak, and
the kernel's VmHWM), then idle again after the backfill (model loaded). After the daemon stops
(its WAL checkpointed), the database size is divided by the messages indexed; where SQLite's
dbstat table is available the bytes are broken down by table.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import locomo  # noqa: E402
from indexing import corpus_of  # noqa: E402

SETTLE_SECONDS = 3.0


def _queue_left(db_path: Path) -> int:
    conn = sqlite3.connect(db_path, timeout=30)
    try:
        return conn.execute(
            "SELECT count(*) FROM work_queue WHERE state IN ('pending', 'claimed')"
        ).fetchone()[0]
    finally:
        conn.close()


def _watch(pid: int, db_path: Path, timeout: float) -> tuple[int, int, float]:
    """Sample VmRSS and RssAnon until the queue is drained; (peak kB, peak anonymous kB, seconds)."""
    started, peak, anon = time.monotonic(), 0, 0
    while time.monotonic() - started < timeout:
        peak = max(peak, harness.rss_kb(pid) or 0)
        anon = max(anon, harness.rss_kb(pid, "RssAnon") or 0)
        if _queue_left(db_path) == 0:
            break
        time.sleep(0.1)
    return peak, anon, time.monotonic() - started


def _sizes(db_path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db_path)
    try:
        out: dict[str, Any] = {
            "messages": conn.execute("SELECT count(*) FROM messages").fetchone()[0],
            "ideas": conn.execute("SELECT count(*) FROM ideas").fetchone()[0],
            "projects": conn.execute("SELECT count(DISTINCT project) FROM ideas").fetchone()[0],
        }
        out["vector_slots"] = {
            t: _slots(conn, t) for t in ("idea_embeddings", "span_embeddings", "chunk_embeddings")
        }
        try:
            rows = conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
            out["by_table"] = _group(rows)
        except sqlite3.Error:
            out["by_table"] = None  # this SQLite was built without dbstat
        return out
    finally:
        conn.close()


def _slots(conn: sqlite3.Connection, table: str) -> tuple[int, int] | None:
    """(vectors stored, vector slots allocated) of a vec0 table: it allocates whole chunks per partition."""
    try:
        used = conn.execute(f"SELECT count(*) FROM {table}_rowids").fetchone()[0]
        chunks = conn.execute(f"SELECT count(*), max(size) FROM {table}_chunks").fetchone()
    except sqlite3.Error:
        return None
    return int(used), int(chunks[0] * (chunks[1] or 0))


def _group(rows: list[tuple[str, int]]) -> dict[str, int]:
    """Bytes per logical table: FTS5 and vec0 shadow tables folded into their virtual table."""
    groups: dict[str, int] = {}
    for name, size in rows:
        for prefix in (
            "idea_embeddings",
            "span_embeddings",
            "chunk_embeddings",
            "ideas_fts",
            "spans_fts",
            "chunks_fts",
        ):
            if name.startswith(prefix):
                name = prefix
        if name.startswith("sqlite_autoindex_"):
            name = name.split("_")[2]
        groups[name] = groups.get(name, 0) + int(size)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]))


def measure(samples: list[dict], messages: int) -> dict[str, Any]:
    with harness.Sandbox() as box:
        box.cli("init", "--json")
        daemon = box.start_daemon()
        try:
            box.wait_for_socket(daemon)
            time.sleep(SETTLE_SECONDS)
            idle_start = harness.rss_kb(daemon.pid)
            root = box.claude / "projects"  # only transcripts under it are read
            _, total = corpus_of(samples, root, messages)
            box.cli("backfill", str(root), "--json")
            peak, peak_anon, seconds = _watch(daemon.pid, box.db_path, timeout=3600)
            hwm = harness.rss_kb(daemon.pid, "VmHWM")
            time.sleep(SETTLE_SECONDS)
            idle_after = harness.rss_kb(daemon.pid)
            idle_anon, idle_file = (
                harness.rss_kb(daemon.pid, "RssAnon"),
                harness.rss_kb(daemon.pid, "RssFile"),
            )
        finally:
            harness.stop(daemon)
        size = box.db_path.stat().st_size
        wal = Path(str(box.db_path) + "-wal")
        sizes = _sizes(box.db_path)
    return {
        "transcript_messages": total,
        "backfill_seconds": seconds,
        "idle_start_kb": idle_start,
        "peak_sampled_kb": peak,
        "peak_anon_kb": peak_anon,
        "hwm_kb": hwm,
        "idle_after_kb": idle_after,
        "idle_after_anon_kb": idle_anon,
        "idle_after_file_kb": idle_file,
        "db_bytes": size,
        "wal_left": wal.exists(),
        **sizes,
    }


def render(r: dict[str, Any]) -> str:
    mb = lambda kb: f"{(kb or 0) / 1024:.0f} MB"  # noqa: E731
    per_msg = r["db_bytes"] / max(1, r["messages"])
    out = [
        "## footprint",
        harness.table(
            ["figure", "value"],
            [
                ["messages indexed", r["messages"]],
                ["ideas", r["ideas"]],
                ["projects", r["projects"]],
                ["database size", f"{r['db_bytes'] / 1e6:.1f} MB"],
                ["database bytes per message", f"{per_msg:,.0f}"],
                ["daemon RSS idle at start (model not loaded)", mb(r["idle_start_kb"])],
                [
                    "daemon RSS peak during backfill (sampled / VmHWM)",
                    f"{mb(r['peak_sampled_kb'])} / {mb(r['hwm_kb'])}",
                ],
                ["daemon RSS peak, anonymous memory only (RssAnon)", mb(r["peak_anon_kb"])],
                ["daemon RSS idle after backfill (model loaded)", mb(r["idle_after_kb"])],
                [
                    "  of which anonymous / file-backed (model file, mmap'd database)",
                    f"{mb(r['idle_after_anon_kb'])} / {mb(r['idle_after_file_kb'])}",
                ],
                ["backfill time (s)", f"{r['backfill_seconds']:.0f}"],
                *[
                    [f"{t}: vectors stored / slots allocated", f"{v[0]:,} / {v[1]:,}" if v else "n/a"]
                    for t, v in r["vector_slots"].items()
                ],
            ],
        ),
    ]
    if r.get("by_table"):
        rows = [
            [name, f"{size / 1e6:.2f} MB", f"{size / max(1, r['messages']):,.0f}"]
            for name, size in r["by_table"].items()
            if size >= 4096 * 4
        ]
        out += ["", "bytes by table (dbstat):", harness.table(["table", "size", "bytes per message"], rows)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument("--messages", type=int, default=800, help="messages to backfill")
    args = parser.parse_args(argv)
    harness.quiet()
    print(render(measure(locomo.load(args.data), args.messages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
