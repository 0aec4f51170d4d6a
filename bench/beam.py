"""BEAM coding-project chats -> Claude Code transcripts, and their probing questions with evidence.

A BEAM folder (`chat.json`, and `probing_questions.json` beside it or, as the benchmark publishes
it, in `probing_questions/`) is one conversation between a user building an app and an assistant,
cut into batches (the 10M chats group their batches under "plan-1", "plan-2", ...: read in plan
order as one list). Conversion: each batch becomes one transcript (user ->
user, assistant -> assistant, one JSONL line per message), batches a week apart, one minute per
message; the " ->-> N,M" markers BEAM appends to message text are removed. Each chat is its own
project (cwd /beam/<folder name>).

Questions: every ability except those with no evidence turns (abstention, instruction_following,
preference_following); a question's evidence is the set of message ids in `source_chat_ids` (a
list, or a dict of lists), as turns "M<id>" of the corpus. Scoring is locomo's.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import locomo

LEFT_OUT_ABILITIES = {"abstention", "instruction_following", "preference_following"}
MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
START = datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc)
BATCH_STEP = timedelta(days=7)


QUESTION_FILES = ("probing_questions.json", "probing_questions/probing_questions.json")
PLAN = re.compile(r"plan-(\d+)$")


def load(folder: Path) -> dict[str, Any]:
    folder = Path(folder)
    found = next((folder / name for name in QUESTION_FILES if (folder / name).is_file()), None)
    if found is None:
        raise FileNotFoundError(f"{folder}: no questions file (looked for {' and '.join(QUESTION_FILES)})")
    return {
        "sample_id": sample_id(folder),
        "chat": json.loads((folder / "chat.json").read_text(encoding="utf-8")),
        "questions": json.loads(found.read_text(encoding="utf-8")),
    }


def sample_id(folder: Path) -> str:
    """A chat's name: its folder's, or with the size folder before it when the folder is only a
    number (the benchmark's `chats/100K/1` is "100K_1", as the dev copy names that folder), so chats
    of different sizes read together stay apart."""
    return f"{folder.parent.name}_{folder.name}" if folder.name.isdigit() else folder.name


def folders(root: Path) -> list[Path]:
    """Every BEAM chat folder at any depth under root (a folder holding chat.json), sorted."""
    return sorted(p.parent for p in Path(root).rglob("chat.json"))


def batches(chat: list) -> list[dict]:
    """The chat's batches in order; a 10M chat's item maps "plan-N" to a list of batches."""
    out = []
    for item in chat:
        plans = (
            sorted((int(m.group(1)), k) for k in item if (m := PLAN.match(str(k))))
            if isinstance(item, dict)
            else []
        )
        if not plans:
            out.append(item)
        for _, key in plans:
            out += [b for b in item[key] if isinstance(b, dict)]
    return out


def clean(text: Any) -> str:
    return MARKER.sub("", str(text or "")).strip()


def messages(batch: dict) -> list[dict]:
    """The batch's messages in order: `turns` is a list of turns, each a list of messages."""
    out = []
    for turn in batch.get("turns") or []:
        for msg in turn if isinstance(turn, list) else [turn]:
            if isinstance(msg, dict) and clean(msg.get("content")):
                out.append(msg)
    return out


def convert(
    samples: Iterable[dict], root: Path, corpus: locomo.Corpus | None = None, layout: str = "bench"
) -> locomo.Corpus:
    """One transcript per batch, a week apart (BATCH_STEP); `layout` "one-file" writes each chat as
    one transcript instead, its lines numbered on through the batches (locomo.LAYOUTS)."""
    if layout not in ("bench", "one-file"):
        raise ValueError(f"unknown layout {layout!r} for BEAM; choose bench or one-file")
    corpus = corpus or locomo.Corpus()
    root = Path(root).resolve()
    for sample in samples:
        sid = sample["sample_id"]
        cwd = f"/beam/{sid}"
        corpus.projects[sid] = cwd
        folder = root / locomo.project_dir_name(cwd)
        folder.mkdir(parents=True, exist_ok=True)
        whole = f"beam/{sid}/chat" if layout == "one-file" else None
        written: list[str] = []
        repeated = 0
        if not all_messages(sample):
            raise ValueError(
                f"BEAM chat {sid}: no messages in its chat.json (a layout this reader does not know)"
            )
        for number, batch in enumerate(batches(sample["chat"])):
            start = START + number * BATCH_STEP
            key = f"beam/{sid}/batch_{number}"
            session = str(locomo.uuid.uuid5(locomo.uuid.NAMESPACE_URL, whole or key))
            path = folder / f"{session}.jsonl"
            lines = written if whole else []
            for index, msg in enumerate(messages(batch)):
                role = "user" if msg.get("role") == "user" else "assistant"
                when = start + index * locomo.TURN_STEP
                text = clean(msg.get("content"))
                lines.append(
                    json.dumps(
                        locomo.record(role, text, session=session, cwd=cwd, when=when, key=f"{key}/{index}")
                    )
                )
                dia = f"M{msg.get('id')}"
                repeated += (sid, dia) in corpus.turns
                corpus.turns[(sid, dia)] = locomo.Turn(
                    sid, dia, str(path), len(lines), role, text, when.strftime("%Y-%m-%dT%H:%M:%SZ")
                )
            if lines and not whole:
                locomo.write_lines(corpus, path, lines)
        if repeated:
            print(
                f"warning: BEAM chat {sid}: {repeated} message ids repeat;"
                " evidence naming one points at its last message",
                file=sys.stderr,
            )
        if written:
            locomo.write_lines(
                corpus, folder / f"{locomo.uuid.uuid5(locomo.uuid.NAMESPACE_URL, whole)}.jsonl", written
            )
    return corpus


def evidence_ids(source: Any) -> list[str]:
    """Message ids of `source_chat_ids` (a list or a dict of lists), as corpus turn keys, deduplicated."""
    values: list[Any] = []
    if isinstance(source, dict):
        for v in source.values():
            values += v if isinstance(v, list) else [v]
    elif isinstance(source, list):
        values = source
    found: dict[str, None] = {}
    for v in values:
        if isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit()):
            found.setdefault(f"M{int(v)}", None)
    return list(found)


def questions(samples: Iterable[dict], corpus: locomo.Corpus) -> tuple[list[locomo.Question], dict[str, int]]:
    kept, left_out = [], {"other_category": 0, "no_evidence": 0}
    for sample in samples:
        sid = sample["sample_id"]
        for ability, items in sample["questions"].items():
            if isinstance(items, dict):
                items = [
                    q for group in items.values() for q in (group if isinstance(group, list) else [group])
                ]
            for qa in items or []:
                if ability in LEFT_OUT_ABILITIES:
                    left_out["other_category"] += 1
                    continue
                ids = tuple(d for d in evidence_ids(qa.get("source_chat_ids")) if (sid, d) in corpus.turns)
                if not ids or not qa.get("question"):
                    left_out["no_evidence"] += 1
                    continue
                kept.append(locomo.Question(sid, str(qa["question"]), ability, ids))
    return kept, left_out


def labelled_questions(
    items: Iterable[dict], samples: Iterable[dict], corpus: locomo.Corpus
) -> tuple[list[locomo.Question], dict[str, int]]:
    """Our own questions about the chats (bench/beam_qa.json, rules in bench/beam_qa.md): each names
    its chat, 1-3 evidence message ids (3-8 for an overview) and, per id, the first 50 characters of
    that message's text (leading whitespace stripped). A question whose chat is absent is left out; a
    fingerprint that does not match its message is an error, not a miss (the labels and the data
    disagree)."""
    texts = {(s["sample_id"], m.get("id")): clean(m.get("content")) for s in samples for m in all_messages(s)}
    kept, left_out, wrong = [], {"other_category": 0, "no_evidence": 0}, []
    for n, item in enumerate(items):
        sid = item["chat"]
        if not any(key[0] == sid for key in texts):
            left_out["no_evidence"] += 1
            continue
        for ident in item["evidence"]:
            got = texts.get((sid, ident), "")[:50]
            if got != item["fingerprints"].get(str(ident)):
                wrong.append(f"item {n}: {sid} message {ident} starts {got!r}")
        category = "paraphrase" if item.get("phrasing") == "paraphrase" else item["kind"]
        ids = tuple(f"M{ident}" for ident in item["evidence"])
        kept.append(locomo.Question(sid, item["question"], category, ids))
    if wrong:
        raise ValueError("labels do not match the chats:\n" + "\n".join(wrong))
    return kept, left_out


def all_messages(sample: dict) -> list[dict]:
    return [msg for batch in batches(sample["chat"]) for msg in messages(batch)]
