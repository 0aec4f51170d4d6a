"""Corrections by the user: pin, unpin, edit, forget, review proposals; and maintenance.

Every change is written to memory_events with the old and new content. Forgetting removes a
memory from every index (row, vector, FTS through its trigger) and leaves a tombstone so that
re-indexing the transcript does not bring it back.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import structlog

from total_recall import config, executor
from total_recall.db import Database, vector_tables_exist
from total_recall.errors import NotFound, TotalRecallError

log = structlog.get_logger(__name__)


def _idea(db: Database, idea_id: int) -> dict:
    row = db.one("SELECT id, content, intent, pinned, project, confidence FROM ideas WHERE id = ?", (idea_id,))
    if row is None:
        raise NotFound(f"no memory with id {idea_id}")
    return dict(zip(("id", "content", "intent", "pinned", "project", "confidence"), row))


def _event(db: Database, object_id: int | None, action: str, old, new, cause: str = "user") -> None:
    executor.event(db, "idea", object_id, action, old, new, cause, time.time())


def refresh_digests(db: Database, projects) -> None:
    """Rewrite the digests (and so the next SessionStart output) of these projects right now.

    Trigger: a user changed memory (pin, unpin, edit, forget, review). Why: the next session must
    see the change, not wait for the next indexed turn. Outcome: digests/<key>.md rewritten.
    """
    from total_recall import digest

    digest.write_digests(db, [p for p in projects if p])


def pin(db: Database, idea_id: int, pinned: bool = True) -> dict:
    with db.write():
        idea = _idea(db, idea_id)
        db.execute("UPDATE ideas SET pinned = ?, updated_at = ? WHERE id = ?", (int(pinned), time.time(), idea_id))
        _event(db, idea_id, "pin" if pinned else "unpin", {"pinned": bool(idea["pinned"])}, {"pinned": pinned})
    refresh_digests(db, [idea["project"]])
    return {"id": idea_id, "pinned": pinned, "content": idea["content"]}


def edit(db: Database, idea_id: int, text: str) -> dict:
    text = text.strip()
    if not text:
        raise TotalRecallError("the new text is empty; use `total-recall forget` to remove a memory")
    with db.write():
        idea = _idea(db, idea_id)
        db.execute("UPDATE ideas SET content = ?, content_hash = ?, needs_embedding = 1, updated_at = ? WHERE id = ?",
                   (text, executor.content_hash(text), time.time(), idea_id))
        if vector_tables_exist(db):
            db.execute("DELETE FROM idea_embeddings WHERE idea_id = ?", (idea_id,))
        _event(db, idea_id, "edit", {"content": idea["content"]}, {"content": text})
    refresh_digests(db, [idea["project"]])
    return {"id": idea_id, "old": idea["content"], "new": text}


def _delete_ideas(db: Database, ids: list[int], cause: str, line_tombstones: bool) -> int:
    now = time.time()
    has_vec = vector_tables_exist(db)
    for idea_id in ids:
        row = db.one("SELECT content, content_hash, project, intent FROM ideas WHERE id = ?", (idea_id,))
        if row is None:
            continue
        sources = db.execute("SELECT source_file, source_line FROM idea_sources WHERE idea_id = ?", (idea_id,)).fetchall()
        db.execute("INSERT INTO tombstones (kind, project, content_hash, created_at, reason) VALUES "
                   "('content', ?, ?, ?, ?)", (row[2], row[1], now, cause))
        if line_tombstones:
            db.executemany("INSERT INTO tombstones (kind, source_file, source_line, created_at, reason) "
                           "VALUES ('line', ?, ?, ?, ?)", [(f, l, now, cause) for f, l in sources])
        if has_vec:
            db.execute("DELETE FROM idea_embeddings WHERE idea_id = ?", (idea_id,))
        _scrub(db, row[0], sources)
        db.execute("DELETE FROM ideas WHERE id = ?", (idea_id,))
        _event(db, idea_id, "forget", {"content": row[0], "intent": row[3], "project": row[2]}, None, cause)
    return len(ids)


def _scrub(db: Database, text: str, sources: list[tuple]) -> None:
    """Remove a forgotten text from the extractive span names/summaries and stored messages quoting it."""
    db.execute(
        "UPDATE spans SET summary = trim(replace(summary, ?1, '')), name = CASE WHEN instr(name, ?1) > 0 "
        "THEN 'forgotten' ELSE name END, needs_embedding = 1 WHERE instr(summary, ?1) > 0 OR instr(name, ?1) > 0",
        (text,))
    db.executemany("UPDATE messages SET content = trim(replace(content, ?, '')) WHERE source_file = ? "
                   "AND source_line = ?", [(text, f, l) for f, l in sources])
    # The line's own words (search chunks) said the forgotten thing: the line stops being a result.
    for f, line in sources:
        _delete_chunks(db, "source_file = ? AND (source_line = ? OR message_line = ?)", (f, line, line))


def _delete_chunks(db: Database, where: str, params: tuple) -> int:
    ids = [r[0] for r in db.execute(f"SELECT id FROM chunks WHERE {where}", params)]
    if ids and db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'chunk_embeddings'", default=0):
        db.executemany("DELETE FROM chunk_embeddings WHERE chunk_id = ?", [(i,) for i in ids])
    db.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in ids])
    return len(ids)


def forget(db: Database, idea_id: int | None = None, *, session: str | None = None, project: str | None = None,
           before: str | None = None) -> dict:
    """Forget one memory, or every memory of a session / project / before a date."""
    if idea_id is None and not (session or project or before):
        raise TotalRecallError("forget needs an ID, --session, --project or --before")
    with db.write():
        if idea_id is not None:
            touched = [_idea(db, idea_id)["project"]]
            result = {"forgotten": _delete_ideas(db, [idea_id], "user: forget id", line_tombstones=False)}
        else:
            where, params = _scope(db, session, project, before)
            rows = db.execute(f"SELECT id, project FROM ideas WHERE {where}", params).fetchall()
            touched = sorted({r[1] for r in rows if r[1]})
            count = _delete_ideas(db, [r[0] for r in rows], "user: forget scope", line_tombstones=True)
            spans = _forget_spans_and_messages(db, session, project, before)
            result = {"forgotten": count, "spans_removed": spans}
    refresh_digests(db, touched)
    return result


def _scope(db: Database, session: str | None, project: str | None, before: str | None) -> tuple[str, tuple]:
    clauses, params = [], []
    if session:
        clauses.append("session_id = ?")
        params.append(session)
    if project:
        from total_recall.search import resolve_projects

        names = resolve_projects(db, project, False, None) or []
        clauses.append(f"project IN ({','.join('?' * len(names))})")
        params += names
    if before:
        try:
            datetime.fromisoformat(before)
        except ValueError:
            raise TotalRecallError(f"--before takes a date like 2025-05-01, not {before!r}") from None
        clauses.append("substr(message_time, 1, 10) < ?")
        params.append(before[:10])
    return " AND ".join(clauses), tuple(params)


def _forget_spans_and_messages(db: Database, session, project, before) -> int:
    where, params = _scope(db, session, project, before)
    span_where = where.replace("message_time", "started_at")
    msg_where = where.replace("message_time", "timestamp")
    now = time.time()
    db.executemany("INSERT INTO tombstones (kind, source_file, source_line, created_at, reason) "
                   "VALUES ('line', ?, ?, ?, 'user: forget scope')",
                   [(f, l, now) for f, l in db.execute(
                       f"SELECT source_file, source_line FROM messages WHERE {msg_where}", params)])
    db.execute(f"DELETE FROM messages WHERE {msg_where}", params)
    _delete_chunks(db, msg_where, params)
    ids = [r[0] for r in db.execute(f"SELECT id FROM spans WHERE {span_where}", params)]
    if ids and vector_tables_exist(db):
        db.executemany("DELETE FROM span_embeddings WHERE span_id = ?", [(i,) for i in ids])
    db.executemany("DELETE FROM spans WHERE id = ?", [(i,) for i in ids])
    return len(ids)


def proposals(db: Database, state: str = "pending") -> list[dict]:
    rows = db.execute(
        "SELECT p.id, p.kind, p.target_id, t.content, p.new_idea_id, n.content, p.created_at, p.state "
        "FROM proposals p JOIN ideas t ON t.id = p.target_id LEFT JOIN ideas n ON n.id = p.new_idea_id "
        "WHERE p.state = ? ORDER BY p.id", (state,)).fetchall()
    keys = ("id", "kind", "target_id", "target", "new_idea_id", "new", "created_at", "state")
    return [dict(zip(keys, r)) for r in rows]


def decide(db: Database, proposal_id: int, apply: bool) -> dict:
    """Apply (the new idea supersedes the pinned one and takes its pin) or reject a proposal."""
    with db.write():
        row = db.one("SELECT kind, target_id, new_idea_id, state FROM proposals WHERE id = ?", (proposal_id,))
        if row is None:
            raise NotFound(f"no proposal with id {proposal_id}")
        if row[3] != "pending":
            raise TotalRecallError(f"proposal {proposal_id} is already {row[3]}")
        kind, target, new_id = row[0], row[1], row[2]
        now = time.time()
        if apply and new_id is not None:
            db.execute("INSERT OR IGNORE INTO relations (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, ?)",
                       (new_id, target, kind, now))
            if kind == "supersedes":
                db.execute("UPDATE ideas SET pinned = 0 WHERE id = ?", (target,))
                db.execute("UPDATE ideas SET pinned = 1 WHERE id = ?", (new_id,))
        state = "applied" if apply else "rejected"
        db.execute("UPDATE proposals SET state = ?, decided_at = ? WHERE id = ?", (state, now, proposal_id))
        executor.event(db, "proposal", proposal_id, state, {"state": "pending"}, {"state": state}, "user: review", now)
        touched = [r[0] for r in db.execute("SELECT project FROM ideas WHERE id IN (?, ?)", (target, new_id))]
    refresh_digests(db, touched)
    return {"id": proposal_id, "state": state}


# -- maintenance ----------------------------------------------------------------------------
def merge_duplicates(db: Database) -> int:
    """Fold exact duplicates (same project, intent and normalised text) that slipped through."""
    groups = db.execute(
        "SELECT project, intent, content_hash, group_concat(id) FROM ideas GROUP BY project, intent, content_hash "
        "HAVING count(*) > 1").fetchall()
    merged = 0
    now = time.time()
    with db.write():
        for _project, _intent, _hash, ids in groups:
            keep, *rest = sorted(int(i) for i in ids.split(","))
            for dup in rest:
                db.execute("INSERT OR IGNORE INTO idea_sources (idea_id, source_file, source_line, session_id, "
                           "message_time) SELECT ?, source_file, source_line, session_id, message_time "
                           "FROM idea_sources WHERE idea_id = ?", (keep, dup))
                db.execute("UPDATE OR IGNORE relations SET from_id = ? WHERE from_id = ?", (keep, dup))
                db.execute("UPDATE OR IGNORE relations SET to_id = ? WHERE to_id = ?", (keep, dup))
                db.execute("UPDATE ideas SET mention_count = (SELECT count(*) FROM idea_sources WHERE idea_id = ?), "
                           "pinned = max(pinned, (SELECT pinned FROM ideas WHERE id = ?)) WHERE id = ?",
                           (keep, dup, keep))
                if vector_tables_exist(db):
                    db.execute("DELETE FROM idea_embeddings WHERE idea_id = ?", (dup,))
                db.execute("DELETE FROM ideas WHERE id = ?", (dup,))
                executor.event(db, "idea", dup, "merge", {"id": dup}, {"into": keep}, "maintain", now)
                merged += 1
    return merged


def refresh_span_summaries(db: Database) -> int:
    """Closed spans without a summary get an extractive one: their most confident ideas."""
    rows = db.execute("SELECT id FROM spans WHERE depth > 0 AND closed = 1 AND summary = ''").fetchall()
    with db.write():
        for (span_id,) in rows:
            best = db.execute("SELECT content FROM ideas WHERE span_id = ? ORDER BY confidence DESC, id LIMIT 2",
                              (span_id,)).fetchall()
            if best:
                db.execute("UPDATE spans SET summary = ?, needs_embedding = 1 WHERE id = ?",
                           (" ".join(b[0] for b in best)[:600], span_id))
    return len(rows)


def cleanup_period_days(claude_dir: Path) -> int:
    try:
        value = json.loads((claude_dir / "settings.json").read_text()).get("cleanupPeriodDays", 30)
        return max(1, int(value))
    except (OSError, ValueError, TypeError, AttributeError):
        return 30


def archive_expiring(db: Database, *, now: float | None = None, margin_days: float = 3.0) -> list[str]:
    """Copy (gzip) indexed transcripts that Claude Code's cleanupPeriodDays sweep will soon delete."""
    now = now or time.time()
    limit = now - (cleanup_period_days(config.claude_config_dir()) - margin_days) * 86400
    archive = config.paths().archive
    done = []
    for (source,) in db.execute("SELECT source_file FROM index_state"):
        src = Path(source)
        try:
            if src.stat().st_mtime > limit:
                continue
        except OSError:
            continue
        target = archive / (src.relative_to(src.anchor).as_posix() + ".gz")
        if target.exists() and target.stat().st_mtime >= src.stat().st_mtime:
            continue
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with src.open("rb") as fin, gzip.open(target, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.chmod(target, 0o600)
        done.append(str(target))
    return done


def maintain(db: Database, settings: config.Settings) -> dict:
    """The weekly pass (also `total-recall maintain`)."""
    from total_recall.indexer import Indexer

    report: dict = {"duplicates_merged": merge_duplicates(db), "span_summaries": refresh_span_summaries(db)}
    indexer = Indexer(db, settings)
    if db.get_meta("embed_model_mismatch"):
        from total_recall.backfill import reembed

        report["reembed"] = reembed(db, settings)
    report["embedded"] = indexer.embed_pending()
    report["integrity"] = db.scalar("PRAGMA integrity_check")
    with db.write():
        db.execute("INSERT INTO ideas_fts (ideas_fts) VALUES ('optimize')")
        db.execute("INSERT INTO spans_fts (spans_fts) VALUES ('optimize')")
    report["archived"] = archive_expiring(db)
    with db.write():
        db.set_meta("last_maintain", time.time())
    report["at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return report


ACTIVATION_HALF_LIFE = 3600.0  # seconds: working memory fades within hours
ACTIVATION_FLOOR = 0.01


def decay_activation(db: Database, elapsed: float) -> None:
    """Working memory: what a batch touched is 'active'; activation halves every hour, tiny values prune to 0."""
    factor = 0.5 ** (max(0.0, elapsed) / ACTIVATION_HALF_LIFE)
    with db.write():
        for table in ("ideas", "spans"):
            db.execute(f"UPDATE {table} SET activation = CASE WHEN activation * ? < ? THEN 0 ELSE activation * ? END "
                       f"WHERE activation > 0", (factor, ACTIVATION_FLOOR, factor))


def embed_now(db: Database, settings: config.Settings, idea_id: int) -> bool:
    """Give an edited memory its new vector at once, so vector search finds it before any heartbeat.

    Trigger: `edit` changed the text (the old vector is gone). Why: until the daemon's repair pass
    the memory is found by keywords only. Outcome: True when the vector is stored; on any embedding
    failure it keeps needs_embedding = 1 and the repair pass retries.
    """
    from total_recall.errors import EmbeddingError, TransientError
    from total_recall.indexer import Indexer

    indexer = Indexer(db, settings)
    row = db.one("SELECT content, project FROM ideas WHERE id = ?", (idea_id,))
    try:
        if row is None or not indexer.vectors_ok():
            return False
        from total_recall.embed import to_blob

        vector = indexer.embedder.embed([row[0]])[0]
    except (EmbeddingError, TransientError, TotalRecallError) as exc:
        log.warning("edit_embedding_failed", idea=idea_id, error=str(exc))
        return False
    with db.write():
        executor.store_vectors(db, "idea_embeddings", "idea_id", [(idea_id, row[1], to_blob(vector))])
    return True
