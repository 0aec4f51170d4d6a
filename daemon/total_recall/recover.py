"""`total-recall recover`: salvage what SQLite can still read of a damaged memory.db.

The damaged files are moved aside and kept, a fresh database is migrated to the current schema,
and `salvage.copy_into` copies every readable row from the damaged copy (its SQL lives there).
Finally every known transcript is queued from byte 0: lines whose `messages` rows survived are
recognised and skipped, the rest are extracted again, so what the damage took is rebuilt from
the transcripts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, repoint, salvage

log = structlog.get_logger(__name__)


def _known_transcripts(db: Any) -> set[str]:
    from total_recall import transcript

    found = salvage.known_sources(db)
    root = config.claude_config_dir() / "projects"
    if root.is_dir():
        found |= {str(p) for p in transcript.discover(root)}
    return found


def recover() -> dict:
    """Stop the daemon, keep the damaged files, salvage into a new database, re-queue transcripts."""
    from total_recall import daemon, queue, state
    from total_recall import db as dbmod

    paths = config.paths()
    if not paths.db.exists():
        return {"recovered": False, "message": f"no database at {paths.db}; nothing to recover"}
    stopped = daemon.stop_running(paths)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept = paths.damaged_copy(stamp)
    # The WAL and shared-memory files belong to the damaged file: they move with it, or SQLite
    # would replay the old WAL into the new database.
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{paths.db}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{kept}{suffix}"))
    fresh = paths.recovering(stamp)
    settings = config.load()
    database = dbmod.connect(fresh, settings=settings)
    try:
        stats = salvage.copy_into(kept, database)
        # Rows an older indexer left on a reply's thinking line move first, while the offsets still
        # say what was indexed: read again from byte 0, the reply's text line would get a second
        # copy of its windows beside the old ones (repoint.py).
        repoint.finish(database, settings)
        files = sorted(_known_transcripts(database))
        with database.write():
            # From byte 0: any line whose rows were lost is extracted again; the rest is skipped.
            state.read_all_again(database)
            queue.restart_all(database)
        requeued = 0
        for f in files:
            if os.path.isfile(f):
                queue.enqueue(database, f, event="backfill")
                requeued += 1
        dbmod.checkpoint(database)
    finally:
        database.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{fresh}{suffix}").unlink(missing_ok=True)
    os.replace(fresh, paths.db)
    log.info("recovered", kept=str(kept), tables=stats["tables"], errors=len(stats["errors"]))
    return {
        "recovered": True,
        "damaged_copy_kept": str(kept),
        "database": str(paths.db),
        "rows_salvaged": stats["tables"],
        "unreadable": stats["errors"][:20],
        "unreadable_count": len(stats["errors"]),
        "lines_to_extract_again": stats.get("lines_to_extract_again", 0),
        "transcripts_requeued": requeued,
        "daemon_stopped": bool(stopped["was_running"]),
        "next": "start the daemon (`total-recall restart`) or run `total-recall daemon --once` to "
        "rebuild what was lost from the transcripts; vectors are rebuilt by the same run. The damaged "
        "copy holds everything the old database held: the next `total-recall forget` deletes it, so "
        "move it elsewhere first if you want to keep it",
    }
