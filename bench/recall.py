"""Recall on LoCoMo-format data: total-recall's search against BM25 over the raw turns, same run.

    python bench/recall.py [--data PATH] [-k 1,5,10] [--save FILE.json]

Converts each conversation session into a Claude Code transcript (bench/locomo.py), indexes them
with the normal pipeline (`total-recall backfill DIR --wait`, embedded default: offline extractor
+ local MiniLM), asks every category 1-4 question with one `total-recall search --queries FILE
--json` call scoped to that conversation's project, and scores the results against the evidence
turns. Prints recall@k, hit@k and MRR per category and overall for three rankings:
  total-recall       ideas (source_line) and spans (start_line..end_line) both count;
  ideas only         the same result lists, spans give no credit;
  BM25 raw turns     FTS5 over one document per turn, the query's stopword-free terms OR-ed.
Runs in a throw-away home; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import locomo  # noqa: E402

VARIANTS = ("total-recall", "ideas only", "BM25 raw turns")


def index(box: harness.Sandbox, samples: list[dict]) -> tuple[locomo.Corpus, dict[str, Any], set[tuple[str, int]]]:
    """Write the transcripts and index them with `backfill --wait`.

    Returns the corpus, counts, and every (file, line) some idea came from: an evidence turn with
    no idea cannot be found by an idea, whatever the ranking.
    """
    root = box.claude / "projects"  # only transcripts under it are read
    corpus = locomo.convert(samples, root)
    seconds, proc = harness.timed(box.cli, "backfill", str(root), "--wait", "--json")
    stats = {"transcripts": len(corpus.files), "turns": len(corpus.turns), "index_seconds": round(seconds, 1),
             "backfill": json.loads(proc.stdout)}
    from total_recall import db as dbmod

    database = dbmod.connect(box.db_path)
    try:
        stats["ideas"] = database.scalar("SELECT count(*) FROM ideas", default=0)
        stats["spans"] = database.scalar("SELECT count(*) FROM spans WHERE depth > 0", default=0)
        stats["parked"] = database.scalar("SELECT count(*) FROM work_queue WHERE state = 'parked'", default=0)
        sources = {(r[0], int(r[1])) for r in database.execute("SELECT source_file, source_line FROM ideas")}
        if database.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'idea_sources'", default=0):
            rows = database.execute("SELECT source_file, source_line FROM idea_sources")
            sources |= {(r[0], int(r[1])) for r in rows}
    finally:
        database.close()
    return corpus, stats, sources


def ask(box: harness.Sandbox, corpus: locomo.Corpus, qs: Sequence[locomo.Question], k: int) -> list[list[dict]]:
    """Every question in ONE `search --queries` call, each scoped to its conversation's project."""
    path = box.root / "queries.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for q in qs:
            fh.write(json.dumps({"query": q.text, "project": corpus.projects[q.sample_id], "k": k}) + "\n")
    proc = box.cli("search", "--queries", str(path), "--json")
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if len(answers) != len(qs):
        raise RuntimeError(f"asked {len(qs)} questions, got {len(answers)} answers")
    return [a["results"] for a in answers]


def score_all(corpus: locomo.Corpus, qs: Sequence[locomo.Question], ranked: Sequence[list[dict]],
              baseline: Sequence[list[dict]], ks: Sequence[int]) -> dict[str, dict]:
    """{variant: {category: {figure: value}}} for the three rankings."""
    rows: dict[str, list] = {v: [] for v in VARIANTS}
    for q, ours, bm25 in zip(qs, ranked, baseline):
        ev = locomo.evidence_locations(q, corpus)
        rows["total-recall"].append((q.category, locomo.score_question(ours, ev, ks)))
        rows["ideas only"].append((q.category, locomo.score_question(ours, ev, ks, ideas_only=True)))
        rows["BM25 raw turns"].append((q.category, locomo.score_question(bm25, ev, ks)))
    return {v: locomo.aggregate(r) for v, r in rows.items()}


def _extraction_ceiling(corpus: locomo.Corpus, qs: Sequence[locomo.Question], sources: set) -> float:
    """Mean share of a question's evidence turns that gave at least one idea (ideas-only recall's ceiling)."""
    shares = [sum(loc in sources for loc in locomo.evidence_locations(q, corpus).values()) / len(q.evidence)
              for q in qs]
    return round(sum(shares) / len(shares), 3) if shares else 0.0


def span_widths(ranked: Sequence[list[dict]]) -> dict[str, float]:
    """How many lines the span results cover: wide spans earn recall by breadth, not precision."""
    widths = [r["end_line"] - r["start_line"] + 1 for rs in ranked for r in rs
              if r.get("kind") == "span" and r.get("start_line") is not None and r.get("end_line") is not None]
    total = sum(len(rs) for rs in ranked)
    if not widths:
        return {"span_results_share": 0.0, "median_span_lines": 0.0, "max_span_lines": 0}
    return {"span_results_share": len(widths) / max(1, total), "median_span_lines": statistics.median(widths),
            "max_span_lines": max(widths)}


def evaluate(data: Path, ks: Sequence[int]) -> dict[str, Any]:
    """The whole evaluation in a throw-away home; returns every figure."""
    samples = locomo.load(data)
    k = max(ks)
    with harness.Sandbox() as box:
        corpus, stats, sources = index(box, samples)
        qs, left_out = locomo.questions(samples, corpus)
        stats["evidence_with_an_idea"] = _extraction_ceiling(corpus, qs, sources)
        started = time.perf_counter()
        ranked = ask(box, corpus, qs, k) if qs else []
        stats["search_seconds"] = round(time.perf_counter() - started, 1)
    turns = locomo.TurnIndex(corpus)
    try:
        baseline = [turns.search(q.sample_id, q.text, k) for q in qs]
    finally:
        turns.close()
    return {"data": str(data), "ks": list(ks), "questions": len(qs), "left_out": left_out, "index": stats,
            "spans": span_widths(ranked), "figures": score_all(corpus, qs, ranked, baseline, ks)}


def render(report: dict[str, Any]) -> str:
    ks = report["ks"]
    keys = [f"recall@{k}" for k in ks] + [f"hit@{k}" for k in ks] + ["mrr"]
    out = [f"data: {report['data']}", f"questions scored: {report['questions']} (left out: {report['left_out']})",
           f"index: {json.dumps(report['index'])}", f"span results: {json.dumps(report['spans'])}"]
    order = [locomo.CATEGORIES[c] for c in locomo.SCORED_CATEGORIES] + ["overall"]
    for variant, figures in report["figures"].items():
        rows = [[name, int(figures[name]["n"]), *(figures[name][key] for key in keys)] for name in order
                if name in figures]
        out += ["", f"## {variant}", harness.table(["category", "n", *keys], rows)]
    figs = report["figures"]
    if figs["total-recall"]:
        top = f"recall@{max(ks)}"
        ours, ideas, bm25 = (figs[v]["overall"][top] for v in VARIANTS)
        out += ["", f"overall {top}: total-recall {ours:.3f}, ideas only {ideas:.3f}, BM25 {bm25:.3f}; "
                    f"total-recall - BM25 = {ours - bm25:+.3f} (target >= +0.15 and >= 0.80)"]
    return "\n".join(out)


def parse_ks(text: str) -> list[int]:
    ks = sorted({int(v) for v in text.split(",") if v.strip()})
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("k values must be positive integers, e.g. 1,5,10")
    return ks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument("-k", type=parse_ks, default=[1, 5, 10], help="cut-offs, comma-separated (default 1,5,10)")
    parser.add_argument("--save", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    harness.quiet()
    report = evaluate(args.data, args.k)
    print(render(report))
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
