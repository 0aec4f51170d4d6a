"""The durable work queue: what the hooks recorded, claimed by the daemon under a lease.

A queue row says "transcript T has grown to at least N bytes". Rows for the same transcript
are claimed together; the work itself (read from the stored offset to the end) is idempotent,
so a row processed twice costs time, never a duplicate memory.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from total_recall.db import Database

log = structlog.get_logger(__name__)

IMMEDIATE_EVENTS = ("backfill", "SessionEnd", "PreCompact")
BACKOFF_START, BACKOFF_CAP = 1.0, 10.0
# seconds; a time stamped further ahead than this (a hook's enqueued_at, a retry's not_before,
# which are at most BACKOFF_CAP ahead) was stamped before the clock stepped back
CLOCK_STEP = 60.0
SPOOL_LOCK_WAIT = 5.0  # seconds; a hook holds the lock for one append (its own wait is 1 s)
SPOOL_KEYS = ("transcript_path", "session_id", "cwd", "event", "size_seen", "enqueued_at")


@dataclass
class Claim:
    transcript_path: str
    row_ids: list[int]
    session_id: str | None
    cwd: str | None
    attempts: int


def enqueue(
    db: Database,
    transcript_path: str,
    *,
    session_id: str | None = None,
    cwd: str | None = None,
    event: str = "backfill",
    size_seen: int | None = None,
    now: float | None = None,
) -> int:
    with db.write():
        cur = db.execute(
            "INSERT INTO work_queue (transcript_path, session_id, cwd, event, size_seen, enqueued_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (transcript_path, session_id, cwd, event, size_seen, now or time.time()),
        )
    return int(cur.lastrowid)


def _text(value: object) -> str | None:
    """A string SQLite can store as TEXT, else None (lone surrogates cannot be UTF-8 encoded)."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _spool_record(line: bytes) -> tuple | None:
    """The queue row of one spool line, or None when the line cannot be stored.

    Trigger: a line that is not a record, or whose values SQLite would refuse (a path with lone
    surrogates, an integer past 64 bits, NaN). Why: one refused row would fail the whole insert
    on every step, and the daemon would never index anything again. Outcome: counted as bad.
    """
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    path = _text(rec.get("transcript_path")) if isinstance(rec, dict) else None
    if not path:
        return None
    size = rec.get("size_seen")
    when = rec.get("enqueued_at")
    return (
        path,
        _text(rec.get("session_id")),
        _text(rec.get("cwd")),
        _text(rec.get("event")) or "spool",
        size if isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 2**63 else None,
        float(when) if isinstance(when, (int, float)) and math.isfinite(when) else time.time(),
    )


def _lock_within(fd: int, seconds: float) -> bool:
    """flock(LOCK_EX) with a bound: False when it was not granted within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def drain_spool(db: Database, spool: Path) -> int:
    """Move records the hook could not write to the database into the queue.

    Holds the same flock the hook takes to append, so no line is lost or read half-written.
    The spool is truncated only after the rows are committed; a crash in between re-inserts
    them next time, which is harmless (queue rows are idempotent work).
    """
    try:
        fd = os.open(spool, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        if not _lock_within(fd, SPOOL_LOCK_WAIT):
            # Trigger: someone holds the spool lock for longer than a hook ever does (a hook
            # holds it for one append). Why: the daemon must not hang on it. Outcome: logged;
            # the spool is drained at a later step, nothing in it is lost.
            log.warning("spool_lock_timeout", seconds=SPOOL_LOCK_WAIT, spool=str(spool))
            return 0
        data = b""
        while chunk := os.read(fd, 1 << 20):
            data += chunk
        records = [r for r in map(_spool_record, data.splitlines()) if r]
        bad = len([line for line in data.splitlines() if line.strip()]) - len(records)
        if records:
            with db.write():
                db.executemany(
                    "INSERT INTO work_queue (transcript_path, session_id, cwd, event, size_seen, "
                    "enqueued_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    records,
                )
        os.ftruncate(fd, 0)
        if bad:
            log.warning("spool_bad_lines", count=bad)
        return len(records)
    finally:
        os.close(fd)


def claim_next(
    db: Database, *, now: float, window: float, lease: float, immediate: bool = False
) -> Claim | None:
    """Claim every pending row of the transcript that has waited longest and is ready.

    Ready: its oldest pending row is `window` seconds old (so a session's messages arriving
    within the window form one batch), or it was enqueued by an event that should not wait,
    or `immediate` (daemon --once). Expired leases (a crashed daemon) count as pending.

    Trigger: a row's enqueued_at or not_before lies more than CLOCK_STEP ahead of now. Why: it
    was stamped before the clock stepped back (NTP, a resumed VM); waiting for it would hold the
    work for the size of the step. Outcome: it is ready now.
    """
    with db.write():
        db.execute(
            "UPDATE work_queue SET state = 'pending', lease_expires = NULL "
            "WHERE state = 'claimed' AND lease_expires < ?",
            (now,),
        )
        placeholders = ",".join("?" * len(IMMEDIATE_EVENTS))
        row = db.one(
            "SELECT transcript_path FROM work_queue WHERE state = 'pending' "
            "AND (not_before IS NULL OR not_before <= ? OR not_before > ?) "
            f"AND (? OR event IN ({placeholders}) OR enqueued_at <= ? OR enqueued_at > ?) "
            "ORDER BY enqueued_at LIMIT 1",
            (now, now + CLOCK_STEP, int(immediate), *IMMEDIATE_EVENTS, now - window, now + CLOCK_STEP),
        )
        if row is None:
            return None
        path = row["transcript_path"]
        rows = db.execute(
            "SELECT id, session_id, cwd, attempts FROM work_queue WHERE transcript_path = ? "
            "AND state = 'pending' AND (not_before IS NULL OR not_before <= ? OR not_before > ?) "
            "ORDER BY id",
            (path, now, now + CLOCK_STEP),
        ).fetchall()
        ids = [r["id"] for r in rows]
        db.execute(
            "UPDATE work_queue SET state = 'claimed', lease_expires = ? WHERE id IN "
            f"({','.join('?' * len(ids))})",
            (now + lease, *ids),
        )
    session = next((r["session_id"] for r in reversed(rows) if r["session_id"]), None)
    cwd = next((r["cwd"] for r in reversed(rows) if r["cwd"]), None)
    return Claim(path, ids, session, cwd, max(r["attempts"] for r in rows))


def _in(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def complete(db: Database, claim: Claim, note: str | None = None) -> None:
    with db.write():
        db.execute(
            "UPDATE work_queue SET state = 'done', lease_expires = NULL, last_error = ? WHERE id IN "
            f"({_in(claim.row_ids)})",
            (note, *claim.row_ids),
        )


def release(db: Database, claim: Claim) -> None:
    """Give claimed rows back untouched (shutdown between batches): no attempt is counted."""
    with db.write():
        db.execute(
            "UPDATE work_queue SET state = 'pending', lease_expires = NULL WHERE id IN "
            f"({_in(claim.row_ids)})",
            claim.row_ids,
        )


def defer(db: Database, claim: Claim, *, now: float) -> None:
    """Put claimed rows back at the end of the queue (daemon.file_timeout): no attempt counted."""
    with db.write():
        db.execute(
            f"UPDATE work_queue SET state = 'pending', lease_expires = NULL, enqueued_at = ? "
            f"WHERE id IN ({_in(claim.row_ids)})",
            (now, *claim.row_ids),
        )


def release_all_claims(db: Database) -> int:
    """Put every claimed row back to pending at once; return how many.

    Trigger: a daemon (or `backfill --wait`) has just taken the single-instance lock. Why: the
    lock proves no other worker of this home is alive, so every claim is a dead worker's and its
    lease (10 min by default) would only make the new worker wait. Outcome: no attempt counted.
    """
    with db.write():
        cur = db.execute(
            "UPDATE work_queue SET state = 'pending', lease_expires = NULL WHERE state = 'claimed'"
        )
    if cur.rowcount:
        log.info("stale_claims_released", rows=cur.rowcount)
    return cur.rowcount


def backoff(attempts: int) -> float:
    return min(BACKOFF_CAP, BACKOFF_START * (2 ** max(0, attempts - 1)))


def fail(db: Database, claim: Claim, error: str, *, transient: bool, max_attempts: int, now: float) -> str:
    """Put the rows back with backoff; park them after max_attempts non-transient failures.

    Trigger: processing raised. Why: transient faults (locked db, endpoint down, disk full) heal
    by themselves, others need a person. Outcome: 'retry' (pending, not before now+backoff) or
    'parked' (visible in status/stats until `total-recall retry`).
    """
    attempts = claim.attempts + 1
    parked = not transient and attempts >= max_attempts
    state = "parked" if parked else "pending"
    with db.write():
        db.execute(
            "UPDATE work_queue SET state = ?, attempts = ?, last_error = ?, lease_expires = NULL, "
            "not_before = ? "
            f"WHERE id IN ({_in(claim.row_ids)})",
            (
                state,
                attempts,
                error[:2000].encode("utf-8", "replace").decode("utf-8"),
                now + backoff(attempts),
                *claim.row_ids,
            ),
        )
    return state


def retry_parked(db: Database) -> int:
    with db.write():
        cur = db.execute(
            "UPDATE work_queue SET state = 'pending', attempts = 0, not_before = NULL WHERE state = 'parked'"
        )
    return cur.rowcount


def prune_done(db: Database, *, now: float, keep_seconds: float = 86400.0) -> int:
    with db.write():
        cur = db.execute(
            "DELETE FROM work_queue WHERE state = 'done' AND enqueued_at < ?", (now - keep_seconds,)
        )
    return cur.rowcount


def depth(db: Database) -> dict[str, int]:
    rows = db.all("SELECT state, count(*) AS n FROM work_queue GROUP BY state")
    out = {"pending": 0, "claimed": 0, "done": 0, "parked": 0}
    out.update({r["state"]: r["n"] for r in rows})
    return out


def parked(db: Database) -> list:
    """Parked rows, oldest first: transcript_path, attempts, last_error."""
    return db.all(
        "SELECT transcript_path, attempts, last_error FROM work_queue WHERE state = 'parked' ORDER BY id"
    )


def unfinished(db: Database, files: list[str] | None = None) -> int:
    """How many transcripts (of `files`, or all) still have a pending or claimed row."""
    if files is None:
        return db.scalar(
            "SELECT count(DISTINCT transcript_path) FROM work_queue WHERE state IN ('pending', 'claimed')",
            default=0,
        )
    return int(
        db.scalar(
            "SELECT count(DISTINCT transcript_path) FROM work_queue WHERE state IN ('pending', 'claimed') "
            f"AND transcript_path IN ({','.join('?' * len(files))})",
            files,
            0,
        )
    )


def waiting(db: Database, files: list[str]) -> set[str]:
    """Those of these transcripts with a row not done (pending, claimed or parked)."""
    if not files:
        return set()
    return set(
        db.column(
            "SELECT DISTINCT transcript_path FROM work_queue WHERE state != 'done' "
            f"AND transcript_path IN ({','.join('?' * len(files))})",
            files,
        )
    )


def rows_of(db: Database, files: list[str]) -> list:
    """Every row of these transcripts in queue order: transcript_path, state, last_error, attempts."""
    return db.all(
        "SELECT transcript_path, state, last_error, attempts FROM work_queue "
        f"WHERE transcript_path IN ({','.join('?' * len(files))}) ORDER BY id",
        files,
    )


def transcripts(db: Database) -> list[str]:
    return db.column("SELECT DISTINCT transcript_path FROM work_queue")


def restart_all(db: Database) -> None:
    """Every unfinished row pending again with a clean slate (after a recover)."""
    db.execute(
        "UPDATE work_queue SET state = 'pending', attempts = 0, not_before = NULL, "
        "lease_expires = NULL WHERE state != 'done'"
    )


def next_ready_in(db: Database, *, now: float, window: float) -> float | None:
    """Seconds until some pending row becomes ready (None when the queue is empty)."""
    placeholders = ",".join("?" * len(IMMEDIATE_EVENTS))
    ready = db.scalar(
        f"SELECT min(max(coalesce(not_before, 0), CASE WHEN event IN ({placeholders}) "
        "THEN 0 ELSE enqueued_at + ? END)) FROM work_queue WHERE state = 'pending'",
        (*IMMEDIATE_EVENTS, window),
    )
    if ready is None:
        return None
    return 0.0 if ready - now > CLOCK_STEP else max(0.0, ready - now)  # see claim_next
