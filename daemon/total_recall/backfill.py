"""Queue existing transcripts for indexing, optionally wait for them; rebuild vectors."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from total_recall import config, queue, transcript, trust
from total_recall.db import Database
from total_recall.errors import NotFound, TotalRecallError


def encode_project_dir(cwd: str) -> str:
    """Claude Code's folder name for a launch directory: every non-alphanumeric char becomes '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in os.path.abspath(cwd))


def current_session_transcript(session: str | None = None) -> Path:
    projects = config.claude_config_dir() / "projects"
    if session:
        found = sorted(projects.glob(f"*/{session}.jsonl"))
        if not found:
            raise NotFound(f"no transcript for session {session} under {projects}")
        return found[0]
    folder = projects / encode_project_dir(os.getcwd())
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
    row = db.one("SELECT byte_offset FROM index_state WHERE source_file = ?", (str(path),))
    try:
        return bool(row) and row[0] == path.stat().st_size
    except OSError:
        return False


def backfill(path: str | None, *, all_transcripts: bool = False, session: str | None = None,
             wait: bool = False, progress: bool = False) -> dict:
    from total_recall import db as dbmod

    settings = config.load()
    database = dbmod.connect(settings=settings)
    try:
        files = targets(path, all_transcripts=all_transcripts, session=session)
        refused = {str(f): trust.refusal(str(f), settings) for f in files}
        if path and len(files) == 1 and refused[str(files[0])]:
            root = config.claude_config_dir() / "projects"
            raise TotalRecallError(f"{path}: {refused[str(files[0])]}; only transcripts under {root} "
                                   "(or [privacy] extra_roots) are read")
        files = [f for f in files if not refused[str(f)]]
        queued = []
        for f in files:
            if _already_indexed(database, f):
                continue
            queue.enqueue(database, str(f), session_id=transcript.session_of(f), event="backfill",
                          size_seen=f.stat().st_size)
            queued.append(str(f))
        result = {"transcripts": len(files), "queued": len(queued), "already_indexed": len(files) - len(queued)}
        if wait and queued:
            result.update(wait_for(database, settings, queued, progress=progress))
        return result
    finally:
        database.close()


def _remaining(db: Database, files: list[str]) -> int:
    marks = ",".join("?" * len(files))
    return int(db.scalar(
        f"SELECT count(DISTINCT transcript_path) FROM work_queue WHERE state IN ('pending', 'claimed') "
        f"AND transcript_path IN ({marks})", files, 0))


def wait_for(db: Database, settings: config.Settings, files: list[str], *, progress: bool) -> dict:
    """Until the files are indexed: by the running daemon, or here when none runs."""
    from total_recall import daemon

    started = time.time()
    status = daemon.read_status(config.paths())
    running = bool(status and status.get("alive") and status.get("state") == "running")
    worker = None if running else daemon.Daemon(db, settings, config.paths())
    while (left := _remaining(db, files)) > 0:
        if progress:
            _draw(len(files) - left, len(files), started)
        if worker is not None:
            if not worker.step(immediate=True):
                break
        else:
            time.sleep(0.5)
    if progress:
        _draw(len(files), len(files), started)
        sys.stderr.write("\n")
    parked = int(db.scalar("SELECT count(*) FROM work_queue WHERE state = 'parked'", default=0))
    return {"indexed_by": "daemon" if running else "this process", "seconds": round(time.time() - started, 2),
            "parked": parked}


def _draw(done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / max(1, total))
    elapsed = time.time() - started
    eta = (elapsed / done * (total - done)) if done else 0
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} transcripts  "
                     f"elapsed {elapsed:4.0f}s  ETA {eta:4.0f}s")
    sys.stderr.flush()


def reembed(db: Database, settings: config.Settings) -> dict:
    """Rebuild vectors with the configured model; safe to interrupt and run again."""
    from total_recall import db as dbmod
    from total_recall.embed import get_embedder
    from total_recall.indexer import Indexer

    embedder = get_embedder(settings)
    recorded = db.get_meta("embed_model")
    dropped = recorded is not None and (recorded != embedder.model_id or db.get_meta("embed_model_mismatch"))
    if dropped:
        dbmod.drop_vector_tables(db)
    indexer = Indexer(db, settings, embedder=embedder)
    count = indexer.embed_pending()
    return {"model": embedder.model_id, "dim": embedder.dim, "dropped_old_vectors": bool(dropped),
            "embedded": count}
