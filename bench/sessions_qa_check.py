"""Check bench/sessions_qa.json against the fixture transcripts it points into.

    python bench/sessions_qa_check.py [--fixtures DIR] [--questions FILE]

Each evidence line must exist in its fixture and carry a text whose first 50 characters (leading
whitespace stripped) equal the stored fingerprint; a question that names no split is confirm. Texts
of a line: a prompt string, a text block, a tool_result's text, a tool_use's name or string inputs,
a system record's string content; never a thinking block. Exit 1 on any mismatch; fixtures that are
absent are skipped with a message.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / ".." / "shared" / "fixtures" / "transcripts"
KINDS = {"decision", "problem", "solution", "fact", "todo", "question", "identifier"}


def line_texts(record: dict) -> list[str]:
    texts = [record["content"]] if isinstance(record.get("content"), str) else []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return texts + [content]
    for block in content if isinstance(content, list) else []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content") or ""
            if isinstance(inner, list):
                inner = "\n".join(b.get("text", "") for b in inner if b.get("type") == "text")
            texts.append(inner)
        elif block.get("type") == "tool_use":
            inputs = (block.get("input") or {}).values()
            texts += [block.get("name", "")] + [v for v in inputs if isinstance(v, str)]
    return texts


def fingerprint(text: str) -> str:
    return text.lstrip()[:50]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    parser.add_argument("--questions", type=Path, default=REPO / "bench" / "sessions_qa.json")
    args = parser.parse_args()
    items = json.loads(args.questions.read_text(encoding="utf-8"))
    errors, checked, lines_of = [], 0, {}
    for n, item in enumerate(items):
        where = f"item {n} ({item['file']})"
        if item.get("kind") not in KINDS or item.get("split", "confirm") not in ("tune", "confirm"):
            errors.append(f"{where}: bad kind or split")
        evidence = item["evidence"]
        if not 1 <= len(evidence) <= 3 or set(item["fingerprints"]) != {str(e) for e in evidence}:
            errors.append(f"{where}: needs 1-3 evidence lines, one fingerprint each")
        path = args.fixtures / item["file"]
        if path not in lines_of:
            lines_of[path] = None
            if path.is_file():
                lines_of[path] = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
            else:
                print(f"skip {item['file']}: fixture not found under {args.fixtures}")
        for line in evidence if lines_of[path] else []:
            if not 1 <= line <= len(lines_of[path]):
                errors.append(f"{where}: line {line} out of range")
                continue
            got = [fingerprint(t) for t in line_texts(json.loads(lines_of[path][line - 1]))]
            if item["fingerprints"].get(str(line)) not in got:
                errors.append(f"{where}: line {line}: {item['fingerprints'].get(str(line))!r} not in {got}")
            checked += 1
    print(f"{len(items)} questions, {checked} evidence lines checked")
    for split in ("tune", "confirm"):
        kinds = Counter(str(i.get("kind")) for i in items if i.get("split", "confirm") == split)
        print(f"  {split}: {sum(kinds.values())}", dict(sorted(kinds.items())))
    for error in errors:
        print("MISMATCH", error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
