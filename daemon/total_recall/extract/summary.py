"""A compaction's summary read as memories: its pending tasks, its errors and fixes, where the work was.

Claude Code asks the model for a summary in fixed numbered sections ("1. Primary Request and
Intent:", ..., "4. Errors and fixes:", "5. Problem Solving:", "7. Pending Tasks:", "8. Current Work:",
"9. Optional Next Step:"; transcript.COMPACTION_PROMPT_PREFIXES). A summary is often the one place
that says what is still to do and which error is still unresolved, and the extractor never sees it
(it restates the conversation in a few thousand words: transcript.py marks it `compact_summary`).
This reader turns the sections that say so into extractor items of the summary's line, with no
model and no extra call, for the LLM and the offline default alike: the numbered headings are
Claude Code's own template, not the wording of any conversation.

- Pending Tasks and Optional Next Step: a todo per task (each top-level bullet, or the first
  paragraph when there are none).
- Errors and fixes: one memory per error, the error and its fix together; a solution, or a problem
  when it says the error is still unresolved.
- Problem Solving: a problem for what is still unsolved or blocking, a conclusion for the rest.
- Primary Request and Intent, Current Work: context (their first paragraph).

Technical concepts, files and code, and the list of the user's messages add nothing: they restate
lines that are indexed where they were said.
"""

from __future__ import annotations

import re

from total_recall.extract import offline

# A section heading of the template, at the start of a line: "7. Pending Tasks:" (a number, a title of
# words, a colon), possibly bold or a Markdown heading; the text after the colon starts its body.
HEADING = re.compile(
    r"^[ \t]{0,3}(?:#{1,4}[ \t]*)?(?:\*\*)?\d{1,2}\.[ \t]+(?:\*\*)?"
    r"([A-Za-z][A-Za-z ,&/-]{2,60}?)(?:\*\*)?:(?:\*\*)?[ \t]*(.*)$"
)
BULLET = re.compile(r"^([ \t]*)(?:[-*•]|\d{1,2}[.)])[ \t]+(.*)$")
FENCE = re.compile(r"^[ \t]*(?:```|~~~)")
STILL_OPEN = re.compile(
    r"\b(?:unresolved|unsolved|not (?:yet )?(?:fixed|resolved|solved|working)|"
    r"still (?:failing|fails|broken|open)|blocking|blocked|ongoing|outstanding|open issue|"
    r"did(?:n't| not) work|all failed|no fix)\b",
    re.I,
)
TODO, SOLUTION, PROBLEM, CONCLUSION, CONTEXT = "todo", "solution", "problem", "conclusion", "context"
# Section title (lower case) -> how its parts are read: (kind or None for "by its words", whole).
# `whole`: the section's first paragraph is one memory; else each top-level bullet is one.
SECTIONS = {
    "pending tasks": (TODO, False),
    "pending task": (TODO, False),
    "optional next step": (TODO, False),
    "next step": (TODO, False),
    "next steps": (TODO, False),
    "errors and fixes": (None, False),
    "errors and fixes made": (None, False),
    "problem solving": (None, False),
    "primary request and intent": (CONTEXT, True),
    "primary request": (CONTEXT, True),
    "current work": (CONTEXT, True),
}
CONFIDENCE = 0.8
MAX_ITEM_CHARS = 600  # one task or error with its fix; the summary's own line holds the rest


def summary_body(text: str) -> str:
    """The summary proper: after its <summary> tag (the compaction agent's answer holds its
    <analysis> first), else after an "Summary:" line (the main transcript's copy), else all."""
    opened = text.rfind("<summary>")
    if opened >= 0:
        closed = text.find("</summary>", opened)
        return text[opened + len("<summary>") : closed if closed >= 0 else len(text)]
    marker = re.search(r"^[ \t]*(?:#+[ \t]*)?Summary:[ \t]*$", text, re.M)
    return text[marker.end() :] if marker else text


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(lower-case title, lines of its body) of every numbered section heading, in order."""
    out: list[tuple[str, list[str]]] = []
    for line in summary_body(text).splitlines():
        m = HEADING.match(line)
        if m:
            out.append((" ".join(m.group(1).lower().split()), [m.group(2)] if m.group(2).strip() else []))
        elif out:
            out[-1][1].append(line)
    return out


def _plain(text: str) -> str:
    """Inline Markdown (bold, backticks) stripped and whitespace collapsed."""
    return " ".join(re.sub(r"\*\*|__|`", "", text).split())


def _parts(lines: list[str], whole: bool) -> list[str]:
    """A section's memories: each top-level bullet with its sub-bullets (joined by "; "), or, when
    `whole` or when it has no bullets, its first paragraph. Code blocks are left out."""
    kept, in_code = [], False
    for line in lines:
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            kept.append(line)
    bullets = [(len(m.group(1).expandtabs(4)), m.group(2)) for m in map(BULLET.match, kept) if m]
    if whole or not bullets:
        paragraph: list[str] = []
        for line in kept:
            if not line.strip():
                if paragraph:
                    break
                continue
            paragraph.append(line)
        text = _plain(" ".join(paragraph))
        return [text] if text else []
    top = min(indent for indent, _ in bullets)
    items: list[list[str]] = []  # per top-level bullet: its text, then each sub-bullet's
    for line in kept:
        m = BULLET.match(line)
        if m and len(m.group(1).expandtabs(4)) == top:
            items.append([m.group(2)])
        elif items and m:
            items[-1].append(m.group(2))
        elif items and line.strip():
            items[-1][-1] += " " + line.strip()  # a wrapped line goes on with the text above it
    return [t for t in (_join(parts) for parts in items) if t]


def _join(parts: list[str]) -> str:
    """A bullet and its sub-bullets as one line: "Flaky test: the retry times out. Tried: a; b"."""
    head, rest = _plain(parts[0]), [_plain(p) for p in parts[1:] if _plain(p)]
    if not rest:
        return head
    return head + ("" if head.endswith((":", ";")) else ":") + " " + "; ".join(rest)


def _kind(title: str, kind: str | None, text: str) -> str:
    if kind is not None:
        return kind
    if STILL_OPEN.search(text):
        return PROBLEM
    return SOLUTION if title.startswith("errors") else CONCLUSION


def _cut(text: str) -> str:
    if len(text) <= MAX_ITEM_CHARS:
        return text
    cut = text[:MAX_ITEM_CHARS]
    return cut[: cut.rfind(" ")].rstrip(" ,;:") + " …" if " " in cut else cut


def pending(text: str) -> set[str] | None:
    """The todos this summary lists (its pending tasks and next step, as `items` words them, in lower
    case), or None when it has no Pending Tasks section: a summary that lists what is pending says
    that what an earlier one listed and it does not is no longer so (indexer, store.close_summary_todos)."""
    if not any(title.startswith("pending task") for title, _ in sections(text)):
        return None
    return {_same(i["content"]) for i in items(text, 0) if i["type"] == TODO}


def _same(text: str) -> str:
    return " ".join(text.lower().split())


def items(text: str, line: int, project: str = "") -> list[dict]:
    """Extractor items (protocol.validate_output's input) of a summary said on `line`: [] for a
    summary with none of the sections above (a one-line summary, an older free-form one)."""
    out: list[dict] = []
    seen: set[str] = set()
    for title, body in sections(text):
        rule = SECTIONS.get(title)
        if rule is None:
            continue
        kind, whole = rule
        for part in _parts(body, whole):
            content = _cut(part)
            if len(offline.words_of(content)) < 3 or content.lower() in seen:
                continue
            seen.add(content.lower())
            out.append(
                {
                    "type": _kind(title, kind, content),
                    "content": content,
                    "confidence": CONFIDENCE,
                    "source_line": line,
                    "entities": offline.entities(content, project),
                }
            )
    return out
