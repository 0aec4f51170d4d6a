"""Reads and small writes of what is remembered: ideas, spans, entities, relations, sources,
messages and proposals.

The storage owner of these tables for every module above storage (browse, digest, note,
curate, maintain, report, the web view); applying extractor output is `store.py`'s, vectors are
`vectors.py`'s, forgetting is `erasure.py`'s. Rows come back as sqlite3.Row (by column name).
"""

from __future__ import annotations

from typing import Any

from total_recall.db import Database


def marks(values) -> str:
    """'?,?,?' for an IN (...) list of these values."""
    return ",".join("?" * len(values))


# --- counts (stats) -----------------------------------------------------------------------------


def ideas_by_intent(db: Database) -> dict[str, int]:
    return {r["intent"]: r["n"] for r in db.all("SELECT intent, count(*) AS n FROM ideas GROUP BY intent")}


def counts(db: Database) -> dict[str, int]:
    """How many spans, entities, relations, sessions, projects and messages are stored."""
    return {
        "spans": db.scalar("SELECT count(*) FROM spans", default=0),
        "entities": db.scalar("SELECT count(*) FROM entities", default=0),
        "relations": db.scalar("SELECT count(*) FROM relations", default=0),
        "sessions": db.scalar("SELECT count(DISTINCT session_id) FROM spans", default=0),
        "projects": db.scalar("SELECT count(DISTINCT project) FROM ideas", default=0),
        "messages": db.scalar("SELECT count(*) FROM messages", default=0),
    }


def skipped_messages(db: Database) -> dict[str, int]:
    rows = db.all(
        "SELECT skip_reason, count(*) AS n FROM messages WHERE skip_reason IS NOT NULL GROUP BY skip_reason"
    )
    return {r["skip_reason"]: r["n"] for r in rows}


def without_vectors(db: Database) -> dict[str, int]:
    return {
        "ideas": db.scalar("SELECT count(*) FROM ideas WHERE needs_embedding = 1", default=0),
        "spans": db.scalar("SELECT count(*) FROM spans WHERE needs_embedding = 1", default=0),
    }


# --- spans ----------------------------------------------------------------------------------------


def recent_sessions(db: Database, session: str | None, limit: int) -> list[str]:
    """Sessions with spans, newest first (only `session` when given)."""
    where, params = ("WHERE s.session_id = ?", (session,)) if session else ("", ())
    return db.column(
        f"SELECT DISTINCT s.session_id FROM spans s {where} ORDER BY s.created_at DESC LIMIT ?",
        (*params, limit),
    )


def session_spans(db: Database, session: str) -> list:
    """A session's spans, parents first, each with its idea count (`ideas`)."""
    return db.all(
        "SELECT s.id, s.parent_id, s.depth, s.name, s.summary, s.start_line, s.end_line, s.source_file, "
        "s.project, s.started_at, (SELECT count(*) FROM ideas i WHERE i.span_id = s.id) AS ideas "
        "FROM spans s WHERE s.session_id = ? ORDER BY s.depth, s.start_line, s.id",
        (session,),
    )


def span(db: Database, span_id: int) -> Any:
    return db.one("SELECT * FROM spans WHERE id = ?", (span_id,))
