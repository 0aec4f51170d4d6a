"""The store: applies one batch's validated extraction output to the database, and owns the
audit log (`event`, memory_events) and the content rules it keys on (normalise, content_hash,
same_fact). Formerly executor.py.

Runs inside the caller's write transaction, together with the transcript offset, so a batch is
either wholly indexed or not at all. Idempotent: ideas are unique on (file_id, source_line,
content_hash), relations and entity links on their natural keys. A row names its transcript by the
id of the path's `files` row (state.file_id); the dicts and tuples these functions take carry the
path (`source_file`).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from total_recall import state
from total_recall.db import Database, table_exists
from total_recall.vectors import delete as delete_vectors
from total_recall.vectors import similar_ideas
from total_recall.vectors import store as store_vectors

WORD = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """Case-, space- and punctuation-folded text: equal meaning-preserving variants hash alike."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(WORD.findall(text))


def jaccard(a: set[str], b: set[str]) -> float:
    """Shared words over all words of two word sets (0.0 when either is empty)."""
    return len(a & b) / len(a | b) if a and b else 0.0


# A lead-in says the fact is repeated, not what it is: "Reminder: ...", "Again, ...", "As decided, ...".
LEAD_IN = re.compile(
    r"^(?:(?:(?:just |quick |a )*(?:reminder|recap|note|fyi|again|once again|once more|to recap|to be clear|"
    r"as (?:a reminder|decided|agreed|discussed|mentioned|noted|said)(?: (?:earlier|before|above|last "
    r"time))?|"
    r"like i said|as i said|for the record|remember)\s*[:,;!.—–-]+\s*)+)",
    re.IGNORECASE,
)


def without_lead_in(text: str) -> str:
    """The statement without a leading "Reminder:" / "Again," / "As decided,": one fact, one memory."""
    rest = LEAD_IN.sub("", text.strip(), count=1)
    return (rest[:1].upper() + rest[1:]) if rest and rest != text.strip() else text.strip()


CONTEXT_WORDS = 40  # the end of the turn before, stored with a chunk for replies that lean on it


def quote(text: str) -> str:
    """What a chunk keeps of the turn before it (its `context`): the turn's last CONTEXT_WORDS words;
    forget recognises a quote of a forgotten turn by it."""
    return " ".join(text.split()[-CONTEXT_WORDS:])


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()[:32]


def span_text(name: str, summary: str) -> str:
    return f"{name}. {summary}".strip(". ") if summary else name


# The cause of what `note` writes (the memory_events of a note's memory): a memory the user added, not
# one said in the conversation (erasure names a topic by the conversation's memories first).
NOTE_CAUSE = "user: note"
# Whether the memory whose id is `{idea}` (an SQL expression) was made by `note`: its insert event's cause.
MADE_BY_NOTE = (
    "EXISTS (SELECT 1 FROM memory_events e WHERE e.kind = 'idea' AND e.object_id = {idea} "
    f"AND e.action = 'insert' AND e.cause = '{NOTE_CAUSE}')"
)


@dataclass
class BatchContext:
    source_file: str
    session_id: str
    project: str
    git_branch: str | None
    line_times: dict[int, str | None]  # source line -> conversation timestamp
    first_line: int
    last_line: int
    cause: str  # e.g. "extract:offline"
    now: float
    idle_gap: float = 1800.0  # seconds of silence after which a new topic starts
    machine: str | None = None  # where the lines were said ([machine] name), next to file:line


@dataclass
class ApplyReport:
    ideas_added: list[int] = field(default_factory=list)
    ideas_existing: int = 0
    relations_added: int = 0
    spans_touched: set[int] = field(default_factory=set)
    lines_with_items: set[int] = field(default_factory=set)


def event(
    db: Database, kind: str, object_id: int | None, action: str, old: Any, new: Any, cause: str, now: float
) -> None:
    db.execute(
        "INSERT INTO memory_events (at, kind, object_id, action, old, new, cause) VALUES (?, ?, ?, ?, ?, ?, "
        "?)",
        (
            now,
            kind,
            object_id,
            action,
            None if old is None else json.dumps(old, ensure_ascii=False),
            None if new is None else json.dumps(new, ensure_ascii=False),
            cause,
        ),
    )


def _open_span(db: Database, ctx: BatchContext, depth: int, parent: int | None) -> Any:
    """The latest open span of this depth under `parent`: id, name, summary, start_line; or None."""
    return db.one(
        "SELECT id, name, summary, start_line FROM spans WHERE session_id = ? AND source_file = ? "
        "AND depth = ? AND closed = 0 AND parent_id = ? ORDER BY id DESC LIMIT 1",
        (ctx.session_id, ctx.source_file, depth, parent),
    )


def _insert_span(
    db: Database, ctx: BatchContext, depth: int, parent: int | None, name: str, summary: str, start: int
) -> int:
    cur = db.execute(
        "INSERT INTO spans (parent_id, session_id, project, git_branch, source_file, depth, name, summary, "
        "start_line, end_line, started_at, ended_at, created_at, updated_at, activation, needs_embedding) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1.0, ?)",
        (
            parent,
            ctx.session_id,
            ctx.project,
            ctx.git_branch,
            ctx.source_file,
            depth,
            name[:200],
            summary[:2000],
            start,
            max(start, ctx.last_line),
            ctx.line_times.get(start),
            ctx.line_times.get(ctx.last_line),
            ctx.now,
            ctx.now,
            int(depth > 0),  # a session span is a container, never searched by vector
        ),
    )
    span_id = int(cur.lastrowid)
    event(
        db,
        "span",
        span_id,
        "insert",
        None,
        {"name": name, "summary": summary, "depth": depth},
        ctx.cause,
        ctx.now,
    )
    return span_id


def _close_span(db: Database, ctx: BatchContext, span_id: int, end_line: int) -> None:
    db.execute(
        "UPDATE spans SET closed = 1, end_line = max(start_line, ?), ended_at = ?, updated_at = ?, "
        "needs_embedding = 1 WHERE id = ?",
        (end_line, ctx.line_times.get(end_line), ctx.now, span_id),
    )
    event(db, "span", span_id, "update", None, {"closed": True, "end_line": end_line}, ctx.cause, ctx.now)


def session_span(db: Database, ctx: BatchContext) -> int:
    span_id = db.scalar("SELECT id FROM spans WHERE session_id = ? AND depth = 0", (ctx.session_id,))
    if span_id is not None:
        return int(span_id)
    name = f"session {ctx.session_id[:8]}"
    return _insert_span(db, ctx, 0, None, name, "", ctx.first_line)


def _same_topic(a: str, b: str) -> bool:
    """Renames that keep half the words are refinements, not topic shifts."""
    wa, wb = set(WORD.findall(a.lower())), set(WORD.findall(b.lower()))
    if not wa or not wb:
        return True
    return len(wa & wb) / min(len(wa), len(wb)) >= 0.5


def apply_topic(
    db: Database, ctx: BatchContext, root: int, update: dict, new_span: dict | None
) -> tuple[int, int | None]:
    """Move the span tree along: returns (topic id, sub-span id or None) for this batch."""
    name, summary = (update.get("name") or "").strip(), (update.get("summary") or "").strip()
    start = int(update.get("start_line") or ctx.first_line)
    current = _open_span(db, ctx, 1, root)
    gap = _idle_gap_line(db, ctx, current)
    if current is not None and gap is not None:
        # Trigger: a pause of idle_gap or more before line `gap`. Why: after a break people move
        # on, whatever the extractor thinks. Outcome: the topic closes; a new one starts there.
        _close_span(db, ctx, current["id"], max(current["start_line"], gap - 1))
        topic = _insert_span(db, ctx, 1, root, name or current["name"], summary, gap)
        return topic, None
    if current is None:
        topic = _insert_span(db, ctx, 1, root, name or "conversation", summary, ctx.first_line)
    elif name and not _same_topic(current["name"], name):
        _close_span(db, ctx, current["id"], max(current["start_line"], start - 1))
        topic = _insert_span(db, ctx, 1, root, name, summary, max(start, ctx.first_line))
    else:
        topic = current["id"]
        if name or summary:
            old = {"name": current["name"], "summary": current["summary"]}
            new = {"name": name or current["name"], "summary": summary or current["summary"]}
            if new != old:
                db.execute(
                    "UPDATE spans SET name = ?, summary = ?, updated_at = ?, needs_embedding = 1 WHERE id = "
                    "?",
                    (new["name"][:200], new["summary"][:2000], ctx.now, topic),
                )
                event(db, "span", topic, "update", old, new, ctx.cause, ctx.now)
    sub = _open_span(db, ctx, 2, topic)
    sub_id = sub["id"] if sub else None
    if new_span and (new_span.get("name") or "").strip():
        sub_start = int(new_span.get("start_line") or ctx.first_line)
        if sub:
            _close_span(db, ctx, sub["id"], max(sub["start_line"], sub_start - 1))
        # The summary says what the sub-span holds; the reason (why it started) is not a summary.
        sub_id = _insert_span(
            db, ctx, 2, topic, new_span["name"].strip(), new_span.get("summary") or "", sub_start
        )
    return topic, sub_id


def _idle_gap_line(db: Database, ctx: BatchContext, current: Any) -> int | None:
    """The first line of this batch said idle_gap or more after the message before it, if any."""
    if current is None or ctx.idle_gap <= 0:
        return None
    previous = db.scalar("SELECT ended_at FROM spans WHERE id = ?", (current["id"],), None)
    for line in sorted(ctx.line_times):
        stamp = _seconds(ctx.line_times[line])
        if stamp is None:
            continue
        before = _seconds(previous)
        if before is not None and stamp - before >= ctx.idle_gap and line > current["start_line"]:
            return line
        previous = ctx.line_times[line]
    return None


def seconds_between(earlier: str | None, later: str | None) -> float:
    """Seconds from one conversation timestamp to another; 0 when either is missing or unreadable."""
    a, b = _seconds(earlier), _seconds(later)
    return b - a if a is not None and b is not None else 0.0


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def extend_spans(db: Database, ctx: BatchContext, span_ids: Iterable[int | None]) -> None:
    for span_id in {s for s in span_ids if s}:
        db.execute(
            "UPDATE spans SET end_line = max(end_line, ?), ended_at = coalesce(?, ended_at), updated_at = ?, "
            "activation = activation + 1.0 WHERE id = ?",
            (ctx.last_line, ctx.line_times.get(ctx.last_line), ctx.now, span_id),
        )


def upsert_entity(db: Database, name: str, etype: str) -> int:
    """The id of the entity of this name, whatever its case (the first spelling is kept)."""
    name = name[:200]
    if db.dialect == "postgres":  # unique by lower(name) (postgres/0002), SQLite by COLLATE NOCASE
        db.execute(
            "INSERT INTO entities (name, type) VALUES (?, ?) ON CONFLICT ((lower(name))) DO NOTHING",
            (name, etype),
        )
        return int(db.scalar("SELECT id FROM entities WHERE lower(name) = lower(?)", (name,)))
    db.execute("INSERT INTO entities (name, type) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (name, etype))
    return int(db.scalar("SELECT id FROM entities WHERE name = ?", (name,)))


# Calibrated on MiniLM pairs (DESIGN.md, "Duplicates"): rewordings of one fact score 0.93-0.99, but so
# does "limit is 100/min" vs "limit is 120/min" (0.966) - embeddings barely see numbers. So a near
# vector only merges when the numbers are identical and most content words are shared.
DUPLICATE_COSINE = 0.92
DUPLICATE_L2 = (2 - 2 * DUPLICATE_COSINE) ** 0.5  # vec0 distance on unit vectors
DUPLICATE_JACCARD = 0.5
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
FILLER = frozenset("a an the is are was were be to of in on for and or with that this it we i you".split())


TOKEN = re.compile(r"[\w.'-]+")


def salient(text: str) -> set[str]:
    """Names, identifiers and numbers (not the sentence's first word): the words that make a fact
    this fact."""
    tokens = TOKEN.findall(text)
    return {
        normalise(t)
        for t in tokens[1:]
        if t[:1].isupper() or any(c.isdigit() for c in t) or "_" in t or "." in t.strip(".")
    } - {""}


def same_fact(a: str, b: str) -> bool:
    """The guard on a near-vector match: same numbers, no differing name, mostly the same words.

    "We chose Meilisearch ..." and "We chose Typesense ..." share nearly every word and vector
    direction, yet say different things.
    """
    if sorted(NUMBER.findall(a)) != sorted(NUMBER.findall(b)):
        return False
    wa, wb = set(normalise(a).split()) - FILLER, set(normalise(b).split()) - FILLER
    names = {w for s in salient(a) | salient(b) for w in s.split()}
    if (wa ^ wb) & names:
        return False
    return jaccard(wa, wb) >= DUPLICATE_JACCARD


def tombstoned(db: Database, ctx: BatchContext, line: int, chash: str) -> bool:
    return bool(
        db.scalar(
            "SELECT 1 FROM tombstones WHERE (kind = 'content' AND project IS ? AND content_hash = ?) "
            "OR (kind = 'line' AND source_file = ? AND source_line = ?) LIMIT 1",
            (ctx.project, chash, ctx.source_file, line),
            0,
        )
    )


def _add_source(db: Database, ctx: BatchContext, idea_id: int, line: int) -> bool:
    cur = db.execute(
        "INSERT OR IGNORE INTO idea_sources (idea_id, file_id, source_line, session_id, message_time, "
        "machine) VALUES (?, ?, ?, ?, ?, ?)",
        (
            idea_id,
            state.file_id(db, ctx.source_file),
            line,
            ctx.session_id,
            ctx.line_times.get(line),
            ctx.machine,
        ),
    )
    return bool(cur.rowcount)


def _duplicate_of(
    db: Database, ctx: BatchContext, item: dict, chash: str, vector: bytes | None
) -> int | None:
    """An existing idea of this project saying the same thing with the same intent, if any."""
    same = db.scalar(
        "SELECT id FROM ideas WHERE project IS ? AND intent = ? AND content_hash = ? ORDER BY id LIMIT 1",
        (ctx.project, item["type"], chash),
    )
    if same is not None:
        return int(same)
    if vector is None:
        return None
    near = similar_ideas(db, vector, ctx.project or "", k=3, max_distance=DUPLICATE_L2)
    return next(
        (
            int(r["id"])
            for r in near
            if r["intent"] == item["type"] and same_fact(item["content"], r["content"])
        ),
        None,
    )


def merge_mention(db: Database, ctx: BatchContext, idea_id: int, item: dict, line: int) -> None:
    """One more mention of a known idea: count it, raise confidence (not for pinned ones), keep the source."""
    if not _add_source(db, ctx, idea_id, line):
        return  # this very line was merged before: re-running a batch changes nothing
    old = db.one("SELECT mention_count, confidence, pinned FROM ideas WHERE id = ?", (idea_id,))
    was = old["confidence"]
    confidence = was if old["pinned"] else min(1.0, max(was, float(item["confidence"])) + (1 - was) * 0.3)
    db.execute(
        "UPDATE ideas SET mention_count = mention_count + 1, confidence = ?, last_seen = ?, updated_at = ?, "
        "activation = activation + 1.0 WHERE id = ?",
        (confidence, ctx.line_times.get(line), ctx.now, idea_id),
    )
    event(
        db,
        "idea",
        idea_id,
        "merge",
        {"mention_count": old["mention_count"], "confidence": was},
        {
            "mention_count": old["mention_count"] + 1,
            "confidence": confidence,
            "source": f"{ctx.source_file}:{line}",
        },
        ctx.cause,
        ctx.now,
    )


def idea_hash(content: str) -> str:
    """The content hash an idea of this text is stored and tombstoned under."""
    return content_hash(without_lead_in(content))


def insert_idea(
    db: Database, ctx: BatchContext, item: dict, span_id: int | None, vector: bytes | None = None
) -> tuple[int | None, bool]:
    """Insert one idea, or merge it into the idea it duplicates; return (id, created).

    None when the user forgot this memory (a tombstone) - forgotten things stay forgotten.
    """
    content = without_lead_in(item["content"])
    item = {**item, "content": content}
    chash = content_hash(content)
    line = int(item["source_line"])
    # Two writers (machines sharing a PostgreSQL store) must not both find no duplicate and both
    # insert: each takes this fact's project-and-intent lock first (a no-op inside SQLite's
    # BEGIN IMMEDIATE); the unique index ideas_one_fact on PostgreSQL is the backstop.
    db.lock("idea", ctx.project, item["type"])
    if tombstoned(db, ctx, line, chash):
        return None, False
    existing = db.scalar(
        f"SELECT id FROM ideas WHERE file_id = {state.FILE_ID} AND source_line = ? AND content_hash = ?",
        (ctx.source_file, line, chash),
    )
    if existing is not None:
        return int(existing), False
    duplicate = _duplicate_of(db, ctx, item, chash, vector)
    if duplicate is not None:
        merge_mention(db, ctx, duplicate, item, line)
        return duplicate, False
    cur = db.execute(
        "INSERT INTO ideas (span_id, content, content_hash, intent, confidence, answered, file_id, "
        "source_line, session_id, project, git_branch, message_time, last_seen, created_at, updated_at, "
        "activation, machine) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1.0, ?)",
        (
            span_id,
            content,
            chash,
            item["type"],
            float(item["confidence"]),
            int(bool(item.get("answered"))),
            state.file_id(db, ctx.source_file),
            line,
            ctx.session_id,
            ctx.project,
            ctx.git_branch,
            ctx.line_times.get(line),
            ctx.line_times.get(line),
            ctx.now,
            ctx.now,
            ctx.machine,
        ),
    )
    idea_id = int(cur.lastrowid)
    _add_source(db, ctx, idea_id, line)
    event(
        db, "idea", idea_id, "insert", None, {"content": content, "intent": item["type"]}, ctx.cause, ctx.now
    )
    for ent in item.get("entities") or ():
        entity_id = upsert_entity(db, ent["name"], ent["type"])
        db.execute(
            "INSERT OR IGNORE INTO idea_entities (idea_id, entity_id) VALUES (?, ?)", (idea_id, entity_id)
        )
    if vector is not None:
        store_vectors(db, "idea_embeddings", "idea_id", [(idea_id, ctx.project, vector)])
    return idea_id, True


def propose(db: Database, ctx: BatchContext, kind: str, target: int, new_id: int) -> None:
    """Pinned memories are the core tier: changes to them wait for `total-recall review`."""
    if db.scalar(
        "SELECT 1 FROM proposals WHERE kind = ? AND target_id = ? AND new_idea_id = ?",
        (kind, target, new_id),
        0,
    ):
        return
    cur = db.execute(
        "INSERT INTO proposals (kind, target_id, new_idea_id, created_at, cause) VALUES (?, ?, ?, ?, ?)",
        (kind, target, new_id, ctx.now, ctx.cause),
    )
    event(
        db,
        "proposal",
        int(cur.lastrowid),
        "insert",
        None,
        {"kind": kind, "target": target, "new": new_id},
        ctx.cause,
        ctx.now,
    )


def insert_relation(db: Database, ctx: BatchContext, from_id: int, to_id: int, rtype: str) -> bool:
    if from_id == to_id:
        return False
    if rtype in ("supersedes", "contradicts") and db.scalar(
        "SELECT pinned FROM ideas WHERE id = ?", (to_id,), 0
    ):
        propose(db, ctx, rtype, to_id, from_id)
        return False
    cur = db.execute(
        "INSERT OR IGNORE INTO relations (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, ?)",
        (from_id, to_id, rtype, ctx.now),
    )
    if cur.rowcount:
        event(
            db,
            "relation",
            int(cur.lastrowid),
            "insert",
            None,
            {"from": from_id, "to": to_id, "type": rtype},
            ctx.cause,
            ctx.now,
        )
        if rtype == "answers":
            # An answered question, and a problem a solution answers (a fix was given), are no
            # longer open: "open questions" and "unresolved problems" leave them out.
            db.execute(
                "UPDATE ideas SET answered = 1, updated_at = ? WHERE id = ? AND (intent = 'question' OR "
                "(intent = 'problem' AND EXISTS "
                "(SELECT 1 FROM ideas s WHERE s.id = ? AND s.intent = 'solution')))",
                (ctx.now, to_id, from_id),
            )
    return bool(cur.rowcount)


def apply_relations(
    db: Database,
    ctx: BatchContext,
    relations: list[dict],
    by_line: dict[int, list[int]],
    content_of: dict[int, str] | None = None,
) -> int:
    """Store the batch's relations. An end given as a line is the idea of that line whose content
    the relation names (`from_content`, `to_content`); without one, the line's last idea starts a
    relation and its first idea ends one. A line of a long reply holds a dozen ideas: its closing
    "feel free to ask!" superseded the user's request its first idea was."""
    content_of = content_of or {}
    added = 0
    for rel in relations:
        source = _named(by_line.get(int(rel["from_line"]), []), rel.get("from_content"), content_of, -1)
        if rel.get("to_idea_id") is not None:
            target = int(rel["to_idea_id"])
        else:
            ends = by_line.get(int(rel.get("to_line") or -1), [])
            target = _named(ends, rel.get("to_content"), content_of, 0)
        if source is None or target is None:
            continue
        exists = db.scalar("SELECT count(*) FROM ideas WHERE id = ?", (target,), 0)
        if exists:
            added += insert_relation(db, ctx, source, target, rel["type"])
    return added


def _named(ids: list[int], content: str | None, content_of: dict[int, str], default: int) -> int | None:
    """The idea among a line's `ids` whose item content is `content` (else the one sharing most
    of its words, at least half of them); `ids[default]` when no content is given; None when the
    content names none of them."""
    if not ids:
        return None
    if not content:
        return ids[default]
    exact = [i for i in ids if content_of.get(i) == content]
    if exact:
        return exact[0]
    words = set(WORD.findall(normalise(content)))
    best, share = None, 0.5
    for i in ids:
        other = set(WORD.findall(normalise(content_of.get(i, ""))))
        overlap = jaccard(words, other)
        if overlap >= share:
            best, share = i, overlap
    return best


def pick_span(spans: list[tuple[int, int]], line: int, default: int) -> int:
    """The deepest span (listed shallow to deep with their start lines) that has begun by `line`."""
    chosen = default
    for span_id, start in spans:
        if start <= line:
            chosen = span_id
    return chosen


def apply_output(
    db: Database, ctx: BatchContext, output: dict, vectors: dict[str, bytes] | None = None
) -> ApplyReport:
    report = ApplyReport()
    root = session_span(db, ctx)
    topic, sub = apply_topic(db, ctx, root, output.get("topic_update") or {}, output.get("new_span"))
    span_starts = [(topic, 0)]
    topic_start = int(db.scalar("SELECT start_line FROM spans WHERE id = ?", (topic,), 0))
    if topic_start > ctx.first_line:
        # The topic began inside this batch: lines before it belong to the topic it closed.
        before = db.scalar(
            "SELECT id FROM spans WHERE parent_id = ? AND depth = 1 AND id < ? ORDER BY id DESC LIMIT 1",
            (root, topic),
            None,
        )
        if before is not None:
            span_starts = [(int(before), 0), (topic, topic_start)]
    if sub:
        span_starts.append((sub, int(db.scalar("SELECT start_line FROM spans WHERE id = ?", (sub,), 0))))
    by_line: dict[int, list[int]] = {}
    content_of: dict[int, str] = {}  # idea -> the item content that made or met it in this batch
    for item in output.get("items", []):
        # `source_line` is the physical line holding the idea's words; relations and coverage speak
        # of the message's first line (`message_line`), as the extractor saw it.
        message_line = int(item.get("message_line", item["source_line"]))
        span_id = pick_span(span_starts, message_line, topic)
        closed = close_todo(db, ctx, item) if item.get("closes") else None
        if closed is not None and item["type"] == "todo":
            # The completed entry is the open todo itself: it is closed, not stored twice.
            _add_source(db, ctx, closed, int(item["source_line"]))
            report.lines_with_items.add(message_line)
            continue
        idea_id, created = insert_idea(db, ctx, item, span_id, (vectors or {}).get(item["content"].strip()))
        if idea_id is not None and item.get("closes") and item["type"] == "todo" and closed is None:
            _mark_closed(db, ctx, idea_id, int(item["source_line"]))  # completed when first seen
        if idea_id is None:
            continue
        by_line.setdefault(message_line, []).append(idea_id)
        content_of.setdefault(idea_id, item["content"])
        report.lines_with_items.add(message_line)
        if created:
            report.ideas_added.append(idea_id)
        else:
            report.ideas_existing += 1
    report.relations_added = apply_relations(db, ctx, output.get("relations", []), by_line, content_of)
    extend_spans(db, ctx, (root, topic, sub))
    report.spans_touched = {s for s in (root, topic, sub) if s}
    return report


TODO_MATCH = 0.5  # stemmed content-word Jaccard for "this says that todo is done"
TODO_STOP = FILLER | frozenset("now done finished completed complete all has been have i ve we just".split())


def _stems(text: str) -> set[str]:
    out = set()
    for word in WORD.findall(normalise(without_lead_in(text))):
        if word in TODO_STOP or len(word) < 2:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


def close_todo(db: Database, ctx: BatchContext, item: dict) -> int | None:
    """Close the open todo of this project that ``item`` says is done; its id, or None.

    The best match by stemmed content words ("Added the migration test" closes "Add a migration
    test"), at least TODO_MATCH; among equals the most recent todo.
    """
    words = _stems(item["content"])
    if not words:
        return None
    best: tuple[float, int] | None = None
    for todo in db.execute(
        "SELECT id, content FROM ideas WHERE project IS ? AND intent = 'todo' AND closed_source_line IS NULL "
        "ORDER BY id DESC LIMIT 500",
        (ctx.project,),
    ):
        other = _stems(todo["content"])
        score = jaccard(words, other)
        if score >= TODO_MATCH and (best is None or score > best[0]):
            best = (score, int(todo["id"]))
    if best is None:
        return None
    _mark_closed(db, ctx, best[1], int(item["source_line"]))
    return best[1]


def close_summary_todos(
    db: Database, ctx: BatchContext, line: int, said_at: str | None, kept: set[str]
) -> int:
    """Close the open todos of this session that an earlier compaction summary listed (a todo whose
    line is a `compact_summary` message said before `said_at`, in the main conversation or a
    compaction agent's file, not another subagent's) and the summary on `line` no longer lists; how
    many. `kept`: the tasks it lists, as `summary.same` words a task; a todo it restates
    (merged, so a source at `line`) is kept too. A summary's pending tasks are the session's as of
    then: one it dropped was done or given up, and stayed open for ever in the session-start digest
    otherwise. In the batch's transaction, after its messages rows are written."""
    from total_recall.extract.summary import same

    if not said_at:
        return 0
    rows = db.all(
        "SELECT i.id, i.content FROM ideas i JOIN files f ON f.id = i.file_id WHERE i.session_id = ? "
        "AND i.intent = 'todo' AND i.closed_source_line IS NULL AND i.message_time < ? "
        "AND (f.path NOT LIKE '%/agent-%' OR f.path LIKE '%/agent-acompact%') "
        "AND EXISTS (SELECT 1 FROM messages m WHERE m.file_id = i.file_id "
        "AND m.source_line = i.source_line AND m.kind = 'compact_summary') "
        "AND NOT EXISTS (SELECT 1 FROM idea_sources s WHERE s.idea_id = i.id "
        f"AND s.file_id = {state.FILE_ID} AND s.source_line = ?)",
        (ctx.session_id, said_at, ctx.source_file, line),
    )
    closed = 0
    for r in rows:
        if same(r["content"]) not in kept:
            _mark_closed(db, ctx, int(r["id"]), line)
            closed += 1
    return closed


def _mark_closed(db: Database, ctx: BatchContext, idea_id: int, line: int) -> None:
    db.execute(
        "UPDATE ideas SET closed_at = ?, closed_source_file = ?, closed_source_line = ?, updated_at = ? "
        "WHERE id = ? AND closed_source_line IS NULL",
        (ctx.line_times.get(line), ctx.source_file, line, ctx.now, idea_id),
    )
    event(db, "idea", idea_id, "close", None, {"closed_by": f"{ctx.source_file}:{line}"}, ctx.cause, ctx.now)


def delete_ideas(db: Database, ids: list[int], cause: str, now: float) -> None:
    """Remove ideas an extractor made, to be replaced (no tombstone: this is not forgetting), and
    the entities only they named. The event keeps the lines they were said on, so a forget of those
    lines finds it (erasure._replaced_from)."""
    for idea_id in ids:
        row = db.one("SELECT content, intent FROM ideas WHERE id = ?", (idea_id,))
        if row is None:
            continue
        sources = [
            [r["source_file"], r["source_line"]]
            for r in db.all(
                f"SELECT {state.path_of('idea_sources')}, source_line FROM idea_sources WHERE idea_id = ?",
                (idea_id,),
            )
        ]
        named = db.column("SELECT entity_id FROM idea_entities WHERE idea_id = ?", (idea_id,))
        delete_vectors(db, "ideas", [idea_id])
        db.execute("DELETE FROM ideas WHERE id = ?", (idea_id,))
        for entity_id in named:
            if not db.one("SELECT 1 FROM idea_entities WHERE entity_id = ?", (entity_id,)):
                db.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
        event(
            db,
            "idea",
            idea_id,
            "replace",
            {"content": row["content"], "intent": row["intent"], "sources": sources},
            None,
            cause,
            now,
        )


def insert_chunk(db: Database, row: dict, vector: bytes | None = None) -> int | None:
    """Store one chunk (a window of one line's words; DESIGN.md "Search") and its vector when it has
    one (which clears needs_embedding); None when that (file, line, seq) is stored already."""
    cur = db.execute(
        "INSERT OR IGNORE INTO chunks (file_id, source_line, message_line, seq, session_id, project, "
        "role, kind, timestamp, content, context, needs_embedding, machine) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            state.file_id(db, row["source_file"]),
            row["source_line"],
            row["message_line"],
            row["seq"],
            row["session_id"],
            row["project"],
            row["role"],
            row["kind"],
            row["timestamp"],
            row["content"],
            row["context"],
            int(row["needs_embedding"]),
            row.get("machine"),
        ),
    )
    if not cur.rowcount:
        return None
    chunk_id = int(cur.lastrowid)
    if vector is not None and table_exists(db, "chunk_embeddings"):
        store_vectors(db, "chunk_embeddings", "chunk_id", [(chunk_id, row["project"], vector)])
    return chunk_id


def import_span(db: Database, row: dict, parent_id: int | None, now: float) -> int:
    """The span of this session and file at this depth and start line, inserted when missing (an
    import); its id. Spans have no natural key in the schema; these four fields are one."""
    found = db.scalar(
        "SELECT id FROM spans WHERE session_id = ? AND source_file = ? AND depth = ? AND start_line = ? "
        "ORDER BY id LIMIT 1",
        (row["session_id"], row["source_file"], row["depth"], row["start_line"]),
    )
    if found is not None:
        return int(found)
    cur = db.execute(
        "INSERT INTO spans (parent_id, session_id, project, git_branch, source_file, depth, name, summary, "
        "start_line, end_line, closed, started_at, ended_at, created_at, updated_at, needs_embedding) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            parent_id,
            row["session_id"],
            row.get("project"),
            row.get("git_branch"),
            row["source_file"],
            row["depth"],
            row["name"][:200],
            (row.get("summary") or "")[:2000],
            row["start_line"],
            row["end_line"],
            int(bool(row.get("closed"))),
            row.get("started_at"),
            row.get("ended_at"),
            now,
            now,
            int(row["depth"] > 0),
        ),
    )
    return int(cur.lastrowid)


def move_to_text_lines(db: Database, path: str, moves: dict[int, int], cause: str, now: float) -> int:
    """Move the memories, sources, windows and todo closings on each reply's first line of `moves`
    to its text's line (repoint.py; in the caller's transaction); each memory's move is an event.
    A row whose twin is on the text line already stays."""
    fid = state.FILE_ID
    moved = 0
    for first, text in sorted(moves.items()):
        for r in db.all(
            f"SELECT id FROM ideas WHERE file_id = {fid} AND source_line = ? "
            f"AND NOT EXISTS (SELECT 1 FROM ideas o WHERE o.file_id = ideas.file_id AND o.source_line = ? "
            "AND o.content_hash = ideas.content_hash)",
            (path, first, text),
        ):
            db.execute("UPDATE ideas SET source_line = ? WHERE id = ?", (text, r["id"]))
            event(db, "idea", r["id"], "update", {"source_line": first}, {"source_line": text}, cause, now)
            moved += 1
        moved += db.execute(
            f"UPDATE idea_sources SET source_line = ? WHERE file_id = {fid} AND source_line = ? "
            "AND NOT EXISTS (SELECT 1 FROM idea_sources o WHERE o.idea_id = idea_sources.idea_id "
            "AND o.file_id = idea_sources.file_id AND o.source_line = ?)",
            (text, path, first, text),
        ).rowcount
        moved += db.execute(
            f"UPDATE chunks SET source_line = ? WHERE file_id = {fid} AND source_line = ? "
            "AND message_line = ? AND NOT EXISTS (SELECT 1 FROM chunks o WHERE o.file_id = chunks.file_id "
            "AND o.source_line = ?)",
            (text, path, first, first, text),
        ).rowcount
        moved += db.execute(
            "UPDATE ideas SET closed_source_line = ? WHERE closed_source_file = ? AND closed_source_line = ?",
            (text, path, first),
        ).rowcount
    return moved


# The line columns of one transcript's rows, and how a row names its transcript; the first four are
# in unique keys with the line (move_lines moves them through negative lines so no step collides).
_LINE_COLUMNS = (
    ("messages", "source_line", f"file_id = {state.FILE_ID}"),
    ("chunks", "source_line", f"file_id = {state.FILE_ID}"),
    ("ideas", "source_line", f"file_id = {state.FILE_ID}"),
    ("idea_sources", "source_line", f"file_id = {state.FILE_ID}"),
    ("chunks", "message_line", f"file_id = {state.FILE_ID}"),
    ("ideas", "closed_source_line", "closed_source_file = ?"),
    ("spans", "start_line", "source_file = ?"),
    ("spans", "end_line", "source_file = ?"),
    ("tombstones", "source_line", "kind = 'line' AND source_file = ?"),
)
# A moved row whose twin (the same unique key) is on its new line already: the twin stands for it.
_TWIN = {
    "messages": "o.file_id = t.file_id AND o.content_hash = t.content_hash",
    "idea_sources": "o.file_id = t.file_id AND o.idea_id = t.idea_id",
    "ideas": "o.file_id = t.file_id AND o.content_hash = t.content_hash",
}


def move_lines(db: Database, path: str, ranges: list[tuple[int, int, int]], cause: str, now: float) -> int:
    """Every row of transcript `path` on a line of each (first, last, by) range moves `by` lines: the
    records a hand edit moved carry their memories, sources, windows, spans, forgets and closings
    (indexer._follow_moved_records; in the caller's transaction). The ranges' old lines are disjoint,
    and so are their new ones. What stays on a line a moved record now holds is of a record no
    longer there: its windows, raw row and line forget go (they would show or hide the moved
    record's words), and its memories lose that line (_drop_sources). A moved row whose twin (the
    same unique key) is on its new line already goes: the twin is the same row. How many rows moved."""
    fid = state.FILE_ID
    for lo, hi, _ in ranges:  # 1: what moves goes to its negative line, out of every range's way
        for table, col, where in _LINE_COLUMNS:
            db.execute(
                f"UPDATE {table} SET {col} = -{col} WHERE {where} AND {col} BETWEEN ? AND ?", (path, lo, hi)
            )
    for lo, hi, by in ranges:  # what stays where a moved record now is: of a record no longer there
        _drop_rows(db, path, lo + by, hi + by)
        _drop_sources(db, path, lo + by, hi + by, cause, now)
        db.execute(
            "DELETE FROM tombstones WHERE kind = 'line' AND source_file = ? AND source_line BETWEEN ? AND ?",
            (path, lo + by, hi + by),
        )
    ideas = db.all(
        f"SELECT id, -source_line AS line FROM ideas WHERE file_id = {fid} AND source_line < 0", (path,)
    )
    moved = 0
    for lo, hi, by in ranges:  # 2: each to its new line
        for table, col, where in _LINE_COLUMNS:
            twin = table in _TWIN and col == "source_line"
            clause = (
                f" AND NOT EXISTS (SELECT 1 FROM {table} o WHERE {_TWIN[table]} AND o.{col} = ? - t.{col})"
                if twin
                else ""
            )
            moved += db.execute(
                f"UPDATE {table} AS t SET {col} = ? - {col} WHERE {where} AND {col} BETWEEN ? AND ?{clause}",
                (by, path, -hi, -lo, *((by,) if twin else ())),
            ).rowcount
    db.execute(
        f"UPDATE ideas SET source_line = -source_line WHERE file_id = {fid} AND source_line < 0", (path,)
    )
    twice = db.column(f"SELECT idea_id FROM idea_sources WHERE file_id = {fid} AND source_line < 0", (path,))
    for table in ("messages", "idea_sources"):
        db.execute(f"DELETE FROM {table} WHERE file_id = {fid} AND source_line < 0", (path,))
    db.executemany(
        "UPDATE ideas SET mention_count = max(1, (SELECT count(*) FROM idea_sources s "
        "WHERE s.idea_id = ideas.id)) WHERE id = ?",
        [(i,) for i in sorted(set(twice))],
    )
    for r in ideas:
        new = db.scalar("SELECT source_line FROM ideas WHERE id = ?", (r["id"],))
        if new != r["line"]:
            event(db, "idea", r["id"], "update", {"source_line": r["line"]}, {"source_line": new}, cause, now)
    for row in db.all(
        "SELECT id, lines FROM fallback_batches WHERE source_file = ? AND done_at IS NULL", (path,)
    ):
        lines = [_moved(n, ranges) for n in json.loads(row["lines"])]
        db.execute("UPDATE fallback_batches SET lines = ? WHERE id = ?", (json.dumps(lines), row["id"]))
    return moved


# How many lines after a dropped one a window may quote it from (the turn before it, past a response's
# tool lines and results).
CONTEXT_REACH = 50


def drop_lines(db: Database, path: str, first: int, last: int, cause: str, now: float) -> None:
    """Lines first..last of transcript `path` hold nothing stored any more: their rows, windows and
    memories' sources go (a memory said nowhere else with them; no tombstone: they are read again).
    In the caller's transaction."""
    _drop_rows(db, path, first, last)
    _drop_sources(db, path, first, last, cause, now)


def _drop_rows(db: Database, path: str, first: int, last: int) -> None:
    """The rows and windows of lines first..last of `path`, with their vectors; a note's window stays
    (a note cites the line it was written at, not what the line says: note._where)."""
    fid = state.FILE_ID
    said = [
        t
        for t in db.column(
            f"SELECT content FROM messages WHERE file_id = {fid} AND source_line BETWEEN ? AND ?",
            (path, first, last),
        )
        if t
    ]
    # The windows after them that quote them as the turn before (their context) quote them no more.
    quoted = {quote(t) for t in said}
    for row in db.all(
        f"SELECT id, context FROM chunks WHERE file_id = {fid} AND source_line > ? AND source_line <= ? "
        "AND context != ''",
        (path, last, last + CONTEXT_REACH),
    ):
        if row["context"] in quoted:
            db.execute("UPDATE chunks SET context = '' WHERE id = ?", (row["id"],))
    for table, extra in (("chunks", " AND kind != 'note'"), ("messages", "")):
        gone = db.column(
            f"SELECT id FROM {table} WHERE file_id = {fid} AND source_line BETWEEN ? AND ?{extra}",
            (path, first, last),
        )
        delete_vectors(db, table, gone)
        db.executemany(f"DELETE FROM {table} WHERE id = ?", [(i,) for i in gone])


def _drop_sources(db: Database, path: str, first: int, last: int, cause: str, now: float) -> None:
    """The memories of lines first..last of `path` lose those lines as sources: a memory said
    nowhere else goes (store.delete_ideas: no tombstone, it may be said again), one said elsewhere
    cites its earliest other line."""
    fid = state.FILE_ID
    # A note's source is where it was written, not what the line said: it stays (note._where).
    not_noted = " AND NOT " + MADE_BY_NOTE.format(idea="idea_sources.idea_id")
    ids = db.column(
        f"SELECT DISTINCT idea_id FROM idea_sources WHERE file_id = {fid} AND source_line BETWEEN ? AND ?"
        + not_noted,
        (path, first, last),
    )
    db.execute(
        f"DELETE FROM idea_sources WHERE file_id = {fid} AND source_line BETWEEN ? AND ?" + not_noted,
        (path, first, last),
    )
    gone = []
    for idea_id in sorted(set(ids)):
        other = db.one(
            "SELECT file_id, source_line FROM idea_sources WHERE idea_id = ? "
            "ORDER BY message_time, source_line",
            (idea_id,),
        )
        if other is None:
            gone.append(idea_id)
            continue
        db.execute(
            "UPDATE ideas SET mention_count = max(1, (SELECT count(*) FROM idea_sources s "
            "WHERE s.idea_id = ideas.id)) WHERE id = ?",
            (idea_id,),
        )
        db.execute(  # its own line went: it cites its earliest other one
            f"UPDATE ideas SET file_id = ?, source_line = ? WHERE id = ? AND file_id = {fid} "
            "AND source_line BETWEEN ? AND ?",
            (other["file_id"], other["source_line"], idea_id, path, first, last),
        )
    delete_ideas(db, gone, cause, now)


def _moved(line: int, ranges: list[tuple[int, int, int]]) -> int:
    return next((line + by for lo, hi, by in ranges if lo <= line <= hi), line)


# Where a value stored before it was known as a secret may stand: (table, text columns, whether a
# changed row needs a new vector).
_SCRUBBED = (
    ("messages", ("content",), False),
    ("chunks", ("content", "context"), True),
    ("ideas", ("content",), True),
    ("spans", ("name", "summary"), True),
    ("memory_events", ("old", "new"), False),
)


def _hidden_twin(db: Database, idea_id: int, chash: str) -> bool:
    """Whether another memory of this one's project and kind, or of its line, has this text already
    (two that differed only by a value now hidden): a unique key the new text would break."""
    return (
        db.one(
            "SELECT 1 FROM ideas o JOIN ideas i ON i.id = ? WHERE o.id != i.id AND o.content_hash = ? "
            "AND ((coalesce(o.project, '') = coalesce(i.project, '') AND o.intent = i.intent) "
            "OR (o.file_id = i.file_id AND o.source_line = i.source_line))",
            (idea_id, chash),
        )
        is not None
    )


def _containing(value: str) -> str:
    """A LIKE pattern (escape character backslash) for text that holds `value`."""
    return "%" + "".join("\\" + c if c in "\\%_" else c for c in value) + "%"


def scrub_values(db: Database, values: list[str], hide: Callable[[str, list[str]], str], now: float) -> int:
    """Hide these secret values (`hide`: redact.hide) in every row stored before they were known as
    secrets (said bare first, with their name later: the indexer's redact.Seen found them), and drop
    the entities they name; changed rows are embedded again. In the caller's transaction; how many
    rows changed."""
    changed = 0
    likes = [_containing(v) for v in values]
    for table, columns, embedded in _SCRUBBED:
        where = " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in columns for _ in likes)
        for row in db.all(
            f"SELECT id, {', '.join(columns)} FROM {table} WHERE {where}", likes * len(columns)
        ):
            new = {c: hide(row[c], values) if row[c] else row[c] for c in columns}
            if all(new[c] == row[c] for c in columns):
                continue
            sets = {**new}
            if table in ("messages", "ideas"):
                sets["content_hash"] = content_hash(new["content"])
            if table == "ideas" and _hidden_twin(db, row["id"], sets["content_hash"]):
                delete_ideas(db, [row["id"]], "secret hidden", now)  # its twin says the same now
                changed += 1
                continue
            if embedded:
                sets["needs_embedding"] = 1
                delete_vectors(db, table, [row["id"]])
            if table == "ideas":
                sets["updated_at"] = now
            db.execute(
                f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in sets)} WHERE id = ?",
                (*sets.values(), row["id"]),
            )
            changed += 1
    for like in likes:
        named = db.column("SELECT id FROM entities WHERE name LIKE ? ESCAPE '\\'", (like,))
        db.executemany("DELETE FROM idea_entities WHERE entity_id = ?", [(e,) for e in named])
        db.executemany("DELETE FROM entities WHERE id = ?", [(e,) for e in named])
        changed += len(named)
    return changed


def fill_uuids(db: Database, path: str, uuids: dict[int, str]) -> None:
    """Give the stored lines of a transcript that have none their record uuid (lines stored before
    0015; repoint.py reads them from the transcript). In the caller's transaction."""
    db.executemany(
        f"UPDATE messages SET uuid = ? WHERE file_id = {state.FILE_ID} AND source_line = ? AND uuid IS NULL",
        [(u, path, line) for line, u in sorted(uuids.items())],
    )


def events_of(db: Database, kind: str, object_id: int) -> list:
    """The audit log of one object, oldest first: at, action, old, new (JSON text), cause."""
    return db.all(
        "SELECT at, action, old, new, cause FROM memory_events WHERE kind = ? AND object_id = ? ORDER BY id",
        (kind, object_id),
    )


# The columns of a messages row, in the order insert_messages takes them (the path, not its file_id).
MESSAGE_COLUMNS = (
    "source_file",
    "source_line",
    "session_id",
    "project",
    "git_branch",
    "role",
    "kind",
    "content",
    "content_hash",
    "timestamp",
    "skip_reason",
    "indexed_at",
    "uuid",
)


def insert_messages(db: Database, rows: list[tuple]) -> None:
    """Every line of a batch (MESSAGE_COLUMNS order), with why it gave no memory; a line stored
    already keeps its row."""
    ids = state.file_ids(db, (r[0] for r in rows))
    db.executemany(
        f"INSERT OR IGNORE INTO messages (file_id, {', '.join(MESSAGE_COLUMNS[1:])}) "
        f"VALUES ({', '.join('?' * len(MESSAGE_COLUMNS))})",
        [(ids[r[0]], *r[1:]) for r in rows],
    )
