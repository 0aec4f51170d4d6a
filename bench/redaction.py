"""What secret redaction costs per message, against embedding the same message in the same run.

    python bench/redaction.py [--data PATH] [--repeats 15]

Redaction runs over every message before anything is stored, embedded or sent (DESIGN.md
"Redaction"), so its cost is read against the embedding every conversational message gets anyway:
the local model on the same one-line messages, timed in this run. Inputs: LoCoMo turns as one-line
prompts and as 1 MB of prose; a shell-heavy tool output (commands, configs, cookies); a tool output
shown as a JSON string (escaped newlines and quotes, read a second time decoded); and `redact.cut` of
a long tool output to the 500 characters the indexer keeps (a package without `redact.cut`, an older
checkout, cuts first and redacts the cut); and a dump of 10,000 `KEY=value` lines, each value hidden
and then looked for where it recurs (the worst case of that look); and the look of a later read for
the values hidden before (`redact.Seen`). Medians of --repeats runs (three for the dump); nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

SHELL_OUTPUT = "\n".join(
    [
        "$ export DB_HOST=db.internal DB_PORT=5432",
        "$ curl -s -b 'theme=dark' https://example.com/api/items?page=2 | jq -c '.items[]'",
        "$ git config --get remote.origin.url",
        "https://github.com/example/app.git",
        "$ cat config.yml",
        "server:\n  port: 8080\n  password_min_length: 12\n  token_ttl: 3600",
        "--- PASS: TestLogin (0.02s)",
        "ok  	example.com/app/auth	0.118s",
    ]
    * 4
)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=harness.DEFAULT_LOCOMO, help="a LoCoMo-format JSON file")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    harness.quiet()
    from total_recall import redact
    from total_recall.embed import LocalEmbedder

    data = json.loads(args.data.read_text())
    turns = [
        t["text"]
        for sample in data
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for t in session
        if t.get("text")
    ]
    messages = turns[:200]
    prose = "\n".join(turns)
    prose = (prose * (1 + (1 << 20) // len(prose)))[: 1 << 20]
    escaped = json.dumps(SHELL_OUTPUT)
    # The worst case of hiding each value where it recurs: thousands of distinct secrets in one text.
    dump = "\n".join(f"DB_PASSWORD=Xy{i}zQ!" for i in range(10_000))
    long_output = SHELL_OUTPUT * 20
    cut = getattr(redact, "cut", lambda text, limit: redact.redact(text[: limit - 1] + "…"))
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    n = len(messages)
    embed_ms = median_ms(lambda: [embedder.embed([m]) for m in messages], max(3, args.repeats // 5)) / n
    rows = [
        (
            "one-line message (LoCoMo turn)",
            median_ms(lambda: [redact.redact(m) for m in messages], args.repeats) / n,
        ),
        ("1 MB of prose", median_ms(lambda: redact.redact(prose), max(3, args.repeats // 5))),
        (
            f"shell tool output ({len(SHELL_OUTPUT)} chars)",
            median_ms(lambda: redact.redact(SHELL_OUTPUT), args.repeats),
        ),
        (
            f"the same as a JSON string ({len(escaped)} chars)",
            median_ms(lambda: redact.redact(escaped), args.repeats),
        ),
        (
            f"cut of a {len(long_output)}-char output to 500",
            median_ms(lambda: cut(long_output, 500), args.repeats),
        ),
        (
            f"a dump of {len(dump.splitlines())} secrets, one a line ({len(dump) >> 10} KB)",
            median_ms(lambda: redact.redact(dump), 3),
        ),
    ]
    if hasattr(redact, "Seen"):
        # Once a value was hidden, every later read looks for it where it recurs unnamed: each word of
        # the text is digested (a code without Seen has no such look, and no row).
        seen = redact.Seen()
        seen.add(["Kestrel-Moon-5521", *(f"Xy{i}zQ!" for i in range(1000))])
        rows += [
            (
                "one-line message, looked up among 1,001 values hidden before",
                median_ms(lambda: [seen.found_in([m]) for m in messages], args.repeats) / n,
            ),
            (
                "1 MB of prose, looked up among 1,001 values hidden before",
                median_ms(lambda: seen.found_in([prose]), max(3, args.repeats // 5)),
            ),
        ]
    harness.print_machine()
    print(f"embedding one message (local model, the same {n} messages): {embed_ms:.2f} ms")
    print(
        harness.table(
            ("input", "redaction ms (median)", "per message / embedding one message"),
            [(name, f"{value:.3f}", f"{value / embed_ms:.3f}x") for name, value in rows],
        )
    )


if __name__ == "__main__":
    main()
