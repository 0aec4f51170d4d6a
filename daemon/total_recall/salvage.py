"""The SQL of salvaging a damaged memory.db (`total-recall recover` is the command around it).

The `.recover` approach in pure Python (no sqlite3 command-line tool needed): every table is
copied row by row from the damaged file into a freshly migrated database. A row range that sits
on a corrupt page is stepped over (the rows after it are still read); full-text indexes are
rebuilt by the schema's triggers and vectors by the daemon's repair pass (every memory is marked
`needs_embedding`). The damaged file is opened with the standard library's sqlite3 on purpose:
it is read outside `db.connect`, which would migrate or refuse it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from total_recall import state
from total_recall.db import Database, mark_all_for_embedding

VECTOR_META = ("embed_model", "embed_dim", "embed_version", "embed_model_mismatch")
MAX_ROWID = 2**63 - 1
CORRUPT_HINT = (
    "the memory database is damaged; stop the daemon and run `total-recall recover` "
    "(it keeps the damaged file and rebuilds from your transcripts)"
)


def check(path: Path) -> dict:
    """{"ok": bool, "error": str | None}: can SQLite open the file and does quick_check pass?"""
    if not path.exists():
        return {"ok": True, "error": None}
    try:
        conn = sqlite3.connect(path, timeout=5)
        try:
            rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return {"ok": False, "error": str(exc)}
    problems = [r[0] for r in rows if r[0] != "ok"]
    return {"ok": not problems, "error": "; ".join(problems)[:500] or None}


def _tables(conn: sqlite3.Connection) -> list[str]:
    """Ordinary tables in creation order, without virtual tables and their shadow tables."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    virtual = [name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL")]
    return [
        name
        for name, sql in rows
        if name not in virtual and not any(name.startswith(v + "_") for v in virtual)
    ]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()]


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f'SELECT rowid FROM "{table}" LIMIT 0')
        return True
    except sqlite3.DatabaseError:
        return False


def _readable_from(conn: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest `lo` > `after` from which a rowid scan works again; None past the end."""

    def works(lo: int) -> bool:
        try:
            conn.execute(
                f'SELECT rowid FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT 1', (lo,)
            ).fetchall()
            return True
        except sqlite3.DatabaseError:
            return False

    step = 1
    while after + step < MAX_ROWID and not works(after + step):
        step *= 2
    if after + step >= MAX_ROWID:
        return None
    low, high = after + step // 2, after + step  # works(high); find the first that works
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if works(mid) else (mid, high)
    return high


def _rows(conn: sqlite3.Connection, table: str, columns: list[str], stats: dict) -> Iterator[tuple]:
    cols = ", ".join(f'"{c}"' for c in columns)
    if not _has_rowid(conn, table):  # WITHOUT ROWID: read what a scan gives until it fails
        try:
            yield from conn.execute(f'SELECT {cols} FROM "{table}"')
        except sqlite3.DatabaseError as exc:
            stats["errors"].append(f"{table}: {exc}")
        return
    lo = -MAX_ROWID - 1
    while True:
        try:
            sql = f'SELECT rowid, {cols} FROM "{table}" WHERE rowid > ? ORDER BY rowid'
            for row in conn.execute(sql, (lo,)):
                lo = row[0]
                yield row[1:]
            return
        except sqlite3.DatabaseError as exc:
            # Trigger: a corrupt page under this rowid range. Why: the rows after it may be
            # intact. Outcome: step over the smallest range that cannot be read; counted.
            stats["errors"].append(f"{table} after rowid {lo}: {exc}")
            nxt = _readable_from(conn, table, lo)
            if nxt is None:
                return
            lo = nxt


def copy_into(source: Path, target_db: Database) -> dict:
    """Copy every readable row of `source` into the freshly migrated `target_db`."""
    stats: dict[str, Any] = {"tables": {}, "errors": []}
    try:
        old = sqlite3.connect(source)
        tables = _tables(old)
    except sqlite3.DatabaseError as exc:
        stats["errors"].append(f"schema unreadable: {exc}")
        return stats
    new_tables = set(_tables(target_db.conn))
    with target_db.write():
        # The fresh database says its pointers are current (0014); the rows copied into it say what
        # the old one said, so its key (or its absence: read its transcripts again) is what holds.
        state.drop_meta(target_db, "pointer_version")
    target_db.execute("PRAGMA foreign_keys = OFF")
    try:
        for table in tables:
            if table not in new_tables:
                continue
            try:
                old_columns, new_columns = _columns(old, table), set(_columns(target_db.conn, table))
            except sqlite3.DatabaseError as exc:
                stats["errors"].append(f"{table}: {exc}")
                continue
            # A database from before 0009 names the transcript by its path: stored as its file_id.
            by_path = "source_file" in old_columns and "file_id" in new_columns - set(old_columns)
            columns = [c for c in old_columns if c in new_columns or (by_path and c == "source_file")]
            into = ["file_id" if by_path and c == "source_file" else c for c in columns]
            marks = ", ".join("?" * len(columns))
            sql = (
                f'INSERT OR IGNORE INTO "{table}" ({", ".join(chr(34) + c + chr(34) for c in into)}) '
                f"VALUES ({marks})"
            )
            copied = 0
            with target_db.write():
                for row in _rows(old, table, columns, stats):
                    if table == "meta" and row[columns.index("key")] in VECTOR_META:
                        continue  # vectors are not copied; the repair pass rebuilds them
                    try:
                        if by_path:
                            at = columns.index("source_file")
                            fid = None if row[at] is None else state.file_id(target_db, row[at])
                            row = (*row[:at], fid, *row[at + 1 :])
                        copied += target_db.execute(sql, row).rowcount
                    except target_db.dbapi.Error as exc:  # a damaged value the schema refuses
                        stats["errors"].append(f"{table}: row refused ({exc})")
            stats["tables"][table] = copied
        with target_db.write():  # vectors are not copied: the repair pass embeds every memory again
            mark_all_for_embedding(target_db)
        stats["dangling"] = _drop_dangling(target_db, new_tables)
        with target_db.write():
            # A line recorded as extracted whose memories were all lost is read again: without its
            # `messages` row the indexer extracts it anew (tombstones still apply). A response written
            # over several lines keeps its row at its first line and its memories on the lines that
            # hold their words (its windows say which): a memory on any of them is not lost.
            def on_its_lines(alias: str) -> str:
                return (
                    f"{alias}.file_id = messages.file_id AND ({alias}.source_line = messages.source_line "
                    f"OR {alias}.source_line IN (SELECT c.source_line FROM chunks c WHERE c.file_id = "
                    "messages.file_id AND c.message_line = messages.source_line))"
                )

            stats["lines_to_extract_again"] = target_db.execute(
                "DELETE FROM messages WHERE skip_reason IS NULL "
                f"AND NOT EXISTS (SELECT 1 FROM ideas i WHERE {on_its_lines('i')}) "
                f"AND NOT EXISTS (SELECT 1 FROM idea_sources s WHERE {on_its_lines('s')})"
            ).rowcount
    finally:
        target_db.execute("PRAGMA foreign_keys = ON")
        old.close()
    return stats


def _drop_dangling(db: Database, tables: set[str]) -> dict[str, int]:
    """References to rows that were lost: set to NULL where the schema says so, else delete the row."""
    changed: dict[str, int] = {}
    with db.write():
        for table in sorted(tables):
            for fk in db.execute(f'PRAGMA foreign_key_list("{table}")').fetchall():
                parent, child_col, on_delete = fk["table"], fk["from"], fk["on_delete"]
                parent_col = fk["to"] or "rowid"
                lost = (
                    f'"{child_col}" IS NOT NULL AND "{child_col}" NOT IN '
                    f'(SELECT "{parent_col}" FROM "{parent}")'
                )
                if on_delete.upper() == "SET NULL":
                    n = db.execute(f'UPDATE "{table}" SET "{child_col}" = NULL WHERE {lost}').rowcount
                else:
                    n = db.execute(f'DELETE FROM "{table}" WHERE {lost}').rowcount
                if n:
                    changed[table] = changed.get(table, 0) + n
    return changed


def known_sources(db: Database) -> set[str]:
    """Every transcript path the database knows of: indexed, read, queued or cited by an idea."""
    found: set[str] = set()
    for sql in (
        "SELECT source_file FROM index_state",
        "SELECT path FROM files",  # every path a message, chunk or idea names
        "SELECT DISTINCT transcript_path FROM work_queue",
    ):
        found |= {path for path in db.column(sql) if path}
    return found
