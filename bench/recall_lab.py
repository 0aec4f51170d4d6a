"""The recall lab: index each set once, then ask its questions again and again in one process, with
search constants changed between runs, and print tune / confirm figures against BM25.

    python bench/recall_lab.py index --sets beam,beam-qa,locomo-roles,locomo-names,sessions --dir D
    python bench/recall_lab.py ask --sets beam,beam-qa --dir D [--set search.COVERAGE_WEIGHT=0.5 ...]

`index` writes each set's sandbox (home, transcripts, questions, BM25's rankings) under D/<set>;
`ask` searches those indexes in this process (the same `search.run` the CLI and the daemon call),
with each `--set module.NAME=value` (or `module.NAME[key]=value`) assigned first (a JSON value or
a string), so a change of
a search constant is measured in seconds instead of re-indexing. A change to what is indexed needs
`index` again. `--store postgres` keeps each set's memories in its own PostgreSQL server (the pgserver
wheel of the test extra), whose data folder stays under D/<set>/pg and is started for each call. The
figures are bench/recall.py's (its scoring, splits and BM25 baseline); the
closing figures of a change still come from a full `bench/recall.py` run. Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import locomo  # noqa: E402
import recall  # noqa: E402

MAX_K = 50  # BM25's rankings are kept this deep: any cut-off up to it can be asked for


@contextlib.contextmanager
def store_env(folder: Path, store: str, create: bool = False) -> Iterator[dict[str, str]]:
    """The environment that points a sandbox at its set's store: nothing for the local file; for
    PostgreSQL, the set's own server (the pgserver wheel of the test extra) over the data folder
    kept in folder/pg, started for the call and stopped after it (`create` makes its database)."""
    if store == "sqlite":
        yield {}
        return
    import pgserver

    server = pgserver.get_server(folder / "pg", cleanup_mode="stop")
    try:
        if create:
            server.psql("CREATE DATABASE lab;")
        yield {"TOTAL_RECALL_STORE_URL": recall.database_url(server, "lab")}
    finally:
        server.cleanup()


def index(
    name: str, folder: Path, locomo_path: Path, beam_root: Path, store: str = "sqlite", layout: str = "bench"
) -> None:
    """Index one set into folder (kept), with its questions and BM25's rankings beside it; its
    transcripts written in `layout` (recall.load_set)."""
    folder.mkdir(parents=True, exist_ok=True)
    with store_env(folder, store, create=True) as env, harness.Sandbox(folder, extra_env=env) as box:
        root = box.claude / "projects"
        corpus, qs, _left = recall.load_set(name, root, locomo_path, beam_root, layout)
        recall.index(box, corpus, root)
        typed = [recall.as_keywords(q) for q in qs]
        turns = locomo.TurnIndex(recall.baseline_texts(corpus))
        try:
            bm25 = [turns.search(q.sample_id, q.text, MAX_K) for q in qs]
            bm25_typed = [turns.search(q.sample_id, q.text, MAX_K) for q in typed]
        finally:
            turns.close()
    with (folder / "lab.pickle").open("wb") as fh:
        pickle.dump({"corpus": corpus, "qs": qs, "typed": typed, "bm25": bm25, "bm25_typed": bm25_typed}, fh)


def assign(spec: str) -> None:
    """`module.NAME=value` sets a constant of a total_recall module before asking;
    `module.NAME[key]=value` one entry of a dict constant (search.WEIGHTS[chunk_vec]=0.7)."""
    target, _, text = spec.partition("=")
    target, _, key = target.partition("[")
    module_name, _, attr = target.rpartition(".")
    module = importlib.import_module(f"total_recall.{module_name}")
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    if not hasattr(module, attr):
        raise SystemExit(f"total_recall.{module_name} has no {attr}")
    if key:
        getattr(module, attr)[key.rstrip("]")] = value
    else:
        setattr(module, attr, value)


def ask(
    name: str, folder: Path, keywords: bool, ks: list[int], store: str = "sqlite"
) -> dict[str, dict[str, float]]:
    """Every question of the set indexed in folder, searched in this process; per split, our
    overall figures (and asked as keywords) and BM25's, at the largest cut-off and at 1."""
    from total_recall import config, search
    from total_recall import db as dbmod

    with (folder / "lab.pickle").open("rb") as fh:
        saved = pickle.load(fh)
    corpus, qs = saved["corpus"], saved["qs"]
    k = max(ks)  # BM25 ranks as deep as we do, as in bench/recall.py (its MRR counts the top k only)
    with store_env(folder, store) as env, harness.Sandbox(folder, extra_env=env):
        settings = config.load()
        database = dbmod.open_store(settings)
        embedder = search.local_embedder(settings)
        try:

            def run(questions):
                out = []
                for q in questions:
                    req = {"query": q.text, "project": corpus.projects[q.sample_id], "k": k}
                    out.append(search.run(database, settings, embedder, req)["results"])
                return out

            ranked = run(qs)
            typed = run(saved["typed"]) if keywords else ranked
        finally:
            database.close()
    bm25, bm25_typed = [r[:k] for r in saved["bm25"]], [r[:k] for r in saved["bm25_typed"]]
    rows = recall.question_scores(corpus, qs, ranked, bm25, ks, (typed, bm25_typed))
    figures = recall.score_all(rows)
    shown = (f"recall@{k}", f"recall@{min(ks)}", "mrr")
    out = {}
    for split in ("tune", "confirm"):
        if split not in figures:
            continue
        per = figures[split]
        ours, base = per["total-recall"]["overall"], per["BM25 raw turns"]["overall"]
        line = {f: ours[f] for f in shown} | {f"bm25 {f}": base[f] for f in shown}
        if keywords:
            kw = per["total-recall, keywords"]["overall"]
            line |= {f"kw {f}": kw[f] for f in shown}
        out[split] = line
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("index", "ask"))
    parser.add_argument("--sets", default="beam,beam-qa,locomo-roles,locomo-names,sessions")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "out" / "lab")
    parser.add_argument("--set", action="append", default=[], dest="assign", help="module.NAME=value")
    parser.add_argument("--keywords", action="store_true", help="also ask every question as keywords")
    parser.add_argument("-k", type=recall.parse_ks, default=[1, 10], help="cut-offs (default 1,10)")
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--beam", type=Path, default=recall.DEFAULT_BEAM, help="a folder of BEAM chat folders"
    )
    parser.add_argument("--json", action="store_true", help="print {set: {split: figures}} as JSON")
    parser.add_argument(
        "--layout", choices=locomo.LAYOUTS, default="bench", help="index: the transcripts' layout (recall.py)"
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where the memories live: the local file, or the set's own PostgreSQL server (test extra)",
    )
    args = parser.parse_args(argv)
    harness.quiet()
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    if args.what == "index":
        for name in names:
            index(name, args.dir / name, args.data, args.beam, args.store, args.layout)
            print(f"indexed {name}", flush=True)
        return 0
    for spec in args.assign:
        assign(spec)
    if max(args.k) > MAX_K:
        raise SystemExit(f"cut-offs up to {MAX_K}")
    report = {}
    for name in names:
        report[name] = figures = ask(name, args.dir / name, args.keywords, args.k, args.store)
        if args.json:
            continue
        for split, line in figures.items():
            ours = " ".join(f"{k} {v:.3f}" for k, v in line.items() if not k.startswith("bm25"))
            bm25 = " ".join(f"{k[5:]} {v:.3f}" for k, v in line.items() if k.startswith("bm25"))
            print(f"{name:13s} {split:8s} {ours}  | BM25 {bm25}", flush=True)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
