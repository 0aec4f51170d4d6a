"""Queue existing transcripts for indexing, optionally wait for them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from total_recall import config, queue, state, transcript, trust
from total_recall.db import Database
from total_recall.errors import NotFound, TotalRecallError, TranscriptError
from total_recall.projects import transcript_folder

Progress = Callable[[int, int, float], None]  # (files done, files in all, started at)


def current_session_transcript(session: str | None = None) -> Path:
    projects = config.claude_config_dir() / "projects"
    if session:
        found = sorted(projects.glob(f"*/{session}.jsonl"))
        if not found:
            raise NotFound(f"no transcript for session {session} under {projects}")
        return found[0]
    folder = projects / transcript_folder(os.getcwd())
    candidates = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise NotFound(f"no transcript for the current directory under {folder}; pass a path or --all")
    return candidates[-1]


def targets(path: str | None, *, all_transcripts: bool, session: str | None) -> list[Path]:
    if all_transcripts:
        root = config.claude_config_dir() / "projects"
        return transcript.discover(root) if root.is_dir() else []
    if path:
        p = Path(path).expanduser().resolve()
        if p.is_dir():
            return transcript.discover(p)
        if p.is_file():
            return [p]
        raise NotFound(f"{path}: no such transcript or folder")
    return [current_session_transcript(session)]


def _already_indexed(db: Database, path: Path) -> bool:
    offset = state.byte_offset(db, str(path))
    try:
        return offset is not None and offset == path.stat().st_size
    except OSError:
        return False


def _session_of(path: Path, settings: config.Settings) -> str | None:
    """The session a transcript belongs to, read (for an agent file) from the file the open
    checked; None when it cannot be opened (the daemon reports why when it gets there)."""
    try:
        with trust.open_transcript(str(path), settings) as fh:
            return transcript.session_of(path, fh)
    except TranscriptError:
        return None


def backfill(
    settings: config.Settings,
    path: str | None,
    *,
    all_transcripts: bool = False,
    session: str | None = None,
    wait: bool = False,
    progress: Progress | None = None,
) -> dict:
    """Queue the transcripts; with wait, index them (here or by the daemon) and say how it went.
    progress(done, total, started) is called as files finish (the CLI draws a bar with it)."""
    from total_recall import db as dbmod

    database = dbmod.connect(settings=settings)
    store = dbmod.memory_store_for(settings, database)  # index_state lives with the memories
    try:
        files = targets(path, all_transcripts=all_transcripts, session=session)
        refused = {str(f): why for f in files if (why := trust.refusal(str(f), settings))}
        if path and files and len(refused) == len(files):
            # Every file the path names is refused: say why instead of "transcripts: 0".
            root = config.claude_config_dir() / "projects"
            first = refused[str(files[0])]
            if len(files) > 1:
                what = f"none of its {len(files)} transcripts may be read: {first}"
            else:  # the file the folder holds is named, not the folder (a symlink to elsewhere, say)
                what = first if str(files[0]) == str(path) else f"its one transcript {files[0]} is {first}"
            raise TotalRecallError(
                f"{path}: {what}; only transcripts under {root} (or [privacy] extra_roots) are read"
            )
        files = [f for f in files if str(f) not in refused]
        queued = []
        for f in files:
            if _already_indexed(store, f):
                continue
            queue.enqueue(
                database,
                str(f),
                session_id=_session_of(f, settings),
                event="backfill",
                size_seen=f.stat().st_size,
            )
            queued.append(str(f))
        result = {
            "transcripts": len(files),
            "queued": len(queued),
            "already_indexed": len(files) - len(queued),
        }
        if refused:  # some of a folder's files are outside the roots that may be read
            result["refused"] = len(refused)
        if wait and queued:
            result.update(wait_for(database, settings, queued, progress=progress, store=store))
        return result
    finally:
        if store is not database:
            store.close()
        database.close()


def wait_for(
    db: Database,
    settings: config.Settings,
    files: list[str],
    *,
    progress: Progress | None,
    store: Any = None,
) -> dict:
    """Until the files are indexed: by the running daemon, or here (under the daemon's lock)."""
    from total_recall import daemon
    from total_recall.errors import DaemonRunning

    started = time.time()
    lock = daemon.InstanceLock(config.paths().lock)
    try:
        lock.acquire()
    except DaemonRunning:
        lock = None
    worker = None
    if lock is not None:
        queue.release_all_claims(db)  # we hold the lock: claims left behind are a dead worker's
        if store is None:
            from total_recall import db as dbmod

            store = dbmod.memory_store_for(settings, db)
        worker = daemon.Daemon(db, settings, config.paths(), store=store)
    try:
        while (left := queue.unfinished(db, files)) > 0:
            if progress:
                progress(len(files) - left, len(files), started)
            if worker is not None:
                if not worker.step(immediate=True):
                    break
            else:
                time.sleep(0.5)
    finally:
        if lock is not None:
            lock.release()
    if progress:
        progress(len(files) - queue.unfinished(db, files), len(files), started)
    return {
        "indexed_by": "this process" if worker is not None else "daemon",
        "seconds": round(time.time() - started, 2),
        **outcome(db, files),
    }


def outcome(db: Database, files: list[str]) -> dict:
    """What really happened to each file: indexed, still pending after an error, or parked."""
    rows = queue.rows_of(db, files)
    rank = {"pending": 3, "claimed": 3, "parked": 2, "done": 1}
    latest: dict[str, tuple] = {}  # path -> (state, error, attempts) of its least finished row
    for row in rows:
        path, status, error, attempts = (
            row["transcript_path"],
            row["state"],
            row["last_error"],
            row["attempts"],
        )
        old = latest.get(path)
        if (
            old is None
            or rank.get(status, 0) > rank.get(old[0], 0)
            or (rank.get(status) == rank.get(old[0]) and error)
        ):
            latest[path] = (status, error, attempts)
    indexed = [p for p, (status, _, _) in latest.items() if status == "done"]
    parked = [p for p, (status, _, _) in latest.items() if status == "parked"]
    errored = [p for p, (status, error, _) in latest.items() if status in ("pending", "claimed") and error]
    waiting = [
        p for p, (status, error, _) in latest.items() if status in ("pending", "claimed") and not error
    ]
    out: dict = {
        "indexed": len(indexed),
        "pending_with_errors": len(errored),
        "parked": len(parked),
        "still_pending": len(waiting),
    }
    problems = [
        {
            "transcript": p,
            "state": "parked" if p in parked else "pending",
            "attempts": latest[p][2],
            "error": latest[p][1],
        }
        for p in parked + errored
    ]
    if problems:
        out["problems"] = problems
        out["hint"] = (
            "pending items are retried by the daemon (`total-recall up` or "
            "`total-recall daemon`); parked ones after `total-recall retry`"
        )
    return out
