"""How well the duplicate rule merges restatements and keeps different facts apart.

    python bench/restatements.py

``bench/restatement_pairs.jsonl`` holds hand-written pairs of statements labelled same fact
(a lead-in, a small edit, a rewording) or different fact (another number, name or subject). Each
pair goes through the store's rule exactly as a second mention would: the lead-in is dropped
(``store.without_lead_in``), then equal normalised text merges, else the packaged embedding
model's cosine at or above the threshold **and** ``store.same_fact`` (same numbers, no
differing name, content-word Jaccard >= 0.5). Prints precision and recall of "merge" at the
shipped threshold and at neighbouring ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIRS = REPO / "bench" / "restatement_pairs.jsonl"
THRESHOLDS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96)


def main() -> int:
    from total_recall import log, store
    from total_recall.embed import LocalEmbedder

    log.configure("warning")
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    a = [store.without_lead_in(p["a"]) for p in pairs]
    b = [store.without_lead_in(p["b"]) for p in pairs]
    vectors = LocalEmbedder().embed(a + b)
    cosines = [float(vectors[i] @ vectors[len(pairs) + i]) for i in range(len(pairs))]
    print(
        f"{len(pairs)} pairs: {sum(p['same'] for p in pairs)} same fact, {sum(not p['same'] for p in pairs)} "
        "different"
    )
    print(f"{'cosine >=':>10} {'precision':>9} {'recall':>7} {'merged':>7}")
    for threshold in THRESHOLDS:
        merged = []
        for i, _pair in enumerate(pairs):
            exact = store.content_hash(a[i]) == store.content_hash(b[i])
            merged.append(exact or (cosines[i] >= threshold and store.same_fact(a[i], b[i])))
        tp = sum(m and p["same"] for m, p in zip(merged, pairs))
        precision = tp / sum(merged) if any(merged) else 1.0
        recall = tp / sum(p["same"] for p in pairs)
        mark = "  <- shipped" if abs(threshold - store.DUPLICATE_COSINE) < 1e-9 else ""
        print(f"{threshold:>10.2f} {precision:>9.2f} {recall:>7.2f} {sum(merged):>7}{mark}")
    if "--show" in sys.argv:
        for i, pair in enumerate(pairs):
            print(
                f"{cosines[i]:.3f} same={pair['same']!s:5} same_fact={store.same_fact(a[i], b[i])!s:5} "
                f"{a[i]} | {b[i]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
