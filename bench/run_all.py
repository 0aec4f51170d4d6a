"""Run every benchmark, print each one's figures, then a summary against the targets of issue 6.

    python bench/run_all.py [--quick] [--only hook,indexing,latency,recall,footprint] [--scale 1m]

Defaults are each script's defaults; --quick shrinks the sizes (hook 50 runs, indexing 800
messages, latency at 10k ideas only, footprint 400 messages) for a smoke run of a few minutes.
--scale 1m adds the 1M-idea search figures (`--only scale --scale 1m` runs them alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import footprint  # noqa: E402
import harness  # noqa: E402
import hook_cost  # noqa: E402
import indexing  # noqa: E402
import locomo  # noqa: E402
import query_latency  # noqa: E402
import recall  # noqa: E402

ALL = ("hook", "indexing", "latency", "recall", "footprint")
SCALES = {"1m": 1_000_000}


def run_hook(quick: bool) -> tuple[str, list[list[str]]]:
    r = hook_cost.measure(50 if quick else 200)
    held, alone = r["held hook"][0] / r["held floor"][0], r["hook"][0] / r["floor"][0]
    return hook_cost.render(r), [
        [
            "hook p50 / interpreter floor (database held open, as by the daemon)",
            f"{held:.2f}x",
            "<= 1.20x",
            _met(held <= 1.2),
        ],
        [
            "hook p50 / interpreter floor (no daemon: the hook checkpoints the WAL)",
            f"{alone:.2f}x",
            "<= 1.20x",
            _met(alone <= 1.2),
        ],
    ]


def run_indexing(quick: bool, data: Path) -> tuple[str, list[list[str]]]:
    samples = locomo.load(data)
    messages = 800 if quick else 10_000
    off, llm = indexing.offline_run(samples, messages, 2 if quick else 5), indexing.llm_run(samples, messages)
    per20 = llm["calls_per_message"] * 20
    return indexing.render(off, llm), [
        ["indexing / bare embedding throughput", f"{off['ratio']:.1%}", ">= 70%", _met(off["ratio"] >= 0.7)],
        ["LLM calls per 20 messages", f"{per20:.2f}", "<= 1", _met(per20 <= 1)],
    ]


def run_latency(quick: bool) -> tuple[str, list[list[str]]]:
    sizes = (10_000,) if quick else (10_000, 100_000)
    results = [query_latency.measure_size(n, 20 if quick else 40, 5 if quick else 15) for n in sizes]
    text, rows = _latency_rows(results)
    return text, rows


def run_scale(size: int) -> tuple[str, list[list[str]]]:
    """`--scale 1m`: the synthetic database of `size` ideas (built once, cached under bench/out/),
    warm socket searches against the floor in both scopes, and the daemon's RSS while serving."""
    result = query_latency.measure_size(size, 20, 0)
    text, rows = _latency_rows([result], every_project=2.0)  # at 1M both scopes have the 2x target
    rss_mb = max(v for v, _ in result["rss_kb"]) / 1024
    anon_mb = max(a for _, a in result["rss_kb"]) / 1024
    rows.append(
        [
            f"daemon RSS serving searches at {size:,} ideas (VmRSS; anonymous {anon_mb:.0f} MB)",
            f"{rss_mb:.0f} MB",
            "<= 600 MB",
            _met(rss_mb <= 600),
        ]
    )
    built = result["built"]
    how = f"built in {built['total_seconds']:.0f} s" if built else "cached"
    return f"{text}\n({size:,} ideas: database {result['db_mb']:,.0f} MB, {how})", rows


def _latency_rows(results: list[dict[str, Any]], every_project: float = 1.5) -> tuple[str, list[list[str]]]:
    biggest = results[-1]
    rows = []
    for scope, t in biggest["warm"].items():
        ratio = statistics.median(t["socket"]) / statistics.median(t["floor"])
        rows.append(
            [
                f"warm p50 / floor at {biggest['ideas']:,} ideas ({scope}, socket)",
                f"{ratio:.2f}x",
                f"<= {every_project:g}x" if scope == "all projects" else "<= 2x",
                _met(ratio <= (every_project if scope == "all projects" else 2)),
            ]
        )
        cli = query_latency.cli_ratio(t)
        rows.append(
            [
                f"warm `search --json` p50 / `python -c 'import json, socket'` ({scope})",
                f"{cli:.2f}x",
                "<= 2x",
                _met(cli <= 2),
            ]
        )
    return query_latency.render(results), rows


def run_recall(quick: bool, data: Path) -> tuple[str, list[list[str]]]:
    """Every dataset and rendering (a quick run: LoCoMo roles only); the confirm split is the figure."""
    names = ("locomo-roles",) if quick else recall.SETS
    reports = [recall.evaluate_set(name, [1, 5, 10], data, recall.DEFAULT_BEAM) for name in names]
    rows = []
    for report in reports:
        figures = report["figures"].get("confirm") or report["figures"]["all"]
        ours, bm25 = figures["total-recall"]["overall"], figures["BM25 raw turns"]["overall"]
        delta = ours["recall@10"] - bm25["recall@10"]
        rows.append(
            [f"recall@10 - BM25, {report['set']} (confirm)", f"{delta:+.3f}", ">= +0.15", _met(delta >= 0.15)]
        )
        top = ours["recall@1"] >= bm25["recall@1"] and ours["mrr"] >= bm25["mrr"]
        rows.append(
            [
                f"recall@1 and MRR vs BM25, {report['set']} (confirm)",
                f"{ours['recall@1']:.3f}/{ours['mrr']:.3f} vs {bm25['recall@1']:.3f}/{bm25['mrr']:.3f}",
                ">= BM25",
                _met(top),
            ]
        )
    return "\n\n".join(recall.render(r) for r in reports) + "\n\n" + recall.summary(reports, [1, 5, 10]), rows


def run_footprint(quick: bool, data: Path) -> tuple[str, list[list[str]]]:
    r = footprint.measure(locomo.load(data), 400 if quick else 10_000)
    per_message = r["db_bytes"] / max(1, r["messages"])
    return footprint.render(r), [
        [
            f"database bytes per message ({r['messages']:,} messages, {r['projects']} projects)",
            f"{per_message:,.0f}",
            "<= 4,096",
            _met(per_message <= 4096),
        ]
    ]


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes for a smoke run")
    parser.add_argument("--only", default=",".join(ALL), help=f"comma-separated subset of {','.join(ALL)}")
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--scale",
        choices=sorted(SCALES),
        help="also search a synthetic database of this many ideas (1m: built once, ~GBs, cached)",
    )
    args = parser.parse_args(argv)
    harness.quiet()
    harness.compile_package()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    runners: dict[str, Callable[[], tuple[str, list[list[str]]]]] = {
        "hook": lambda: run_hook(args.quick),
        "indexing": lambda: run_indexing(args.quick, args.data),
        "latency": lambda: run_latency(args.quick),
        "recall": lambda: run_recall(args.quick, args.data),
        "footprint": lambda: run_footprint(args.quick, args.data),
    }
    if args.scale or "scale" in chosen:
        runners["scale"] = lambda: run_scale(SCALES[args.scale or "1m"])
        chosen += [] if "scale" in chosen else ["scale"]
    harness.print_machine()
    summary: list[list[Any]] = []
    for name in chosen:
        started = time.perf_counter()
        text, rows = runners[name]()
        print(f"\n{text}\n({name}: {time.perf_counter() - started:.0f} s)", flush=True)
        summary += rows
    print(
        "\n## summary against the targets\n" + harness.table(["figure", "value", "target", "status"], summary)
    )
    print(f"load average at the end (1, 5, 15 min): {[round(v, 2) for v in os.getloadavg()]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
