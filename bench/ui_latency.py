"""How fast the web view answers on a large memory: `total-recall ui` as a real process, over HTTP.

    python bench/ui_latency.py [--ideas 100000] [--runs 40]

The database is bench/synthetic.py's (cached under bench/out/ui-<n>/), its conversation times
shifted so that the newest idea is from now: the first page (the timeline of the last 14 days)
then shows a busy fortnight, not an empty one. Each page is fetched once cold, then `runs` times;
the figures are wall-clock times of complete responses (p50/p95), measured by the client.
Target (issue 17): the first page in < 300 ms p50 on 100k ideas.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import synthetic  # noqa: E402

PAGES = {
    "timeline (first page)": "/",
    "timeline, one project": "/?project=/home/dev/projects/billing-api",
    "search": "/search?q=why+did+we+pick+postgres+for+the+retry+queue",
    "memory page": "/memory/{mid}",
    "session topics": "/session/sess-000100",
    "entity graph data": "/api/graph",
    "review": "/review",
}
TARGET_MS = 300.0


def shift_to_now(db: Any) -> float:
    """Move every conversation time so that the newest is now; return the shift in days."""
    from datetime import datetime, timezone

    newest = db.scalar("SELECT max(message_time) FROM ideas")
    last = datetime.fromisoformat(newest.replace("Z", "+00:00"))
    seconds = int((datetime.now(timezone.utc) - last).total_seconds())
    with db.write():
        db.execute(
            "UPDATE ideas SET message_time = strftime('%Y-%m-%dT%H:%M:%S.000Z', message_time, ?)",
            (f"{seconds:+d} seconds",),
        )
        for column in ("started_at", "ended_at"):
            db.execute(
                f"UPDATE spans SET {column} = strftime('%Y-%m-%dT%H:%M:%S.000Z', {column}, ?)",
                (f"{seconds:+d} seconds",),
            )
    return seconds / 86400


def start_ui(box: harness.Sandbox) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(
        [*harness.cli_argv(), "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=box.env(),
    )
    url = proc.stdout.readline().split(": ", 1)[1].strip()
    base, token = url.split("/?token=")
    return proc, base, f"total_recall_{base.rsplit(':', 1)[1]}={token}"


def fetch(base: str, path: str, cookie: str) -> tuple[float, int, int]:
    request = urllib.request.Request(base + path, headers={"Cookie": cookie})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
        status = answer.status
    return (time.perf_counter() - started) * 1000, status, len(body)


def measure(n: int, runs: int) -> dict[str, Any]:
    with harness.Sandbox(harness.OUT / f"ui-{n}") as box:
        database, built = synthetic.open_cached(box.db_path, n)
        shifted = shift_to_now(database)
        mid = database.scalar("SELECT id FROM ideas ORDER BY id DESC LIMIT 1 OFFSET 500")
        database.close()
        proc, base, cookie = start_ui(box)
        try:
            pages: dict[str, Any] = {}
            for label, path in PAGES.items():
                path = path.format(mid=mid)
                cold, status, size = fetch(base, path, cookie)
                assert status == 200, (path, status)
                warm = [fetch(base, path, cookie)[0] for _ in range(runs)]
                p50, p95 = harness.p50_p95(warm)
                pages[label] = {"path": path, "cold_ms": cold, "p50_ms": p50, "p95_ms": p95, "bytes": size}
        finally:
            harness.stop(proc)
    return {"ideas": n, "built": built, "shifted_days": round(shifted, 1), "runs": runs, "pages": pages}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"## Web view latency, {result['ideas']:,} ideas ({result['runs']} runs per page, after one cold)",
        "",
        "| page | cold ms | p50 ms | p95 ms | KB |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in result["pages"].items():
        lines.append(
            f"| {label} | {r['cold_ms']:.0f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
            f"| {r['bytes'] / 1024:.0f} |"
        )
    first = result["pages"]["timeline (first page)"]["p50_ms"]
    lines += [
        "",
        f"first page p50 {first:.1f} ms; target < {TARGET_MS:.0f} ms: "
        f"{'met' if first < TARGET_MS else 'NOT met'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ideas", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    harness.quiet()
    result = measure(args.ideas, args.runs)
    out = harness.OUT / f"ui_latency-{args.ideas}.json"
    out.write_text(json.dumps(result, indent=2))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
