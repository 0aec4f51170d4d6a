"""Indexing throughput of the embedded default against bare embedding, and LLM calls per message.

    python bench/indexing.py [--data PATH] [--messages 10000] [--llm-messages N] [--slices 5]

1. The LoCoMo file is converted to transcripts (bench/locomo.py) and repeated with distinct
   session ids, paths and projects, a fifth of the words swapped in every copy after the first
   (so no text-to-vector cache serves repeats), until there are at least --messages messages.
2. `total-recall backfill DIR --wait` indexes them with the embedded default (offline extractor,
   local MiniLM) in --slices consecutive slices into one growing database: messages per second of
   wall time per slice.
3. Between the slices, the bare throughput of the same embedding model (LocalEmbedder.embed) on
   the same message texts (a uniform sample of 1000 of them, in one call): the ceiling for (2).
   Each slice's ratio uses the bare runs just before and after it; the figure is the median ratio.
4. Against a local OpenAI-compatible server (bench/llm_server.py, one context item per new
   message) a second backfill of --llm-messages messages: LLM calls per message and messages per
   batch, counted by the server and from the llm_calls table (extractor = 'llm'), which should
   agree. The daily token budget is switched off.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import locomo  # noqa: E402
from llm_server import LLMServer  # noqa: E402

BARE_SAMPLE = 1000  # messages embedded per bare run: a uniform sample of the indexed texts


def corpus_of(samples: list[dict], root: Path, messages: int) -> tuple[locomo.Corpus, int]:
    """Copies of the conversations until at least `messages` turns; files past that are removed.

    Every copy after the first has a fifth of its words swapped (locomo.variant), so the indexer's
    text-to-vector cache cannot serve repeated text that real transcripts would not repeat.
    """
    corpus = locomo.convert(samples, root)
    per_copy = len(corpus.turns)
    vocabulary = sorted(
        {w.lower() for t in corpus.turns.values() for w in re.findall(r"[A-Za-z]{4,}", t.text)}
    )
    for copy in range(1, max(1, math.ceil(messages / max(1, per_copy)))):
        locomo.convert(samples, root, copy=copy, corpus=corpus, vary=locomo.variant(copy, vocabulary))
    kept, total = [], 0
    for path in corpus.files:
        if total >= messages:
            Path(path).unlink()
            continue
        kept.append(path)
        total += sum(1 for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip())
    corpus.files = kept
    return corpus, total


def transcript_texts(files: list[str]) -> list[str]:
    """The text of every turn in the given transcripts (as written by locomo.record)."""
    texts = []
    for path in files:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            content = json.loads(line)["message"]["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def backfill(box: harness.Sandbox, root: Path) -> dict[str, Any]:
    seconds, _ = harness.timed(box.cli, "backfill", str(root), "--wait", "--json")
    out = {"seconds": seconds, **counts(box)}
    out["messages_per_s"] = out["messages"] / seconds if seconds else 0.0
    return out


def counts(box: harness.Sandbox) -> dict[str, Any]:
    """What the database holds after a backfill: messages, ideas, extraction calls, parked items."""
    from total_recall import db as dbmod

    database = dbmod.connect(box.db_path)
    try:
        calls = database.one(
            "SELECT count(*), coalesce(sum(messages), 0) FROM llm_calls WHERE extractor = 'llm' AND ok = 1"
        )
        return {
            "messages": _count(database, "messages"),
            "ideas": _count(database, "ideas"),
            "llm_calls": calls[0],
            "llm_call_messages": calls[1],
            "llm_failures": _count(database, "llm_calls WHERE extractor = 'fallback'"),
            "offline_calls": _count(database, "llm_calls WHERE extractor = 'offline'"),
            "parked": _count(database, "work_queue WHERE state = 'parked'"),
        }
    finally:
        database.close()


def _count(database: Any, where: str) -> int:
    return int(database.scalar(f"SELECT count(*) FROM {where}", default=0))


class BareEmbedding:
    """Messages per second of LocalEmbedder.embed over the same texts, one run at a time."""

    def __init__(self, texts: list[str]):
        from total_recall.embed import LocalEmbedder

        self.texts = random.Random(1).sample(texts, BARE_SAMPLE) if len(texts) > BARE_SAMPLE else texts
        self.embedder = LocalEmbedder()
        self.embedder.embed(["warm up"])

    def rate(self) -> float:
        seconds, _ = harness.timed(self.embedder.embed, self.texts)
        return len(self.texts) / seconds


def slices(files: list[str], root: Path, parts: int) -> list[tuple[Path, int]]:
    """Move the transcripts into `parts` folders of consecutive files: (folder, messages) each."""
    size = max(1, math.ceil(len(files) / max(1, parts)))
    out = []
    for index in range(0, len(files), size):
        folder = root / f"slice{len(out)}"  # still under the projects folder
        messages = 0
        for path in map(Path, files[index : index + size]):
            target = folder / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
            messages += sum(1 for line in target.read_text(encoding="utf-8").splitlines() if line.strip())
        out.append((folder, messages))
    return out


def offline_run(samples: list[dict], messages: int, parts: int) -> dict[str, Any]:
    """Backfill in `parts` slices into one database, a bare embedding run before each and after the last.

    Each slice's ratio divides its throughput by the mean of the bare runs just before and after
    it, so load from other processes hits a ratio's two sides alike; the figure is their median.
    """
    with harness.Sandbox() as box:
        root = box.claude / "projects"  # only transcripts under it are read
        corpus, total = corpus_of(samples, root, messages)
        bare = BareEmbedding(transcript_texts(corpus.files))
        _progress(
            f"embedded default: {total} messages in {len(corpus.files)} transcripts, {parts} slices ..."
        )
        rows, before = [], bare.rate()
        for folder, count in slices(corpus.files, root, parts):
            seconds, _ = harness.timed(box.cli, "backfill", str(folder), "--wait", "--json")
            after = bare.rate()
            rows.append(
                {
                    "messages": count,
                    "seconds": seconds,
                    "per_s": count / seconds,
                    "bare_per_s": (before + after) / 2,
                    "ratio": count / seconds / ((before + after) / 2),
                }
            )
            before = after
        result = counts(box)
    result.update(
        slices=rows,
        seconds=sum(r["seconds"] for r in rows),
        bare_sample=len(bare.texts),
        ratio=statistics.median(r["ratio"] for r in rows),
    )
    result["messages_per_s"] = result["messages"] / result["seconds"]
    return result


def llm_run(samples: list[dict], messages: int) -> dict[str, Any]:
    with harness.Sandbox() as box, LLMServer(box.root / "llm") as srv:
        box.extra_env.update(
            {
                "TOTAL_RECALL_LLM_BASE_URL": srv.base_url,
                "TOTAL_RECALL_LLM_MODEL": "fake-model",
                "TOTAL_RECALL_LLM_API_KEY": "bench",
                "TOTAL_RECALL_LLM_DAILY_TOKEN_BUDGET": "0",
            }
        )
        root = box.claude / "projects"  # only transcripts under it are read
        corpus, total = corpus_of(samples, root, messages)
        _progress(f"LLM path: {total} messages in {len(corpus.files)} transcripts ...")
        result = backfill(box, root)
        server_batches = srv.batches()
    # The server's own count is the ground truth; llm_calls rows should agree with it.
    result["server_calls"], result["server_call_messages"] = len(server_batches), sum(server_batches)
    calls, msgs = result["server_calls"], result["messages"]
    result["calls_per_message"] = calls / msgs if msgs else 0.0
    result["messages_per_batch"] = result["server_call_messages"] / calls if calls else 0.0
    result["transcripts"] = len(corpus.files)
    return result


def render(offline: dict[str, Any] | None, llm: dict[str, Any] | None) -> str:
    out = []
    if offline:
        out += [
            "## indexing throughput (embedded default)",
            harness.table(
                ["figure", "value"],
                [
                    ["messages indexed", offline["messages"]],
                    ["ideas written", offline["ideas"]],
                    ["backfill wall time, all slices (s)", f"{offline['seconds']:.1f}"],
                    ["backfill messages/s, all slices", f"{offline['messages_per_s']:.2f}"],
                    ["indexing / bare, median over slices", f"{offline['ratio']:.1%} (target >= 70%)"],
                    ["parked queue items", offline["parked"]],
                ],
            ),
            "",
            f"per slice (bare: LocalEmbedder.embed on {offline['bare_sample']} of the same texts, "
            "mean of the runs just before and after the slice)",
            harness.table(
                ["slice", "messages", "seconds", "messages/s", "bare messages/s", "indexing / bare"],
                [
                    [
                        i,
                        r["messages"],
                        f"{r['seconds']:.1f}",
                        f"{r['per_s']:.1f}",
                        f"{r['bare_per_s']:.1f}",
                        f"{r['ratio']:.1%}",
                    ]
                    for i, r in enumerate(offline["slices"])
                ],
            ),
        ]
    if llm:
        per20 = llm["calls_per_message"] * 20
        out += [
            "",
            "## LLM path (local OpenAI-compatible server)",
            harness.table(
                ["figure", "value"],
                [
                    ["messages indexed", llm["messages"]],
                    ["transcripts", llm["transcripts"]],
                    ["extraction requests received by the server", llm["server_calls"]],
                    ["llm_calls rows (extractor='llm', ok)", llm["llm_calls"]],
                    ["LLM failures -> offline", llm["llm_failures"]],
                    [
                        "LLM calls per message",
                        f"{llm['calls_per_message']:.4f} = {per20:.2f} per 20 (target <= 1)",
                    ],
                    ["messages per batch (mean, server side)", f"{llm['messages_per_batch']:.1f}"],
                    [
                        "messages per batch (mean, llm_calls rows)",
                        f"{_ratio(llm['llm_call_messages'], llm['llm_calls']):.1f}",
                    ],
                    ["backfill messages/s", f"{llm['messages_per_s']:.1f}"],
                ],
            ),
        ]
    return "\n".join(out)


def _progress(text: str) -> None:
    print(f"[indexing] {text}", file=sys.stderr, flush=True)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--messages", type=int, default=10_000, help="messages for the embedded-default backfill"
    )
    parser.add_argument(
        "--llm-messages", type=int, default=None, help="messages for the LLM path (default: --messages)"
    )
    parser.add_argument("--slices", type=int, default=5, help="backfill slices, each with its own baseline")
    parser.add_argument("--skip-offline", action="store_true", help="only the LLM path")
    parser.add_argument("--skip-llm", action="store_true", help="only the embedded default")
    args = parser.parse_args(argv)
    harness.quiet()
    samples = locomo.load(args.data)
    started = time.perf_counter()
    offline = None if args.skip_offline else offline_run(samples, args.messages, args.slices)
    llm = None if args.skip_llm else llm_run(samples, args.llm_messages or args.messages)
    print(render(offline, llm))
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
