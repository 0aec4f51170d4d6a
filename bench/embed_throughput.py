"""Print the local embedder's load time, single-query latency and batch throughput.

    python bench/embed_throughput.py [--n 512] [--words 20]

Figures only; nothing here is asserted (speed belongs in bench/, not in tests).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time

from total_recall.embed import LocalEmbedder

WORDS = (
    "memory sqlite vector daemon transcript idea decision problem solution lisbon build semicolon "
    "migration index query token batch model cache session project config python rust queue"
).split()


def sentences(n: int, words: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(words // 2, words * 2))) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="sentences in the throughput run")
    parser.add_argument("--words", type=int, default=20, help="typical words per sentence")
    args = parser.parse_args()
    embedder = LocalEmbedder()
    started = time.perf_counter()
    embedder.embed(["warm up"])
    print(f"load + first embed: {time.perf_counter() - started:.2f} s")
    single = []
    for _ in range(25):
        t = time.perf_counter()
        embedder.embed(["when did I move to Lisbon?"])
        single.append(time.perf_counter() - t)
    print(f"single query: {statistics.median(single) * 1000:.1f} ms (median of 25)")
    texts = sentences(args.n, args.words)
    t = time.perf_counter()
    embedder.embed(texts)
    elapsed = time.perf_counter() - t
    print(f"throughput: {args.n / elapsed:.0f} sentences/s ({args.n} sentences, {elapsed:.2f} s)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
