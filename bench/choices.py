"""Does the offline extractor take a developer's choice, said to the assistant, for a decision?

    python bench/choices.py [--split SPLIT|all] [--show]

``bench/choices_SPLIT.jsonl`` (SPLIT: tune, confirm, holdout, holdout2, holdout3, tune2, holdout4, tune3,
holdout5, probe) hold messages a developer types to a coding assistant, labelled ``decision`` when they
settle something for the project beyond the current step (a tool, a switch, a preference between
options, scope, a rule from now on) and ``none`` otherwise (a task for now, a question, a problem, a
one-off instruction); rules in ``bench/choices.md``. Each message goes through
``OfflineExtractor.extract`` as a user message of its own; it is found when an idea of intent
``decision`` comes from its line. Prints precision and recall per split, and with ``--show`` the
messages it gets wrong.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SPLITS = {
    split: BENCH / f"choices_{split}.jsonl"
    for split in (
        "tune",
        "confirm",
        "holdout",
        "holdout2",
        "holdout3",
        "tune2",
        "holdout4",
        "tune3",
        "holdout5",
        "probe",
    )
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--show", action="store_true", help="list the messages it gets wrong")
    args = parser.parse_args()
    from total_recall import log
    from total_recall.extract.offline import OfflineExtractor

    log.configure("warning")
    extractor = OfflineExtractor()
    print(f"{'split':8s} {'precision':>9s} {'recall':>7s} {'gold':>5s} {'found':>6s}")
    for split in SPLITS if args.split == "all" else (args.split,):
        if not SPLITS[split].is_file():
            print(f"{split:8s} skipped: {SPLITS[split].name} is not there")
            continue
        rows = [json.loads(line) for line in SPLITS[split].read_text().splitlines() if line.strip()]
        tp = fp = fn = 0
        for number, row in enumerate(rows, 1):
            batch = {
                "new_messages": [{"line": 1, "role": "user", "content": row["user"]}],
                "recent_messages": [],
            }
            found = any(i["type"] == "decision" for i in extractor.extract(batch)["items"])
            gold = row["label"] == "decision"
            tp, fp, fn = tp + (found and gold), fp + (found and not gold), fn + (not found and gold)
            if args.show and found != gold:
                print(f"  {number:3d} {row['label']:8s} {row['user'][:110]}")
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"{split:8s} {precision:9.2f} {recall:7.2f} {tp + fn:5d} {tp + fp:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
