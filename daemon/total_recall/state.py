"""How far each transcript is indexed (index_state) and what the LLM cost (llm_calls).

The one owner of the SQL on these two tables, on `fallback_batches` (batches the offline
extractor answered during an LLM outage) and on `files` (each transcript path once, 0009); the
indexer writes them in its batch transaction through `save`, `record_calls` and
`add_fallback_batches`. Rows come back as sqlite3.Row (by column name).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from total_recall.db import Database

# What the LLM is called for, as llm_calls.extractor names it: extraction ("llm"; "offline" and
# "fallback" rows are the offline extractor's, no tokens) and, while a user waits on a search, HyDE
# and re-ranking. Every one of these spends the daily token budget.
SPENDING = ("llm", "hyde", "rerank")
SEARCH_CALLS = ("hyde", "rerank")
_IN_SPENDING = f"extractor IN ({', '.join(repr(e) for e in SPENDING)})"
_IN_SEARCH = f"extractor IN ({', '.join(repr(e) for e in SEARCH_CALLS)})"

# Messages, chunks, ideas and idea sources name their transcript by the id of its `files` row, not
# by its path (~100 bytes, stored about ten times per message with the unique indexes). FILE_ID is
# the id of the path a `?` names, for WHERE clauses (`file_id = {FILE_ID}`); readers join `files`
# and select `path AS source_file`, so rows keep their shape above the storage code.
FILE_ID = "(SELECT id FROM files WHERE path = ?)"
FILE_TABLES = ("messages", "chunks", "ideas", "idea_sources")


def path_of(table: str) -> str:
    """The select-list item that gives a row of `table` (its name or alias) its path, as source_file."""
    return f"(SELECT path FROM files WHERE id = {table}.file_id) AS source_file"


def select_list(table: str, columns) -> str:
    """These columns of `table` as a select list; a table of FILE_TABLES gives `source_file` by
    path_of (spans keep the path itself)."""
    return ", ".join(path_of(table) if c == "source_file" and table in FILE_TABLES else c for c in columns)


def file_id(db: Database, path: str) -> int:
    """The id of a transcript path's `files` row, added when new (in the caller's transaction:
    never cached, so a rolled-back batch cannot leave an id that points nowhere)."""
    # On PostgreSQL another machine's forget may delete a path no row names (drop_unused_files)
    # between this read and the rows that will name it: the row is locked against deletion until
    # this transaction ends. SQLite's writers are serialised by BEGIN IMMEDIATE already.
    sql = "SELECT id FROM files WHERE path = ?" + (" FOR KEY SHARE" if db.dialect == "postgres" else "")
    found = db.scalar(sql, (path,))
    if found is None:
        db.execute("INSERT OR IGNORE INTO files (path) VALUES (?)", (path,))
        found = db.scalar(sql, (path,))
    return int(found)


def file_ids(db: Database, paths) -> dict[str, int]:
    """file_id of each distinct path."""
    return {p: file_id(db, p) for p in dict.fromkeys(paths)}


def drop_unused_files(db: Database) -> int:
    """Delete the paths no message, chunk, idea or idea source names any more (after a forget)."""
    unused = " AND ".join(f"NOT EXISTS (SELECT 1 FROM {t} WHERE file_id = files.id)" for t in FILE_TABLES)
    return db.execute(f"DELETE FROM files WHERE {unused}").rowcount


def of(db: Database, source_file: str) -> Any:
    """The index_state row of a transcript (byte_offset, line_number, head_hash, tail_hash,
    session_id, project, scan_offset), or None before its first batch."""
    return db.one(
        "SELECT byte_offset, line_number, head_hash, tail_hash, session_id, project, scan_offset "
        "FROM index_state WHERE source_file = ?",
        (source_file,),
    )


def indexed_named(db: Database, name: str) -> list:
    """The indexed transcripts whose file has this name (source_file, byte_offset, head_hash,
    tail_hash)."""
    rows = db.all(
        "SELECT source_file, byte_offset, head_hash, tail_hash FROM index_state WHERE source_file LIKE ?",
        ("%" + name,),
    )
    return [r for r in rows if r["source_file"].replace("\\", "/").rsplit("/", 1)[-1] == name]


# Every column that names a transcript by its path, and the rows of it that do (a file forget's scope).
PATH_COLUMNS = (
    ("files", "path", ""),
    ("index_state", "source_file", ""),
    ("spans", "source_file", ""),
    ("tombstones", "source_file", ""),
    ("fallback_batches", "source_file", ""),
    ("ideas", "closed_source_file", ""),
    ("forgotten_scopes", "value", " AND kind = 'file'"),
)


def move(db: Database, old: str, new: str) -> bool:
    """Every row that names transcript `old` names `new` instead (Claude Code moved the file): its
    memories, sources, windows, spans, progress, forgets and closed todos follow it. False, and
    nothing changed, when `new` is known already."""
    if db.scalar("SELECT 1 FROM files WHERE path = ?", (new,)) or of(db, new) is not None:
        return False
    for table, column, scope in PATH_COLUMNS:
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?{scope}", (new, old))
    return True


def byte_offset(db: Database, source_file: str) -> int | None:
    return db.scalar("SELECT byte_offset FROM index_state WHERE source_file = ?", (source_file,))


def byte_offsets_under(db: Database, folder: str) -> dict[str, int]:
    """The indexed offset of each transcript under this folder (a session's `subagents/`), in one
    query; a `%` or `_` in the folder's name only widens it, and callers look paths up exactly."""
    rows = db.all(
        "SELECT source_file, byte_offset FROM index_state WHERE source_file LIKE ?",
        (folder.rstrip("/") + "/%",),
    )
    return {row["source_file"]: int(row["byte_offset"]) for row in rows}


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


# The transcripts after a cursor (path, byte offset): those past its path in path order, and its
# own while it is read part way (offset > 0). repoint.py walks them.
_AFTER = "source_file > ? OR (source_file = ? AND ? > 0)"


def indexed_after(db: Database, path: str, offset: int) -> Any:
    """The first indexed transcript after the cursor (source_file, byte_offset, head_hash,
    tail_hash), or None."""
    return db.one(
        f"SELECT source_file, byte_offset, head_hash, tail_hash FROM index_state WHERE {_AFTER} "
        "ORDER BY source_file LIMIT 1",
        (path, path, offset),
    )


def count_indexed_after(db: Database, path: str, offset: int) -> int:
    return int(db.scalar(f"SELECT count(*) FROM index_state WHERE {_AFTER}", (path, path, offset), default=0))


def drop_meta(db: Database, key: str) -> None:
    db.execute("DELETE FROM meta WHERE key = ?", (key,))


def llm_usage_since(db: Database, since: float) -> Any:
    """calls, prompt_tokens, completion_tokens of the LLM extractor since `since`."""
    return db.one(
        "SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
        "coalesce(sum(completion_tokens), 0) AS completion_tokens "
        "FROM llm_calls WHERE extractor = 'llm' AND at >= ?",
        (since,),
    )


def search_usage_since(db: Database, since: float) -> Any:
    """calls and tokens (prompt plus completion) of the searches' HyDE and re-ranking since `since`."""
    return db.one(
        "SELECT count(*) AS calls, coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens "
        f"FROM llm_calls WHERE {_IN_SEARCH} AND at >= ?",
        (since,),
    )


def fallbacks_since(db: Database, since: float) -> int:
    return db.scalar("SELECT count(*) FROM llm_calls WHERE extractor = 'fallback' AND at >= ?", (since,), 0)


def read_all_again(db: Database) -> None:
    """Every transcript is read again from byte 0 (after a recover: already-indexed lines are
    recognised by their `messages` rows and skipped)."""
    db.execute("UPDATE index_state SET byte_offset = 0, line_number = 0, head_hash = NULL, tail_hash = NULL")


def save(
    db: Database,
    source_file: str,
    *,
    session: str | None,
    project: str | None,
    byte_offset: int,
    line_number: int,
    head_hash: str | None,
    file_size: int | None,
    now: float,
    scan_offset: int = 0,
    tail_hash: str | None = None,
) -> None:
    """How far a transcript is indexed (in the transaction that wrote what came before it), with the
    hashes transcript.was_rewritten compares: its head's and that of the bytes before the offset."""
    db.execute(
        "INSERT INTO index_state (source_file, session_id, project, byte_offset, line_number, head_hash, "
        "file_size, updated_at, scan_offset, tail_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (source_file) DO UPDATE SET session_id = excluded.session_id, "
        "project = excluded.project, byte_offset = excluded.byte_offset, "
        "line_number = excluded.line_number, head_hash = excluded.head_hash, "
        "file_size = excluded.file_size, updated_at = excluded.updated_at, "
        "scan_offset = excluded.scan_offset, tail_hash = excluded.tail_hash",
        (
            source_file,
            session,
            project,
            byte_offset,
            line_number,
            head_hash,
            file_size,
            now,
            scan_offset,
            tail_hash,
        ),
    )


def llm_tokens_since(db: Database, since: float) -> int:
    """Prompt plus completion tokens the LLM was given and gave since `since`: extraction, HyDE and
    re-ranking (SPENDING)."""
    return db.scalar(
        f"SELECT sum(prompt_tokens + completion_tokens) FROM llm_calls WHERE {_IN_SPENDING} AND at >= ?",
        (since,),
        0,
    )


def today_start_utc(now: float) -> float:
    day = datetime.fromtimestamp(now, tz=timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return day.timestamp()


def budget_exhausted(db: Database, budget: int, now: float, *, pending: int = 0) -> bool:
    """Whether today's LLM token budget (`llm.daily_token_budget`; 0 = none) is spent: tokens
    recorded today plus `pending` ones not yet written. The same answer for the indexer (which
    then extracts offline), a search (which then asks no HyDE or re-ranking) and `stats`."""
    if budget <= 0:
        return False
    return llm_tokens_since(db, today_start_utc(now)) + pending >= budget


def record_calls(db: Database, calls: list[dict], now: float) -> None:
    """One llm_calls row per LLM call (extractor, model, messages, tokens, ok, error): the indexer's
    in its batch transaction, a search's HyDE and re-ranking after the search (search.run)."""
    db.executemany(
        "INSERT INTO llm_calls (at, extractor, model, messages, prompt_tokens, completion_tokens, ok, error) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                now,
                c.get("extractor", "llm"),
                c.get("model"),
                int(c.get("messages", 0)),
                int(c.get("prompt_tokens", 0)),
                int(c.get("completion_tokens", 0)),
                int(bool(c.get("ok"))),
                c.get("error"),
            )
            for c in calls
        ],
    )


# --- batches the offline extractor answered during an LLM outage ---------------------------------


def add_fallback_batches(
    db: Database,
    source_file: str,
    session: str | None,
    project: str | None,
    parts: list[list[int]],
    now: float,
) -> None:
    """One row per batch part (its lines) that fell back offline, for the LLM to extract again."""
    db.executemany(
        "INSERT INTO fallback_batches (source_file, session_id, project, lines, created_at) VALUES (?, ?, ?, "
        "?, ?)",
        [(source_file, session, project, json.dumps(lines), now) for lines in parts],
    )


def fallback_batches(db: Database, limit: int) -> list:
    """The oldest batches still to extract again: id, source_file, session_id, project, lines (JSON)."""
    return db.all(
        "SELECT id, source_file, session_id, project, lines FROM fallback_batches "
        "WHERE done_at IS NULL ORDER BY id LIMIT ?",
        (limit,),
    )


def fallback_done(db: Database, batch_id: int, now: float, *, attempted: bool = True) -> None:
    """The batch is extracted again (`attempted`: by a call, which counts as an attempt)."""
    if attempted:
        db.execute(
            "UPDATE fallback_batches SET done_at = ?, attempts = attempts + 1 WHERE id = ?", (now, batch_id)
        )
    else:
        db.execute("UPDATE fallback_batches SET done_at = ? WHERE id = ?", (now, batch_id))


def fallback_failed(db: Database, batch_id: int) -> None:
    db.execute("UPDATE fallback_batches SET attempts = attempts + 1 WHERE id = ?", (batch_id,))
