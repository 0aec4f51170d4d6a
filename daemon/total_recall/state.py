"""How far each transcript is indexed (index_state) and what extraction cost (llm_calls).

The one owner of the SQL on these two tables' reads; the indexer writes them in its batch
transaction through `save` and `record_call`. Rows come back as sqlite3.Row (by column name).
"""

from __future__ import annotations

from typing import Any

from total_recall.db import Database


def of(db: Database, source_file: str) -> Any:
    """The index_state row of a transcript (byte_offset, line_number, head_hash, session_id,
    project, scan_offset), or None before its first batch."""
    return db.one(
        "SELECT byte_offset, line_number, head_hash, session_id, project, scan_offset FROM index_state "
        "WHERE source_file = ?",
        (source_file,),
    )


def byte_offset(db: Database, source_file: str) -> int | None:
    return db.scalar("SELECT byte_offset FROM index_state WHERE source_file = ?", (source_file,))


def project_of(db: Database, source_file: str) -> str | None:
    return db.scalar("SELECT project FROM index_state WHERE source_file = ?", (source_file,))


def transcripts(db: Database) -> list:
    """Every indexed transcript: source_file, session_id, project."""
    return db.all("SELECT source_file, session_id, project FROM index_state")


def latest_of_session(db: Database, session: str) -> Any:
    """The session's most recently indexed transcript (source_file, project), or None."""
    return db.one(
        "SELECT source_file, project FROM index_state WHERE session_id = ? ORDER BY updated_at DESC LIMIT 1",
        (session,),
    )


def last_line(db: Database, source_file: str) -> int:
    """The last indexed line of a transcript (at least 1)."""
    return int(
        db.scalar("SELECT max(line_number, 1) FROM index_state WHERE source_file = ?", (source_file,), 1)
    )


def count(db: Database) -> int:
    return db.scalar("SELECT count(*) FROM index_state", default=0)


def llm_usage_since(db: Database, since: float) -> Any:
    """calls, prompt_tokens, completion_tokens of the LLM extractor since `since`."""
    return db.one(
        "SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
        "coalesce(sum(completion_tokens), 0) AS completion_tokens "
        "FROM llm_calls WHERE extractor = 'llm' AND at >= ?",
        (since,),
    )


def fallbacks_since(db: Database, since: float) -> int:
    return db.scalar("SELECT count(*) FROM llm_calls WHERE extractor = 'fallback' AND at >= ?", (since,), 0)


def read_all_again(db: Database) -> None:
    """Every transcript is read again from byte 0 (after a recover: already-indexed lines are
    recognised by their `messages` rows and skipped)."""
    db.execute("UPDATE index_state SET byte_offset = 0, line_number = 0, head_hash = NULL")
