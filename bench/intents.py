"""Per-intent precision and recall of an extractor against the hand-labelled lines.

    python bench/intents.py [--split tune|confirm|all] [--extractor offline|llm] [--show N]

The labels (``bench/intents_labels.tsv``, rules in ``bench/intents_labels.md``) hold per line
only a locator (transcript file name + JSONL line, or BEAM chat folder + message id), the set of
intents it carries and a 40-character fingerprint. The text is read at run time from the shared
data folder next to the repository (``../shared``, or ``--shared``); without it the benchmark
skips with a message. A fingerprint that does not match stops the run: the locator is stale.

Every message of a source goes through the extractor the way the indexer sends it (batches of
up to 40 new messages after the last 8 as context, validated by ``protocol.validate_output``).
An intent counts as found on a line when an item of that intent has its source line anywhere in
that message (the lines of one merged assistant message count together). ``--extractor llm``
sends the same batches through the LLM client to a local fake OpenAI server that answers with
the offline extractor's output: it checks the protocol path's plumbing, not a model's quality.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "bench" / "intents_labels.tsv"
INTENTS = ("decision", "todo", "problem", "solution", "conclusion", "question")
CODES = {"d": "decision", "c": "conclusion", "q": "question", "p": "problem", "s": "solution", "t": "todo"}
BATCH = 40
RECENT = 8


def fingerprint(text: str) -> str:
    return " ".join(text.split())[:40]


def load_labels(split: str) -> list[dict]:
    rows = []
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        source, ident, role, part, intents, print_ = line.split("\t")
        rows.append(
            {
                "source": source,
                "id": int(ident),
                "role": role,
                "split": part,
                "fingerprint": print_,
                "intents": [] if intents == "-" else [CODES[c] for c in intents],
            }
        )
    return [r for r in rows if split == "all" or r["split"] == split]


def source_messages(shared: Path, source: str) -> list[dict]:
    """The messages of one source as the indexer hands them to an extractor (id -> first line)."""
    if source.startswith("beam-dev/"):
        chat = json.loads((shared / "bench" / source / "chat.json").read_text(encoding="utf-8"))
        out = []
        for batch in chat:
            for turn in batch["turns"]:
                for m in turn:
                    out.append(
                        {
                            "id": m["id"],
                            "role": m["role"],
                            "content": m["content"],
                            "timestamp": None,
                            "line": int(m["id"]) + 1,
                            "last_line": int(m["id"]) + 1,
                        }
                    )
        return out
    from total_recall import transcript
    from total_recall.redact import redact

    result = transcript.read_new(shared / "fixtures" / "transcripts" / source, 0, 0)
    return [
        {
            "id": m.line,
            "role": m.role,
            "content": redact(m.text),
            "timestamp": m.timestamp,
            "line": m.line,
            "last_line": m.last_line,
        }
        for m in result.messages
        if m.skip_reason is None
    ]


def extract_all(messages: list[dict], extract) -> dict[int, set[str]]:
    """Message id -> intents of the items the extractor produced for it."""
    from total_recall.extract import protocol

    by_line = {}
    for m in messages:
        for line in range(m["line"], m["last_line"] + 1):
            by_line[line] = m["id"]
    found: dict[int, set[str]] = {}
    hierarchy = {"project": {"name": "", "summary": ""}, "topic": None, "span": None}
    for start in range(0, len(messages), BATCH):
        part = messages[start : start + BATCH]
        recent = messages[max(0, start - RECENT) : start]
        new = [{k: m[k] for k in ("role", "content", "timestamp", "line")} for m in part]
        obj = protocol.build_input(
            hierarchy, [{k: m[k] for k in ("role", "content", "timestamp", "line")} for m in recent], new
        )
        lines = {line for m in part for line in range(m["line"], m["last_line"] + 1)}
        validated = protocol.validate_output(extract(obj), lines)
        for item in validated.output["items"]:
            found.setdefault(by_line[item["source_line"]], set()).add(item["type"])
    return found


def score(rows: list[dict], predicted: dict[tuple[str, int], set[str]]) -> dict:
    stats = {i: Counter() for i in INTENTS}
    filler_flagged = 0
    for row in rows:
        gold = set(row["intents"])
        got = predicted.get((row["source"], row["id"]), set()) & set(INTENTS)
        if not gold and got:
            filler_flagged += 1
        for intent in INTENTS:
            stats[intent]["tp"] += intent in gold and intent in got
            stats[intent]["fp"] += intent not in gold and intent in got
            stats[intent]["fn"] += intent in gold and intent not in got
    out = {}
    for intent, c in stats.items():
        p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else None
        r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else None
        out[intent] = {"precision": p, "recall": r, "gold": c["tp"] + c["fn"], "predicted": c["tp"] + c["fp"]}
    fillers = sum(not r["intents"] for r in rows)
    return {
        "lines": len(rows),
        "per_intent": out,
        "filler_lines": fillers,
        "filler_given_an_intent": filler_flagged,
    }


def _offline():
    from total_recall.extract.offline import OfflineExtractor

    return OfflineExtractor().extract


class _LLMThroughFake:
    """The LLM extractor against a local fake server that answers with the offline extractor."""

    def __enter__(self):
        sys.path.insert(0, str(REPO / "tests"))
        from fake_openai import FakeOpenAI
        from total_recall import config
        from total_recall.extract.llm import LLMExtractor

        offline = _offline()

        def answer(request: dict) -> str:
            user = request["messages"][-1]["content"]
            return json.dumps(offline(json.loads(user.split("\n\n", 1)[1])))

        self.server = FakeOpenAI(chat=answer).__enter__()
        settings = config.load(
            environ={
                "TOTAL_RECALL_LLM_BASE_URL": self.server.base_url,
                "TOTAL_RECALL_LLM_MODEL": "fake",
                "OPENAI_API_KEY": "k",
            },
            config_path=Path("/nonexistent"),
        )
        self.extract = LLMExtractor(settings, record_call=lambda call: None).extract
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)


def run(split: str, extractor: str, shared: Path) -> dict | None:
    if not (shared / "bench" / "beam-dev").is_dir() or not (shared / "fixtures" / "transcripts").is_dir():
        print(
            f"skipped: the shared data folder ({shared}) with bench/beam-dev and fixtures/transcripts "
            "is not there",
            file=sys.stderr,
        )
        return None
    rows = load_labels(split)
    predicted: dict[tuple[str, int], set[str]] = {}
    context = _LLMThroughFake() if extractor == "llm" else None
    extract = context.__enter__().extract if context else _offline()
    try:
        for source in sorted({r["source"] for r in rows}):
            messages = source_messages(shared, source)
            texts = {m["id"]: m["content"] for m in messages}
            for row in (r for r in rows if r["source"] == source):
                if fingerprint(texts.get(row["id"], "")) != row["fingerprint"]:
                    raise SystemExit(
                        f"stale locator: {source} {row['id']} no longer starts with {row['fingerprint']!r}"
                    )
            for key, intents in extract_all(messages, extract).items():
                predicted[(source, key)] = intents
    finally:
        if context:
            context.__exit__(None, None, None)
    result = score(rows, predicted)
    result.update({"split": split, "extractor": extractor})
    result["_predicted"] = predicted
    result["_rows"] = rows
    return result


def _fmt(value) -> str:
    return "  -  " if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tune", "confirm", "all"), default="confirm")
    parser.add_argument("--extractor", choices=("offline", "llm"), default="offline")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--show", type=int, default=0, help="print up to N disagreements per intent")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from total_recall import log

    log.configure("warning")
    result = run(args.split, args.extractor, args.shared)
    if result is None:
        return 0
    predicted, rows = result.pop("_predicted"), result.pop("_rows")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['extractor']} extractor, {result['split']} split: {result['lines']} labelled lines")
    print(f"{'intent':<11} {'precision':>9} {'recall':>7} {'gold':>5} {'predicted':>9}")
    for intent, s in result["per_intent"].items():
        print(
            f"{intent:<11} {_fmt(s['precision']):>9} {_fmt(s['recall']):>7} {s['gold']:>5} "
            f"{s['predicted']:>9}"
        )
    print(f"filler lines given an intent: {result['filler_given_an_intent']} of {result['filler_lines']}")
    if args.show:
        for intent in INTENTS:
            shown = 0
            for row in rows:
                got = predicted.get((row["source"], row["id"]), set())
                if (intent in got) != (intent in row["intents"]) and shown < args.show:
                    kind = "FP" if intent in got else "FN"
                    print(f"  {intent} {kind} {row['source']}:{row['id']} {row['fingerprint']}")
                    shown += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
