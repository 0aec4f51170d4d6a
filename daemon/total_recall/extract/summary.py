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
lines that are indexed where they were said. Only the template's own titles open a section, so a
numbered item of a section ("1. **Redis backend**: add a Redis backend") is not taken for one; a
part that says there is nothing ("None.", "No next step; the task is complete") is no memory.
"""

from __future__ import annotations

import re

from total_recall.extract import offline

# A section heading of the template at the start of a line: "7. Pending Tasks:" (a number, a title,
# an optional colon), possibly bold or a Markdown heading; the text after the colon starts its body.
# Only a title of TITLES (or one that starts with it: "Pending Tasks (carried over):") opens a section.
HEADING = re.compile(
    r"^[ \t]{0,3}(?:#{1,4}[ \t]*)?(?:\*\*)?\d{1,2}\.[ \t]+(?:\*\*)?"
    r"([A-Za-z][A-Za-z ,&/()'-]{2,80}?)(?:\*\*)?[ \t]*(?::(?:\*\*)?[ \t]*(.*))?$"
)
BULLET = re.compile(r"^([ \t]*)(?:[-*•]|\d{1,2}[.)])[ \t]+(.*)$")
FENCE = re.compile(r"^[ \t]*(?:```|~~~)")
# The compaction agent's answer holds its summary in tags (a tag opening a line, not one quoted in a
# code span); the main session's copy under a "Summary:" line, the analysis before it.
SUMMARY_TAG = re.compile(r"^[ \t]*<summary>", re.M)
SUMMARY_LINE = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:\*\*)?Summary:(?:\*\*)?[ \t]*$", re.M)
# An error said to be still open; said so plainly, it outweighs a fix it also names ("fixed by X,
# still failing on CI"). The weaker words ("blocking", "outstanding") count only when no fix is said.
STILL_OPEN = re.compile(
    r"\b(?:unresolved|unsolved|not (?:yet )?(?:fixed|resolved|solved|working)|"
    r"still (?:failing|fails|broken|open|blocked|blocking)|did(?:n't| not) work|all failed|no fix)\b",
    re.I,
)
MAYBE_OPEN = re.compile(r"\b(?:blocking|blocked|ongoing|outstanding|open issue)\b", re.I)
FIXED = re.compile(r"\b(?:fixed|resolved|solved|closed|works now|no longer)\b", re.I)
# A part that says there is nothing: "None.", "N/A", "No next step", "There are no remaining tasks",
# "No errors were encountered".
NOTHING = re.compile(r"^(?:none\b|n/?a\b|nothing\b|no\b|there (?:are|is|were|was) no\b)", re.I)
TODO, SOLUTION, PROBLEM, CONCLUSION, CONTEXT = "todo", "solution", "problem", "conclusion", "context"
# Section title (lower case) -> how its parts are read: (kind or None for "by its words", whole).
# `whole`: the section's first paragraph is one memory; else each top-level bullet is one. A title
# mapped to None adds nothing (it restates lines indexed where they were said).
SECTIONS: dict[str, tuple[str | None, bool] | None] = {
    "pending tasks": (TODO, False),
    "pending task": (TODO, False),
    "optional next step": (TODO, False),
    "optional next steps": (TODO, False),
    "next step": (TODO, False),
    "next steps": (TODO, False),
    "errors and fixes": (None, False),
    "problem solving": (None, False),
    "primary request and intent": (CONTEXT, True),
    "primary request": (CONTEXT, True),
    "current work": (CONTEXT, True),
    "key technical concepts": None,
    "files and code sections": None,
    "all user messages": None,
    "user feedback": None,
}
PENDING = ("pending tasks", "pending task")
# Where the line cap (protocol.MAX_ITEMS_PER_MESSAGE) cuts a long summary, what is still to do and
# still broken is kept before where the work stood, the fixes and the conclusions.
ORDER = {TODO: 0, PROBLEM: 1, CONTEXT: 2, SOLUTION: 3, CONCLUSION: 4}
CONFIDENCE = 0.8
MAX_ITEM_CHARS = 600  # one task or error with its fix; the summary's own line holds the rest


def summary_body(text: str) -> str:
    """The summary proper: after its <summary> tag (the compaction agent's answer holds its
    <analysis> first), else after a "Summary:" line (the main transcript's copy), else all."""
    tags = list(SUMMARY_TAG.finditer(text))
    if tags:
        start = tags[-1].end()
        closed = text.find("</summary>", start)
        return text[start : closed if closed >= 0 else len(text)]
    marks = list(SUMMARY_LINE.finditer(text))
    return text[marks[-1].end() :] if marks else text


def _title(heading: str) -> str | None:
    """The template title a heading names: itself or the title it starts with ("pending tasks
    (carried over from the previous session)"); None for any other words."""
    words = " ".join(heading.lower().replace("**", "").split())
    if words in SECTIONS:
        return words
    return next((t for t in SECTIONS if words.startswith((t + " ", t + "("))), None)


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(template title, lines of its body) of every numbered section heading, in order."""
    out: list[tuple[str, list[str]]] = []
    for line in summary_body(text).splitlines():
        m = HEADING.match(line)
        title = _title(m.group(1)) if m else None
        if title is not None:
            rest = (m.group(2) or "").strip()
            out.append((title, [rest] if rest else []))
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
    if STILL_OPEN.search(text) or (MAYBE_OPEN.search(text) and not FIXED.search(text)):
        return PROBLEM
    return SOLUTION if title.startswith("errors") else CONCLUSION


def _cut(text: str) -> str:
    if len(text) <= MAX_ITEM_CHARS:
        return text
    cut = text[:MAX_ITEM_CHARS]
    return cut[: cut.rfind(" ")].rstrip(" ,;:") + " …" if " " in cut else cut


def _says_something(text: str) -> bool:
    """A part worth a memory: two words or more (in any script: a line of Chinese has no spaces),
    and not a statement that there is nothing ("None.", "No next step; the task is complete")."""
    words = re.findall(r"\w+", text)
    return (len(words) >= 2 or (bool(words) and len(text) >= 4 and not text.isascii())) and not _nothing(text)


def _nothing(text: str) -> bool:
    return NOTHING.match(text.lstrip("*_-–— ")) is not None


def same(text: str) -> str:
    """A task's words as two summaries are compared: lower case, punctuation and a closing
    parenthesis ("(in progress)") left out."""
    text = re.sub(r"\([^()]*\)\s*$", "", text.lower())
    return " ".join(re.findall(r"\w+", text))


def pending(text: str) -> set[str] | None:
    """The tasks this summary lists as pending or next (`same` of each), or None when it has no
    Pending Tasks section: a summary that lists what is pending says that what an earlier one listed
    and it does not is no longer so (indexer, store.close_summary_todos). Every listed task counts,
    a short one too."""
    found = sections(text)
    if not any(title in PENDING for title, _ in found):
        return None
    return {
        same(_cut(part))  # as `items` stores it
        for title, body in found
        if (rule := SECTIONS.get(title)) is not None and rule[0] == TODO
        for part in _parts(body, rule[1])
        if not _nothing(part)
    }


def items(text: str, line: int, project: str = "") -> list[dict]:
    """Extractor items (protocol.validate_output's input) of a summary said on `line`, what is still
    to do and still broken first: [] for a summary with none of the sections above (a one-line
    summary, an older free-form one)."""
    out: list[dict] = []
    seen: set[str] = set()
    for title, body in sections(text):
        rule = SECTIONS.get(title)
        if rule is None:
            continue
        kind, whole = rule
        for part in _parts(body, whole):
            content = _cut(part)
            if not _says_something(content) or content.lower() in seen:
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
    return sorted(out, key=lambda item: ORDER[item["type"]])
