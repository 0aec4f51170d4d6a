"""Does the offline extractor take a user's reply that settles an offer for the decision it is?

    python bench/approvals.py [--split tune|confirm|both] [--show]

``bench/approvals_tune.jsonl`` and ``bench/approvals_confirm.jsonl`` hold labelled exchanges: the
end of an assistant turn, the user's next message, and whether that message decides (accepts one
concrete action the assistant offered, or names the option it picks) with the decided action;
rules in ``bench/approvals.md``. Each exchange goes through ``OfflineExtractor.extract`` twice, the
way the daemon sends it: both messages in one batch (a backfill), and the reply alone with the
assistant's message as the batch's recent context (live capture: the hook queues each turn, so the
reply is read in a later batch). A decision is found when an idea of intent ``decision`` comes from
the reply's line. Prints precision and recall per split and way, and with ``--show`` the misses.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SPLITS = {"tune": BENCH / "approvals_tune.jsonl", "confirm": BENCH / "approvals_confirm.jsonl"}


def decided(extractor, row: dict, *, live: bool) -> list[str]:
    """The decisions the extractor draws from the reply's line."""
    said = {"line": 1, "role": "assistant", "content": row["assistant"]}
    reply = {"line": 2, "role": "user", "content": row["user"]}
    batch = {
        "new_messages": [reply] if live else [said, reply],
        "recent_messages": [said] if live else [],
        "known_ideas": [],
    }
    out = extractor.extract(batch)
    return [i["content"] for i in out["items"] if i["source_line"] == 2 and i["type"] == "decision"]


def score(rows: list[dict], extractor, *, live: bool, show: bool) -> tuple[float, float, int, int]:
    tp = fp = fn = 0
    for number, row in enumerate(rows, 1):
        found, gold = decided(extractor, row, live=live), row["label"] == "decision"
        tp += bool(found) and gold
        fp += bool(found) and not gold
        fn += not found and gold
        if show and bool(found) != gold:
            said = row["assistant"][-90:]
            print(f"  {number:3d} {row['label']:8s} got {found} | ...{said} || {row['user']}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    return precision, tp / (tp + fn) if tp + fn else 1.0, tp + fn, tp + fp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "confirm", "both"), default="both")
    parser.add_argument("--show", action="store_true", help="list the exchanges it gets wrong")
    args = parser.parse_args()
    from total_recall import log
    from total_recall.extract.offline import OfflineExtractor

    log.configure("warning")
    extractor = OfflineExtractor()
    print(f"{'split':8s} {'way':22s} {'precision':>9s} {'recall':>7s} {'gold':>5s} {'found':>6s}")
    for split, path in SPLITS.items():
        if args.split not in (split, "both"):
            continue
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for live in (False, True):
            way = "reply in a later batch" if live else "one batch"
            precision, recall, gold, found = score(rows, extractor, live=live, show=args.show and not live)
            print(f"{split:8s} {way:22s} {precision:9.2f} {recall:7.2f} {gold:5d} {found:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
