"""Pointers an older indexer left on a reply's thinking line, moved to the line that holds its words.

Claude Code writes a reply with extended thinking as a thinking line and then its text's line (one
`message.id`). Until 2026-11-27 a reply whose only piece followed its thinking line kept its
memories, their sources, its windows and a todo it closed on the thinking line (DESIGN.md I43), so
`file:line` opened the wrong line. The transcripts still say where each piece is: every transcript
this machine indexed is read again, once, a slice per daemon heartbeat, and the rows on such a
reply's first line move to its text's line, where indexing it now puts them (I150). The same read
gives the lines stored before migration 0015 their record uuid, so a session forked from one of them
later is recognised as a copy (I152).

State (meta): `pointer_version` is POINTER_VERSION in a store created empty by this code (the
migrations set it), so nothing there is read again; otherwise `repointed:<machine>` marks the
machine's pass done and `repoint_at:<machine>` holds where the pass stands (path, byte offset,
line), so a restart resumes it. Moving only rows that sit on such a first line makes a pass
idempotent: rows the current indexer wrote are never there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import structlog

from total_recall import config, state, store, transcript, trust
from total_recall.db import Database
from total_recall.errors import TranscriptError, TranscriptRefused

log = structlog.get_logger(__name__)

POINTER_VERSION = 2  # 1: a reply's only piece at its first line; 2: at the line holding it
SLICE_BYTES = 16 * 1024 * 1024  # transcript bytes read again per heartbeat (well under a second)
READ_BYTES = 4 * 1024 * 1024
CAUSE = "repoint"  # the memory_events cause of a move
MAX_FILES = 200  # transcripts per slice (another machine's, on a shared store, are passed over)


def pending(db: Database, machine: str) -> bool:
    """Whether this machine's transcripts may still hold rows on a thinking line."""
    if db.get_meta("pointer_version") == str(POINTER_VERSION):
        return False
    return db.get_meta(f"repointed:{machine}") is None


def left(db: Database, machine: str) -> int | None:
    """How many indexed transcripts the pass has still to read (None: none); `doctor` shows it."""
    if not pending(db, machine):
        return None
    at = _cursor(db, machine)
    return state.count_indexed_after(db, at["path"], at["offset"])


def run_slice(db: Database, settings: config.Settings, budget: int = SLICE_BYTES) -> dict:
    """Read up to `budget` bytes of the transcripts the pass has not read yet, moving what it finds.

    Trigger: `pending` (a store indexed before the fix). Why: a reply's memories must open on the
    line that says them, however long ago it was indexed. Outcome: each transcript's moves are
    committed with the cursor in one transaction; a transcript that is gone, refused or rewritten
    since it was indexed is passed over (a rewritten one is indexed again from its start anyway);
    when none is left the machine's pass is marked done.
    """
    machine = settings.machine_name()
    report = {"transcripts": 0, "moved": 0, "done": False}
    if not pending(db, machine):
        return report
    at = _cursor(db, machine)
    spent = files = 0
    while spent < budget and files < MAX_FILES:
        files += 1
        row = state.indexed_after(db, at["path"], at["offset"])
        if row is None:
            with db.write():
                db.set_meta(f"repointed:{machine}", str(int(time.time())))
                state.drop_meta(db, f"repoint_at:{machine}")
            report["done"] = True
            break
        path = row["source_file"]
        start = (at["offset"], at["line"]) if path == at["path"] else (0, 0)
        moves, uuids, end, read = _moves(path, row, start, budget - spent, settings)
        spent += max(read, 1)
        finished = end is None
        at = {"path": path, "offset": 0 if finished else end[0], "line": 0 if finished else end[1]}
        report["transcripts"] += finished
        if moves or uuids:  # with the cursor past them; a transcript with neither waits for the slice's end
            with db.write():
                moved = store.move_to_text_lines(db, path, moves, CAUSE, time.time()) if moves else 0
                store.fill_uuids(db, path, uuids)
                db.set_meta(f"repoint_at:{machine}", json.dumps(at))
            report["moved"] += moved
            if moved:
                log.info("pointers_moved", file=path, rows=moved)
    if not report["done"]:
        with db.write():
            db.set_meta(f"repoint_at:{machine}", json.dumps(at))
    return report


def finish(db: Database, settings: config.Settings) -> None:
    """The whole pass at once (recover and migrate-store, before they copy rows): each slice moves
    the cursor on or marks the pass done, so this ends."""
    while pending(db, settings.machine_name()):
        run_slice(db, settings)


def _cursor(db: Database, machine: str) -> dict:
    """Where the pass stands: the transcript it is in (or the last one done, offset 0)."""
    raw = db.get_meta(f"repoint_at:{machine}")
    try:
        at = json.loads(raw) if raw else {}
        return {"path": str(at["path"]), "offset": int(at["offset"]), "line": int(at["line"])}
    except (ValueError, KeyError, TypeError):
        return {"path": "", "offset": 0, "line": 0}


def _moves(
    path: str, row, start: tuple[int, int], budget: int, settings: config.Settings
) -> tuple[dict[int, int], dict[int, str], tuple[int, int] | None, int]:
    """{first line: text line} of the single-piece replies read from `start` up to what was indexed,
    {line: record uuid} of every message read (what lines stored before 0015 lack), where to resume
    (None: this transcript is done) and the bytes read."""
    indexed = int(row["byte_offset"] or 0)
    moves: dict[int, int] = {}
    uuids: dict[int, str] = {}
    if trust.refusal(path, settings) or indexed <= start[0]:
        return moves, uuids, None, 0
    offset, line = start
    try:
        with trust.open_transcript(path, settings) as fh:
            if transcript.was_rewritten(
                Path(path), indexed, row["head_hash"], fh=fh, recorded_tail_hash=row["tail_hash"]
            ):
                return moves, uuids, None, 0
            while offset < indexed:
                if offset - start[0] >= budget:
                    return moves, uuids, (offset, line), offset - start[0]
                rest = min(READ_BYTES, budget - (offset - start[0]))  # at least one whole message
                result = transcript.read_new(
                    Path(path), offset, line, fh=fh, max_bytes=rest, max_scan_bytes=SLICE_BYTES
                )
                if result.end_offset <= offset:
                    break  # one line longer than a slice (a sparse file): the rest is passed over
                for m in result.messages:
                    if m.end_offset > indexed:
                        continue  # read but not indexed yet: the indexer places it
                    if m.uuid:
                        uuids[m.line] = m.uuid
                    pieces = {n for n, _ in m.parts}
                    if m.role == "assistant" and len(pieces) == 1 and m.line not in pieces:
                        moves[m.line] = next(iter(pieces))
                offset, line = result.end_offset, result.end_line
    except (TranscriptError, TranscriptRefused, OSError) as exc:
        log.info("repoint_skipped", file=path, reason=str(exc))
    return moves, uuids, None, offset - start[0]
