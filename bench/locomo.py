"""LoCoMo-format conversations -> Claude Code transcripts, and retrieval scoring against their evidence.

Pure functions (plus file writing for the transcripts), so tests can check them on a tiny
hand-made file where the right answers are known.

Conversion: each `session_N` of a conversation becomes one transcript file
`<root>/<project folder>/<session uuid>.jsonl`, one JSONL line per turn: speaker_a -> user,
speaker_b -> assistant; timestamps start at `session_N_date_time` ("1:56 pm on 8 May, 2023",
read as UTC) and advance one minute per turn; an image's `blip_caption` is appended as
" [shared an image: <caption>]". Each conversation is its own project (cwd /locomo/<sample_id>).

Scoring: a search result points to an evidence turn when it comes from the same file and its
`source_line` is the turn's line (an idea), or the line lies within its `start_line..end_line`
(a span). Per question: recall@k = share of its evidence turns pointed to by the top k,
hit@k = whether any is, reciprocal rank = 1 / rank of the first result pointing to one.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
DIA_ID = re.compile(r"D\d+:\d+")
SESSION_KEY = re.compile(r"^session_(\d+)$")
SESSION_TIME = re.compile(
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>[ap])\.?m\.?\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[A-Za-z]+)\.?,?\s+(?P<year>\d{4})",
    re.I,
)
MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(), 1
    )
}
FALLBACK_START = datetime(2023, 1, 1, 12, 0, tzinfo=timezone.utc)
TURN_STEP = timedelta(minutes=1)


@dataclass(frozen=True)
class Turn:
    sample_id: str
    dia_id: str
    file: str  # absolute path of the transcript
    line: int  # 1-based JSONL line
    role: str
    text: str
    timestamp: str


@dataclass
class Corpus:
    """What conversion wrote: every turn by (sample_id, dia_id), and each conversation's project."""

    turns: dict[tuple[str, str], Turn] = field(default_factory=dict)
    projects: dict[str, str] = field(default_factory=dict)  # sample_id -> cwd
    files: list[str] = field(default_factory=list)

    def by_location(self) -> dict[tuple[str, int], Turn]:
        return {(t.file, t.line): t for t in self.turns.values()}


@dataclass(frozen=True)
class Question:
    sample_id: str
    text: str
    category: int
    evidence: tuple[str, ...]  # dia_ids found in the conversation


# -- reading the LoCoMo schema ------------------------------------------------------------------
def load(path: Path) -> list[dict]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data if isinstance(data, list) else [data]


def parse_session_time(text: str | None) -> datetime | None:
    """ "1:56 pm on 8 May, 2023" -> 2023-05-08 13:56 UTC; None when the text has no such date."""
    m = SESSION_TIME.search(text or "")
    month = _month(m.group("month")) if m else None
    if m is None or month is None:
        return None
    hour = int(m.group("hour")) % 12 + (12 if m.group("ampm").lower() == "p" else 0)
    try:
        return datetime(
            int(m.group("year")),
            month,
            int(m.group("day")),
            hour,
            int(m.group("minute")),
            tzinfo=timezone.utc,
        )
    except ValueError:  # "31 June": not a date
        return None


def _month(name: str) -> int | None:
    """Full or abbreviated (3+ letters) English month name -> 1..12."""
    name = name.lower()
    return next((n for m, n in MONTHS.items() if m == name or (len(name) >= 3 and m.startswith(name))), None)


def sessions(conversation: dict) -> list[tuple[int, str | None, list[dict]]]:
    """(number, date text, turns) of every non-empty session, in session order."""
    found = []
    for key, turns in conversation.items():
        m = SESSION_KEY.match(key)
        if m and isinstance(turns, list) and turns:
            found.append((int(m.group(1)), conversation.get(f"{key}_date_time"), turns))
    return sorted(found, key=lambda s: s[0])


def turn_text(turn: dict, captions: bool = True) -> str:
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip() if captions else ""
    return f"{text} [shared an image: {caption}]" if caption else text


def evidence_ids(evidence: Any) -> list[str]:
    """Every D<session>:<turn> in an evidence field, including malformed ones ("D8:6; D9:17"),
    deduplicated."""
    items = evidence if isinstance(evidence, list) else [evidence]
    found: dict[str, None] = {}
    for item in items:
        for dia in DIA_ID.findall(str(item or "")):
            found.setdefault(dia, None)
    return list(found)


def questions(
    samples: Iterable[dict], corpus: Corpus, categories: Sequence[int] = SCORED_CATEGORIES
) -> tuple[list[Question], dict[str, int]]:
    """The questions to score, and counts of those left out (by category, or for lack of evidence)."""
    kept, left_out = [], {"other_category": 0, "no_evidence": 0}
    for sample in samples:
        sid = str(sample.get("sample_id"))
        for qa in sample.get("qa") or []:
            if qa.get("category") not in categories:
                left_out["other_category"] += 1
                continue
            ids = tuple(d for d in evidence_ids(qa.get("evidence")) if (sid, d) in corpus.turns)
            if not ids:
                left_out["no_evidence"] += 1
                continue
            kept.append(Question(sid, str(qa.get("question") or ""), int(qa["category"]), ids))
    return kept, left_out


# -- writing transcripts ------------------------------------------------------------------------
def project_dir_name(cwd: str) -> str:
    """Claude Code's folder name for a launch directory."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)


def record(role: str, text: str, *, session: str, cwd: str, when: datetime, key: str) -> dict:
    """One Claude Code transcript line (user prompt or assistant text response)."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    base = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.39",
        "gitBranch": "main",
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
        "timestamp": stamp,
    }
    if role == "user":
        return {**base, "type": "user", "message": {"role": "user", "content": text}}
    msg_id = "msg_" + uuid.uuid5(uuid.NAMESPACE_URL, key + "/msg").hex[:24]
    return {
        **base,
        "type": "assistant",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "locomo",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
        },
    }


def convert(
    samples: Iterable[dict],
    root: Path,
    *,
    copy: int = 0,
    corpus: Corpus | None = None,
    vary: Callable[[str], str] | None = None,
    names: bool = False,
    layout: str = "bench",
) -> Corpus:
    """Write every session of every conversation as a transcript under root; return the turn map.

    `copy` > 0 writes another copy (new session ids, paths and projects) whose turns are not
    recorded in the map; `vary` rewrites each turn's text first (see `variant`); `names` renders
    each turn as "Speaker: text" (the other rendering: speakers only as user/assistant roles).
    `layout` (LAYOUTS) is how another converter might have written the same turns: "one-file" puts
    every session of a conversation in one transcript, its lines numbered on through the sessions;
    "no-captions" leaves out the image captions; "one-side" writes every turn as the user's (with
    `names`, only the "Name:" tags tell the speakers apart, as in a group chat); "thinking" writes
    every reply as Claude Code writes one with extended thinking: a thinking line, then the text's
    line (the evidence), one `message.id`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose from {', '.join(LAYOUTS)}")
    corpus = corpus or Corpus()
    root = Path(root).resolve()
    for sample in samples:
        sid = str(sample.get("sample_id"))
        conv = sample.get("conversation") or {}
        cwd = f"/locomo/{sid}" + (f"-copy{copy}" if copy else "")
        corpus.projects[sid if not copy else f"{sid}-copy{copy}"] = cwd
        folder = root / project_dir_name(cwd)
        folder.mkdir(parents=True, exist_ok=True)
        previous = FALLBACK_START
        whole = f"locomo/{sid}/{copy}/conversation" if layout == "one-file" else None
        written: list[str] = []
        for number, date_text, turns in sessions(conv):
            start = parse_session_time(date_text) or previous + timedelta(days=1)
            previous = start
            key = f"locomo/{sid}/{copy}/session_{number}"
            session = str(uuid.uuid5(uuid.NAMESPACE_URL, whole or key))
            path = folder / f"{session}.jsonl"
            lines = written if whole else []
            for index, turn in enumerate(turns):
                role = (
                    "user"
                    if turn.get("speaker") == conv.get("speaker_a") or layout == "one-side"
                    else "assistant"
                )
                when = start + index * TURN_STEP
                text = turn_text(turn, captions=layout != "no-captions")
                text = vary(text) if vary else text
                if names and turn.get("speaker"):
                    text = f"{turn['speaker']}: {text}"
                line = record(role, text, session=session, cwd=cwd, when=when, key=f"{key}/{index}")
                if role == "assistant" and layout == "thinking":
                    lines.append(json.dumps(_thinking_line(line)))
                lines.append(json.dumps(line))
                dia = str(turn.get("dia_id") or f"D{number}:{index + 1}")
                if not copy:
                    corpus.turns[(sid, dia)] = Turn(
                        sid, dia, str(path), len(lines), role, text, when.strftime("%Y-%m-%dT%H:%M:%SZ")
                    )
            if not whole:
                write_lines(corpus, path, lines)
        if whole and written:
            write_lines(corpus, folder / f"{uuid.uuid5(uuid.NAMESPACE_URL, whole)}.jsonl", written)
    return corpus


LAYOUTS = ("bench", "one-file", "no-captions", "one-side", "thinking")


def _thinking_line(reply: dict) -> dict:
    """The line Claude Code writes before a reply's text when the model thinks first: the same
    `message.id`, a thinking block (its words are not the reply's)."""
    line = json.loads(json.dumps(reply))
    line["uuid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, reply["uuid"] + "/thinking"))
    line["message"]["content"] = [
        {"type": "thinking", "thinking": "Let me think how to answer.", "signature": "x"}
    ]
    return line


def write_lines(corpus: Corpus, path: Path, lines: list[str]) -> None:
    """One transcript file of these JSONL lines, listed in the corpus."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus.files.append(str(path))


def variant(seed: int, vocabulary: Sequence[str], share: float = 0.2) -> Callable[[str], str]:
    """A text rewriter that swaps about `share` of the words of 4+ letters for vocabulary words.

    Every sentence with two such words gets at least one swap, so repeated copies of a conversation
    differ in nearly every sentence (no text cache can serve them) while keeping the original's
    length, punctuation and word statistics.
    """
    import random

    word = re.compile(r"[A-Za-z]{4,}")
    sentence = re.compile(r"[^.!?\n]+[.!?]*")

    def swap_some(text: str, rng: random.Random) -> str:
        spots = [m.span() for m in word.finditer(text)]
        if not spots:
            return text
        chosen = {i for i in range(len(spots)) if rng.random() < share}
        if (
            not chosen and len(spots) >= 2
        ):  # a one-word exclamation stays as it is (smalltalk stays smalltalk)
            chosen = {rng.randrange(len(spots))}
        for i in sorted(chosen, reverse=True):
            text = text[: spots[i][0]] + rng.choice(vocabulary) + text[spots[i][1] :]
        return text

    def rewrite(text: str) -> str:
        rng = random.Random(f"{seed}/{text}")
        return sentence.sub(lambda m: swap_some(m.group(0), rng), text)

    return rewrite


# -- scoring ------------------------------------------------------------------------------------
def pointed_lines(result: dict, ideas_only: bool = False) -> list[tuple[str, int, int]]:
    """(file, first line, last line) ranges a search result points back to."""
    out = []
    if result.get("kind") == "span" or ("start_line" in result and "source_line" not in result):
        if not ideas_only and result.get("start_line") is not None:
            end = result.get("end_line") if result.get("end_line") is not None else result["start_line"]
            out.append((str(result.get("source_file")), int(result["start_line"]), int(end)))
        return out
    if result.get("source_line") is not None:
        out.append((str(result.get("source_file")), int(result["source_line"]), int(result["source_line"])))
    for src in result.get("sources") or []:  # merged duplicates keep every place they were said
        if isinstance(src, dict) and src.get("source_line") is not None:
            out.append((str(src.get("source_file")), int(src["source_line"]), int(src["source_line"])))
    return out


def covered(result: dict, evidence: dict[str, tuple[str, int]], ideas_only: bool = False) -> set[str]:
    """The evidence dia_ids (given as dia_id -> (file, line)) that one result points to."""
    hits = set()
    for file, first, last in pointed_lines(result, ideas_only):
        for dia, (efile, eline) in evidence.items():
            if efile == file and first <= eline <= last:
                hits.add(dia)
    return hits


def score_question(
    results: Sequence[dict], evidence: dict[str, tuple[str, int]], ks: Sequence[int], ideas_only: bool = False
) -> dict[str, float]:
    """recall@k, hit@k for each k, and the reciprocal rank (0 when nothing points to evidence)."""
    per_rank = [covered(r, evidence, ideas_only) for r in results]
    scores: dict[str, float] = {}
    for k in ks:
        seen = set().union(*per_rank[:k]) if per_rank[:k] else set()
        scores[f"recall@{k}"] = len(seen) / len(evidence) if evidence else 0.0
        scores[f"hit@{k}"] = 1.0 if seen else 0.0
    first = next((i for i, hit in enumerate(per_rank, 1) if hit), None)
    scores["mrr"] = 1.0 / first if first else 0.0
    return scores


def evidence_locations(question: Question, corpus: Corpus) -> dict[str, tuple[str, int]]:
    return {
        d: (corpus.turns[(question.sample_id, d)].file, corpus.turns[(question.sample_id, d)].line)
        for d in question.evidence
    }


def aggregate(rows: Iterable[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean of every figure per category name and overall (macro over questions); `n` counts them."""
    groups: dict[str, list[dict[str, float]]] = {}
    for category, scores in rows:
        groups.setdefault(CATEGORIES.get(category, str(category)), []).append(scores)
        groups.setdefault("overall", []).append(scores)
    out = {}
    for name, items in groups.items():
        out[name] = {key: sum(s[key] for s in items) / len(items) for key in items[0]}
        out[name]["n"] = len(items)
    return out


# -- the BM25 baseline over raw turns -------------------------------------------------------------
class TurnIndex:
    """FTS5 (porter unicode61) over the raw turns, one document per turn: the BM25 baseline."""

    def __init__(self, corpus: Corpus):
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(
            "CREATE VIRTUAL TABLE turns USING fts5(text, sample_id UNINDEXED, file UNINDEXED, "
            "line UNINDEXED, tokenize = 'porter unicode61')"
        )
        self.conn.executemany(
            "INSERT INTO turns (text, sample_id, file, line) VALUES (?, ?, ?, ?)",
            [(t.text, t.sample_id, t.file, t.line) for t in corpus.turns.values()],
        )

    def search(self, sample_id: str | None, text: str, k: int) -> list[dict]:
        """Top k turns of one conversation (of every one when sample_id is None) for the query's
        stopword-free terms joined with OR."""
        from total_recall import query as querymod

        match = querymod.analyze(text).fts()
        if not match:
            return []
        rows = self.conn.execute(
            "SELECT file, line FROM turns WHERE turns MATCH ? AND (? IS NULL OR sample_id = ?) "
            "ORDER BY bm25(turns) LIMIT ?",
            (match, sample_id, sample_id, k),
        ).fetchall()
        return [{"kind": "turn", "source_file": f, "source_line": int(line)} for f, line in rows]

    def close(self) -> None:
        self.conn.close()
