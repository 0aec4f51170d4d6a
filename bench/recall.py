"""Recall on the dev data: total-recall's search against BM25 over the raw turns, same run.

    python bench/recall.py [--sets locomo-roles,locomo-names,beam,sessions] [-k 1,5,10] [--save F.json]
                           [--store postgres] [--all-projects] [--layout L]
                           [--data LOCOMO.json] [--beam CHATS] [--sessions-qa QA.json --fixtures DIR]

Datasets (each indexed in its own throw-away home with the normal pipeline, `total-recall backfill
DIR --wait`, embedded default: offline extractor + local MiniLM):
  locomo-roles   LoCoMo dev (bench/locomo.py), speakers only as user/assistant roles;
  locomo-names   the same conversations with every turn written as "Name: text";
  beam           BEAM coding-project chats (bench/beam.py), message-level evidence;
  beam-qa        the same chats, our own questions a developer would ask weeks later
                 (bench/beam_qa.json, rules in bench/beam_qa.md), with the chat messages that answer them;
  sessions       questions a developer would ask about the shared real Claude Code fixture sessions
                 (bench/sessions_qa.json, rules in bench/sessions_qa.md), evidence = transcript lines.
Every question is asked in ONE `total-recall search --queries FILE --json` call per dataset, scoped to
its conversation's project, and scored against the evidence lines. Figures: recall@k, hit@k and MRR
per category, split (tune / confirm) and overall, for three rankings:
  total-recall       every result's pointers count (ideas' and messages' source lines, spans' ranges);
  ideas only         the same result lists, only idea results give credit;
  BM25 raw turns     FTS5 over one document per turn, the query's stopword-free terms OR-ed.
The same questions are asked again as keywords (their matched terms only: no pronoun, no question
frame), as a user types `/remember dashboard api response time`; overall figures only, with the
BM25 ranking of the same keywords. Each split also gets a 95% interval of each delta over BM25 (paired
bootstrap over its questions): what a split of its size can tell apart.
Splits: tuning decisions are made on the tune split only; the confirm split checks they carry over.
`--store postgres` keeps each set's memories in a fresh database of a throw-away PostgreSQL server
(the pgserver wheel of the test extra), as a team's shared store would: the same pipeline and search
over pgvector and PostgreSQL full text. `--all-projects` asks every question over every project of its
set, and ranks BM25 over every turn of the set, as a search made outside any project (the web view,
MCP) is: harder where a set's projects are small. `--layout` writes the LoCoMo and BEAM transcripts
as another converter might (every session of a conversation, every batch of a chat, in one file;
LoCoMo without its image captions; every LoCoMo turn as the user's; or every LoCoMo reply after a thinking
line, as Claude Code writes a reply with extended thinking), to check that no figure hangs on the bench's
own conversion.
Runs in throw-away homes; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import beam  # noqa: E402
import harness  # noqa: E402
import locomo  # noqa: E402

VARIANTS = ("total-recall", "ideas only", "BM25 raw turns")
KEYWORD_VARIANTS = ("total-recall, keywords", "BM25 raw turns, keywords")
SETS = ("locomo-roles", "locomo-names", "beam", "beam-qa", "sessions")
DEFAULT_BEAM = harness.DEFAULT_LOCOMO.parent / "beam-dev"
FIXTURES = harness.DEFAULT_LOCOMO.parent.parent / "fixtures" / "transcripts"
SESSIONS_QA = Path(__file__).resolve().parent / "sessions_qa.json"
BEAM_QA = Path(__file__).resolve().parent / "beam_qa.json"
# Tune on these conversations, confirm on the rest (chosen before any tuning, by conversation).
TUNE = {"conv-26", "100K_1"}


def split_of(question: locomo.Question) -> str:
    sid = question.sample_id
    if sid.startswith("sessions:"):
        return sid.split(":")[1]
    return "tune" if sid in TUNE else "confirm"


def index(
    box: harness.Sandbox, corpus: locomo.Corpus, root: Path
) -> tuple[dict[str, Any], set[tuple[str, int]]]:
    """Index the transcripts under root with `backfill --wait`.

    Returns counts, and every (file, line) some idea came from: an evidence turn with no idea
    cannot be found by an idea, whatever the ranking.
    """
    seconds, proc = harness.timed(box.cli, "backfill", str(root), "--wait", "--json")
    stats = {
        "transcripts": len(corpus.files),
        "turns": len(corpus.turns),
        "index_seconds": round(seconds, 1),
        "backfill": json.loads(proc.stdout),
    }
    from total_recall import config
    from total_recall import db as dbmod

    queue = dbmod.connect(box.db_path)  # the work queue is always the local file
    try:
        stats["parked"] = queue.scalar("SELECT count(*) FROM work_queue WHERE state = 'parked'", default=0)
    finally:
        queue.close()
    database = dbmod.open_store(config.load())  # the memories: memory.db, or the PostgreSQL store
    try:
        stats["ideas"] = database.scalar("SELECT count(*) FROM ideas", default=0)
        stats["spans"] = database.scalar("SELECT count(*) FROM spans WHERE depth > 0", default=0)
        path = "(SELECT path FROM files WHERE id = file_id)"  # each transcript path is stored once
        sources = {(r[0], int(r[1])) for r in database.all(f"SELECT {path}, source_line FROM ideas")}
        rows = database.all(f"SELECT {path}, source_line FROM idea_sources")
        sources |= {(r[0], int(r[1])) for r in rows}
    finally:
        database.close()
    return stats, sources


def ask(
    box: harness.Sandbox,
    corpus: locomo.Corpus,
    qs: Sequence[locomo.Question],
    k: int,
    everywhere: bool = False,
) -> list[list[dict]]:
    """Every question in ONE `search --queries` call, each scoped to its conversation's project
    (to every project with `everywhere`)."""
    path = box.root / "queries.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for q in qs:
            scope = {"all_projects": True} if everywhere else {"project": corpus.projects[q.sample_id]}
            fh.write(json.dumps({"query": q.text, **scope, "k": k}) + "\n")
    proc = box.cli("search", "--queries", str(path), "--json")
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if len(answers) != len(qs):
        raise RuntimeError(f"asked {len(qs)} questions, got {len(answers)} answers")
    return [a["results"] for a in answers]


def question_scores(
    corpus: locomo.Corpus,
    qs: Sequence[locomo.Question],
    ranked: Sequence[list[dict]],
    baseline: Sequence[list[dict]],
    ks: Sequence[int],
    keywords: tuple[Sequence[list[dict]], Sequence[list[dict]]] | None = None,
) -> dict[str, dict[str, list]]:
    """{split: {variant: [(category, figures of one question), ...]}} for the three rankings (and,
    given the rankings of the questions asked as keywords, ours and BM25's: KEYWORD_VARIANTS); split
    "all" too. Every variant lists the questions in the same order."""
    rows: dict[str, dict[str, list]] = {}
    for n, (q, ours, bm25) in enumerate(zip(qs, ranked, baseline)):
        ev = locomo.evidence_locations(q, corpus)
        for split in ("all", split_of(q)):
            r = rows.setdefault(split, {v: [] for v in VARIANTS + (KEYWORD_VARIANTS if keywords else ())})
            r["total-recall"].append((q.category, locomo.score_question(ours, ev, ks)))
            r["ideas only"].append((q.category, locomo.score_question(ours, ev, ks, ideas_only=True)))
            r["BM25 raw turns"].append((q.category, locomo.score_question(bm25, ev, ks)))
            if keywords:
                for variant, results in zip(KEYWORD_VARIANTS, keywords):
                    r[variant].append((q.category, locomo.score_question(results[n], ev, ks)))
    return rows


def score_all(rows: dict[str, dict[str, list]]) -> dict[str, dict[str, dict]]:
    """{split: {variant: {category: {figure: value}}}}: question_scores averaged per category."""
    return {split: {v: locomo.aggregate(r) for v, r in per.items()} for split, per in rows.items()}


def delta_intervals(rows: dict[str, dict[str, list]], ks: Sequence[int]) -> dict[str, dict[str, list[float]]]:
    """{split: {figure: [low, high]}}: a 95% interval of our figure minus BM25's, per split, for
    recall@1, recall@max(k) and MRR (split "all" too). The questions are resampled with
    replacement and the pair of rankings of each question kept together (paired percentile
    bootstrap, fixed seed): a dev split of 14-81 questions gives a wide interval, and a delta
    whose interval holds the target did not tell it apart."""
    keys = ("recall@1", f"recall@{max(ks)}", "mrr")
    out = {}
    for split, per in rows.items():
        pairs = list(zip(per["total-recall"], per["BM25 raw turns"]))
        out[split] = {k: paired_interval([a[k] - b[k] for (_, a), (_, b) in pairs]) for k in keys}
    return out


def paired_interval(differences: Sequence[float], resamples: int = 4000, seed: int = 0) -> list[float]:
    """The 2.5th and 97.5th percentiles of the mean of `differences` over bootstrap resamples."""
    rng = random.Random(seed)
    n = len(differences)
    means = sorted(sum(differences[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return [round(means[int(0.025 * resamples)], 3), round(means[int(0.975 * resamples) - 1], 3)]


def as_keywords(q: locomo.Question) -> locomo.Question:
    """The question as a user types it into a search box: its matched terms only."""
    from total_recall import query as querymod

    terms = querymod.analyze(q.text).terms
    return dataclasses.replace(q, text=" ".join(terms)) if terms else q


# -- datasets: (corpus, questions, left out), written under root ----------------------------
def load_set(
    name: str,
    root: Path,
    locomo_path: Path,
    beam_root: Path,
    layout: str = "bench",
    sessions: tuple[Path, Path] = (SESSIONS_QA, FIXTURES),
):
    """A set's transcripts written under root, in `layout` (locomo.LAYOUTS: the bench's own, or how
    another converter might write them; the sessions set's fixtures have only theirs). `sessions` is
    the sessions set's questions file and the folder of the transcripts it names."""
    if name in ("locomo-roles", "locomo-names"):
        samples = locomo.load(locomo_path)
        corpus = locomo.convert(samples, root, names=name == "locomo-names", layout=layout)
        qs, left = locomo.questions(samples, corpus)
        return corpus, qs, left
    if name in ("beam", "beam-qa"):
        samples = [beam.load(f) for f in beam.folders(beam_root)]
        corpus = beam.convert(samples, root, layout="one-file" if layout == "one-file" else "bench")
        if name == "beam-qa":
            items = json.loads(BEAM_QA.read_text(encoding="utf-8"))
            return (corpus, *beam.labelled_questions(items, samples, corpus))
        qs, left = beam.questions(samples, corpus)
        return corpus, qs, left
    if name == "sessions":
        return sessions_set(root, *sessions)
    raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(SETS)}")


def sessions_set(root: Path, questions: Path = SESSIONS_QA, fixtures: Path = FIXTURES):
    """The fixture transcripts copied under root (one project folder per fixture) and their questions
    (bench/sessions_qa.json's format; a question names no split: confirm)."""
    items = json.loads(questions.read_text(encoding="utf-8"))
    corpus = locomo.Corpus()
    qs, left = [], {"other_category": 0, "no_evidence": 0}
    for item in items:
        src = fixtures / item["file"]
        if not src.is_file():
            left["no_evidence"] += 1
            continue
        stem = src.stem
        project = _fixture_project(src) or f"/sessions/{stem}"
        sid = f"sessions:{item.get('split', 'confirm')}:{stem}"
        dest = root / locomo.project_dir_name(project) / src.name
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            corpus.files.append(str(dest))
        corpus.projects[sid] = project
        ids = []
        for line in item["evidence"]:
            dia = f"{stem}:{int(line)}"
            corpus.turns[(sid, dia)] = locomo.Turn(sid, dia, str(dest), int(line), "", "", "")
            ids.append(dia)
        # The paraphrase and blind batches are rows of their own: the questions asked without the
        # evidence's words, and those written by a reader who never saw what any search returns.
        phrasing = item.get("phrasing")
        category = phrasing if phrasing in ("paraphrase", "blind") else item.get("kind", "fact")
        qs.append(locomo.Question(sid, item["question"], category, tuple(ids)))
    return corpus, qs, left


def _fixture_project(path: Path) -> str | None:
    """The cwd a transcript records first (the project total-recall files it under)."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("cwd"), str):
                return record["cwd"]
    return None


def baseline_texts(corpus: locomo.Corpus) -> locomo.Corpus:
    """Turns carry their text for BM25; for the sessions set each physical line is one document."""
    if all(t.text for t in corpus.turns.values()):
        return corpus
    out = locomo.Corpus(projects=corpus.projects, files=corpus.files)
    by_file: dict[str, set[str]] = {}
    for (sid, _), t in corpus.turns.items():
        by_file.setdefault(t.file, set()).add(sid)
    for file, sids in by_file.items():
        with open(file, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                text = raw_line_text(line)
                for sid in sids:
                    key = (sid, f"{Path(file).stem}:{number}")
                    out.turns[key] = locomo.Turn(sid, key[1], file, number, "", text, "")
    return out


def raw_line_text(line: str) -> str:
    """Every string a transcript line shows a reader: text blocks, tool inputs and tool results."""
    try:
        record = json.loads(line)
    except ValueError:
        return ""
    message = record.get("message") if isinstance(record, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            if value.get("type") in ("thinking", "redacted_thinking", "image"):
                return
            for key in ("text", "content", "input"):
                if key in value:
                    walk(value[key])
            if value.get("type") == "tool_use" or "command" in value or "file_path" in value:
                parts.extend(
                    str(v)
                    for k, v in value.items()
                    if k not in ("text", "content", "input", "type", "id") and isinstance(v, str)
                )

    walk(content)
    return "\n".join(p for p in parts if p.strip())


def _extraction_ceiling(corpus: locomo.Corpus, qs: Sequence[locomo.Question], sources: set) -> float:
    """Mean share of a question's evidence turns that gave at least one idea (ideas-only recall's ceiling)."""
    shares = [
        sum(loc in sources for loc in locomo.evidence_locations(q, corpus).values()) / len(q.evidence)
        for q in qs
    ]
    return round(sum(shares) / len(shares), 3) if shares else 0.0


def span_widths(ranked: Sequence[list[dict]]) -> dict[str, float]:
    """How many lines the span results cover: wide spans earn recall by breadth, not precision."""
    widths = [
        r["end_line"] - r["start_line"] + 1
        for rs in ranked
        for r in rs
        if r.get("kind") == "span" and r.get("start_line") is not None and r.get("end_line") is not None
    ]
    total = sum(len(rs) for rs in ranked)
    if not widths:
        return {"span_results_share": 0.0, "median_span_lines": 0.0, "max_span_lines": 0}
    return {
        "span_results_share": len(widths) / max(1, total),
        "median_span_lines": statistics.median(widths),
        "max_span_lines": max(widths),
    }


def evaluate_set(
    name: str,
    ks: Sequence[int],
    locomo_path: Path,
    beam_root: Path,
    store_url: str | None = None,
    everywhere: bool = False,
    layout: str = "bench",
    sessions: tuple[Path, Path] = (SESSIONS_QA, FIXTURES),
) -> dict[str, Any]:
    """One dataset in its own throw-away home (its memories in `store_url` when given); returns
    every figure. With `everywhere`, each question is asked over every project of the set and BM25
    ranks every turn of the set, as a search outside any project (the web view, MCP) would;
    `layout` writes its transcripts as another converter might (load_set)."""
    k = max(ks)
    with harness.Sandbox(extra_env={"TOTAL_RECALL_STORE_URL": store_url} if store_url else None) as box:
        root = box.claude / "projects"  # only transcripts under it are read
        corpus, qs, left_out = load_set(name, root, locomo_path, beam_root, layout, sessions)
        stats, sources = index(box, corpus, root)
        stats["evidence_with_an_idea"] = _extraction_ceiling(corpus, qs, sources)
        started = time.perf_counter()
        ranked = ask(box, corpus, qs, k, everywhere) if qs else []
        stats["search_seconds"] = round(time.perf_counter() - started, 1)
        typed = [as_keywords(q) for q in qs]
        ranked_typed = ask(box, corpus, typed, k, everywhere) if qs else []
        texts = baseline_texts(corpus)
        turns = locomo.TurnIndex(texts)
        try:
            baseline = [turns.search(None if everywhere else q.sample_id, q.text, k) for q in qs]
            baseline_typed = [turns.search(None if everywhere else q.sample_id, q.text, k) for q in typed]
        finally:
            turns.close()
    rows = question_scores(corpus, qs, ranked, baseline, ks, (ranked_typed, baseline_typed))
    return {
        "set": name,
        "everywhere": everywhere,
        "layout": layout,
        "ks": list(ks),
        "questions": len(qs),
        "left_out": left_out,
        "index": stats,
        "spans": span_widths(ranked),
        "figures": score_all(rows),
        "intervals": delta_intervals(rows, ks),
    }


def render(report: dict[str, Any]) -> str:
    ks = report["ks"]
    keys = [f"recall@{k}" for k in ks] + [f"hit@{max(ks)}", "mrr"]
    out = [
        f"# {report['set']}"
        + (" (PostgreSQL store)" if report.get("store") == "postgres" else "")
        + (" (every project)" if report.get("everywhere") else "")
        + (f" (layout: {report['layout']})" if report.get("layout", "bench") != "bench" else ""),
        f"questions scored: {report['questions']} (left out: {report['left_out']})",
        f"index: {json.dumps(report['index'])}",
        f"span results: {json.dumps(report['spans'])}",
    ]
    for split in ("tune", "confirm", "all"):
        figs = report["figures"].get(split)
        if not figs:
            continue
        cats = sorted({c for v in figs.values() for c in v if c != "overall"}) + ["overall"]
        rows = []
        for name in cats:
            for variant in [v for v in VARIANTS + KEYWORD_VARIANTS if v in figs]:
                # per category: ours and BM25's; the other rankings overall only
                per_category = variant in ("total-recall", "BM25 raw turns")
                if name in figs[variant] and (per_category or name == "overall"):
                    f = figs[variant][name]
                    rows.append([name, variant, int(f["n"]), *(f[key] for key in keys)])
        out += ["", f"## {report['set']} / {split}", harness.table(["category", "ranking", "n", *keys], rows)]
        top = f"recall@{max(ks)}"
        ours, bm25 = figs["total-recall"]["overall"], figs["BM25 raw turns"]["overall"]
        lines_only = figs["ideas only"]["overall"][top]
        # A topic result counts for every evidence line of its range: say what single lines found.
        alone = f"; {top} by single lines (no topic ranges) {lines_only:.3f}"
        alone = alone if lines_only != ours[top] else ""
        out.append(f"{split}: {_versus(ours, bm25, top)}{alone}")
        if interval := report.get("intervals", {}).get(split):
            spread = "; ".join(f"{key} [{lo:+.3f}, {hi:+.3f}]" for key, (lo, hi) in interval.items())
            out.append(f"{split}: 95% interval of each delta over BM25 (questions resampled): {spread}")
        if KEYWORD_VARIANTS[0] in figs:
            typed = [figs[v]["overall"] for v in KEYWORD_VARIANTS]
            out.append(f"{split}, asked as keywords: {_versus(*typed, top)}")
    return "\n".join(out)


def _versus(ours: dict, bm25: dict, top: str) -> str:
    return (
        f"{top} {ours[top]:.3f} vs BM25 {bm25[top]:.3f} ({ours[top] - bm25[top]:+.3f}); "
        f"recall@1 {ours['recall@1']:.3f} vs {bm25['recall@1']:.3f}; "
        f"MRR {ours['mrr']:.3f} vs {bm25['mrr']:.3f}"
    )


def summary(reports: list[dict[str, Any]], ks: Sequence[int]) -> str:
    top = f"recall@{max(ks)}"
    rows = []
    for r in reports:
        for split in ("tune", "confirm"):
            figs = r["figures"].get(split)
            if not figs:
                continue
            ours, bm25 = figs["total-recall"]["overall"], figs["BM25 raw turns"]["overall"]
            worst = min(
                (figs["total-recall"][c][top] - figs["BM25 raw turns"][c][top], c)
                for c in figs["total-recall"]
                if c != "overall"
            )
            rows.append(
                [
                    r["set"],
                    split,
                    int(ours["n"]),
                    ours[top],
                    bm25[top],
                    ours[top] - bm25[top],
                    ours["recall@1"],
                    bm25["recall@1"],
                    ours["mrr"],
                    bm25["mrr"],
                    _interval(r, split, top),
                    f"{worst[1]} {worst[0]:+.3f}",
                ]
            )
    return harness.table(
        [
            "set",
            "split",
            "n",
            top,
            "BM25",
            "delta",
            "r@1",
            "BM25 r@1",
            "MRR",
            "BM25 MRR",
            "delta 95% interval",
            "worst category (delta)",
        ],
        rows,
    )


def _interval(report: dict[str, Any], split: str, key: str) -> str:
    lo, hi = report.get("intervals", {}).get(split, {}).get(key) or (None, None)
    return "" if lo is None else f"[{lo:+.3f}, {hi:+.3f}]"


def parse_ks(text: str) -> list[int]:
    ks = sorted({int(v) for v in text.split(",") if v.strip()})
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("k values must be positive integers, e.g. 1,5,10")
    return ks


def postgres_databases(stack: contextlib.ExitStack) -> Callable[[], str]:
    """A throw-away PostgreSQL server with pgvector (the pgserver wheel), stopped and deleted when
    `stack` closes; returns a maker of fresh, empty databases on it (their postgresql:// URLs)."""
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="tr-bench-pg-"))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    stack.callback(server.cleanup)

    def new_database() -> str:
        name = "recall_" + uuid.uuid4().hex[:12]
        server.psql(f"CREATE DATABASE {name};")
        return database_url(server, name)

    return new_database


def database_url(server: Any, name: str) -> str:
    """The postgresql:// URL of database `name` on a pgserver server (its URI names `postgres`)."""
    return re.sub(r"/postgres\?", f"/{name}?", server.get_uri(), count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, from {', '.join(SETS)}")
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--beam",
        type=Path,
        default=DEFAULT_BEAM,
        help="a folder holding BEAM chat folders at any depth (the dev copy's 100K_1/, chats/100K/1/)",
    )
    parser.add_argument(
        "--sessions-qa",
        type=Path,
        default=SESSIONS_QA,
        help="the sessions set's questions (bench/sessions_qa.json's format) over other real transcripts",
    )
    parser.add_argument(
        "--fixtures", type=Path, default=FIXTURES, help="the folder of the transcripts --sessions-qa names"
    )
    parser.add_argument(
        "-k", type=parse_ks, default=[1, 5, 10], help="cut-offs, comma-separated (default 1,5,10)"
    )
    parser.add_argument("--save", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--all-projects",
        action="store_true",
        help="ask every question over every project of its set, and BM25 over every turn of the set",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where the memories live: the local file, or a throw-away PostgreSQL server (test extra)",
    )
    parser.add_argument(
        "--layout",
        choices=locomo.LAYOUTS,
        default="bench",
        help="write the transcripts as another converter might: every session of a conversation "
        "(every batch of a BEAM chat) in one file, LoCoMo without its image captions, or every "
        "LoCoMo turn as the user's (one-side), or every LoCoMo reply after a thinking line (thinking)",
    )
    args = parser.parse_args(argv)
    harness.quiet()
    reports = []
    with contextlib.ExitStack() as stack:
        new_database = postgres_databases(stack) if args.store == "postgres" else lambda: None
        for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
            report = evaluate_set(
                name,
                args.k,
                args.data,
                args.beam,
                new_database(),
                args.all_projects,
                args.layout,
                (args.sessions_qa, args.fixtures),
            )
            report["store"] = args.store
            print(render(report), flush=True)
            print(flush=True)
            reports.append(report)
    print("# summary")
    print(summary(reports, args.k))
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(reports, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
