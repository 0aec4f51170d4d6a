"""Explicit memory: something the user (or Claude, asked by the user) wants remembered, stored now.

A note is an idea like any extracted one (same table, tombstones, duplicate merge, events), said
by the user with confidence 1.0. It is embedded before its write transaction, so it is found by
vector search at once, not after the daemon's next pass. It belongs to the session and project it
was said in: with a session id, its source is that session's transcript at the line the
conversation has reached; without one, a numbered line of the pseudo-source NOTE_SOURCE.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any

import structlog

from total_recall import config, memories, state, store, transcript, trust
from total_recall.db import Database
from total_recall.errors import EmbeddingError, TotalRecallError, TranscriptError, TransientError
from total_recall.extract.protocol import INTENTS

log = structlog.get_logger(__name__)

NOTE_SOURCE = "total-recall-note"
MAX_NOTE_CHARS = 4000
NOTE_SCAN_BYTES = 16 << 20  # most bytes past the indexed offset counted for the line reached now


def note(
    db: Database,
    text: str,
    *,
    intent: str = "context",
    pin: bool = False,
    session: str | None = None,
    project: str | None = None,
    cwd: str | None = None,
    settings: config.Settings | None = None,
    embedder: Any = None,
) -> dict:
    """Store one explicit memory; return it as {id, content, intent, pinned, project, source, ...}."""
    text = " ".join((text or "").split())
    if not text:
        raise TotalRecallError("the note is empty; say what to remember")
    if len(text) > MAX_NOTE_CHARS:
        raise TotalRecallError(f"the note is {len(text)} characters; keep it under {MAX_NOTE_CHARS}")
    if intent not in INTENTS:
        raise TotalRecallError(f"intent takes one of {', '.join(INTENTS)}, not {intent!r}")
    from total_recall.redact import Seen, hide, redact_batch

    # As a read is redacted: a value hidden before is hidden here too, and one this note names a
    # secret first is hidden where earlier reads stored it said bare (store.scrub_values, I216).
    seen = Seen(config.paths().seen_secrets)
    text = redact_batch([text], seen=seen)[0]
    session = (session or "").strip() or None  # an unexpanded/empty session id means "no session"
    now = time.time()
    # A pause covers what is remembered from then on, a note too (the MCP tool Claude calls in a paused
    # conversation as much as the CLI), and a forgotten session takes nothing more.
    if trust.in_paused(None, trust.paused_ranges(db), now):
        raise TotalRecallError("remembering is paused: nothing is noted until `total-recall resume`")
    settings = settings or config.load()
    where = _where(db, session, project, cwd, settings)
    if where["session"] and trust.forgotten(db, session=where["session"]):
        raise TotalRecallError(f"session {where['session']} was forgotten: a note cannot belong to it")
    vector, embedded_note = _vector(db, settings, embedder, text)
    stamp = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    ctx = store.BatchContext(
        source_file=where["source_file"],
        session_id=where["session"],
        project=where["project"],
        git_branch=where["branch"],
        line_times={where["line"]: stamp},
        first_line=where["line"],
        last_line=where["line"],
        cause=store.NOTE_CAUSE,
        now=now,
        machine=settings.machine_name(),
    )
    item = {
        "content": text,
        "type": intent,
        "confidence": 1.0,
        "source_line": where["line"],
        "entities": _entities(text, where["project"]),
    }
    with db.write():
        scrubbed = store.scrub_values(db, fresh, hide, now) if (fresh := seen.take_fresh()) else 0
        chash = store.content_hash(text)
        # Trigger: the user once forgot this very text and now asks to remember it. Why: an
        # explicit request is newer than the tombstone. Outcome: the tombstone goes, logged.
        dropped = trust.drop_content_tombstone(db, where["project"], chash)
        if dropped:
            store.event(db, "tombstone", None, "delete", {"content_hash": chash}, None, store.NOTE_CAUSE, now)
        idea_id, created = store.insert_idea(db, ctx, item, where["span"], vector)
        if idea_id is None:  # a line tombstone on the transcript line: note it on the pseudo-source
            ctx.source_file, line = NOTE_SOURCE, _next_note_line(db)
            ctx.line_times, item["source_line"] = {line: stamp}, line
            idea_id, created = store.insert_idea(db, ctx, item, None, vector)
        if created:
            _as_chunk(db, ctx, {**item, "content": memories.idea(db, idea_id)["content"]}, stamp, vector)
        if pin:
            memories.set_pinned(db, idea_id, True, now)
            pinned = {"pinned": True}
            store.event(db, "idea", idea_id, "pin", {"pinned": False}, pinned, store.NOTE_CAUSE, now)
    if scrubbed:  # what the session-start digests show may have held the value
        from total_recall import maintain

        maintain.refresh_all_digests(db)
    row = memories.noted(db, idea_id)
    log.info("note_stored", id=idea_id, created=created, embedded=not row["needs_embedding"])
    result = {
        "id": idea_id,
        "content": row["content"],
        "intent": row["intent"],
        "pinned": bool(row["pinned"]),
        "project": row["project"],
        "session": row["session_id"],
        "source_file": row["source_file"],
        "source_line": row["source_line"],
        "created": created,
        "searchable_by_vector": not row["needs_embedding"],
    }
    if embedded_note:
        result["note"] = embedded_note
    return result


def _known_session(db: Database, given: str) -> str:
    """The indexed session a short id names ("491e126e", as results and topics print it), else the
    id as given: the session /memorize runs in may not be indexed yet. Stored as typed, a short id
    named no session, and the note belonged to none (nor to its project)."""
    from total_recall.errors import Ambiguous, NotFound
    from total_recall.search import resolve_session

    try:
        return resolve_session(db, given, by_title=False)
    except Ambiguous:
        raise
    except NotFound:
        return given


def _where(
    db: Database, session: str | None, project: str | None, cwd: str | None, settings: config.Settings
) -> dict:
    """Source file, line, project, branch and span of a note said now."""
    from total_recall.search import resolve_projects

    out: dict[str, Any] = {
        "session": session,
        "project": None,
        "branch": None,
        "span": None,
        "source_file": NOTE_SOURCE,
        "line": None,
    }
    if session:
        session = out["session"] = _known_session(db, session)
        row = state.latest_of_session(db, session)
        if row:
            out["source_file"], out["project"] = row["source_file"], row["project"]
            out["line"] = _current_line(db, row["source_file"], settings)
            out["branch"] = memories.latest_branch(db, row["source_file"])
            out["span"] = memories.open_span(db, session, row["source_file"])
    if project:
        hits = resolve_projects(db, project, False, None)
        if hits and hits[0] != out["project"]:
            out.update(project=hits[0], span=None)
    if out["project"] is None:
        here = os.path.abspath(cwd or os.getcwd())
        found = resolve_projects(db, None, False, here)
        out["project"] = found[0] if found else here
    # a checkout's memories are stored under the project every checkout of its repository uses
    out["project"] = memories.stored_as(db, out["project"])
    if out["line"] is None:
        out["source_file"], out["line"] = NOTE_SOURCE, _next_note_line(db)
    return out


def _current_line(db: Database, source_file: str, settings: config.Settings) -> int:
    """The conversation's latest line: the last indexed line plus the lines written since, counted
    in the transcript opened as the daemon opens it (never by its name alone) and at most
    NOTE_SCAN_BYTES past the indexed offset; else the last indexed line."""
    row = state.of(db, source_file)
    offset, line = (row["byte_offset"], row["line_number"]) if row else (0, 0)
    try:
        with trust.open_transcript(source_file, settings) as fh:
            if offset and transcript.was_rewritten(
                source_file, offset, row["head_hash"], fh=fh, recorded_tail_hash=row["tail_hash"]
            ):
                offset, line = 0, 0  # not the file that was indexed: count from its start
            fh.seek(offset)
            left = NOTE_SCAN_BYTES
            while left > 0 and (chunk := fh.read(min(1 << 20, left))):
                line, left = line + chunk.count(b"\n"), left - len(chunk)
        if line:
            return line
    except (OSError, TranscriptError):
        pass
    return state.last_line(db, source_file)


def _next_note_line(db: Database) -> int:
    return memories.next_line(db, NOTE_SOURCE)


def _entities(text: str, project: str | None) -> list[dict]:
    from total_recall.extract.offline import entities
    from total_recall.projects import short_name

    return entities(text, short_name(project or ""))


def _vector(
    db: Database, settings: config.Settings, embedder: Any, text: str
) -> tuple[bytes | None, str | None]:
    """The note's vector, or None with the reason (the repair pass embeds it later)."""
    if not db.has_vec:
        return None, "sqlite-vec is not loaded; the note is found by keyword search"
    from total_recall import db as dbmod
    from total_recall.embed import get_embedder, to_blob

    try:
        embedder = embedder or get_embedder(settings)
        if not dbmod.ensure_vector_tables(db, embedder.model_id, embedder.dim):
            return None, "vectors were made by another embedding model; run `total-recall reembed`"
        return to_blob(embedder.embed([text])[0]), None
    except (EmbeddingError, TransientError) as exc:
        # Trigger: the embedder cannot run now. Why: the note must not be lost for it.
        # Outcome: stored with needs_embedding = 1; the daemon's repair pass embeds it.
        log.warning("note_not_embedded", error=str(exc))
        return None, f"not embedded yet ({exc}); the daemon will embed it"


def _as_chunk(db: Database, ctx: store.BatchContext, item: dict, stamp: str, vector: bytes | None) -> None:
    """A note is also a line of words, searched like every line of a conversation (DESIGN.md
    "Search"): without it a note would compete with conversation lines on its idea alone."""
    store.insert_chunk(
        db,
        {
            "source_file": ctx.source_file,
            "source_line": item["source_line"],
            "message_line": item["source_line"],
            # each note at a line has its own window, past the line's own (note windows count from 1000)
            "seq": max(1000, memories.last_window(db, ctx.source_file, item["source_line"]) + 1),
            "session_id": ctx.session_id,
            "project": ctx.project,
            "role": "user",
            "kind": "note",
            "timestamp": stamp,
            "content": item["content"],
            "context": "",
            "needs_embedding": True,
            "machine": ctx.machine,
        },
        vector,
    )
