"""What may be read and kept: allowed transcript paths, excluded projects, forgotten scopes,
paused time ranges, and the keys of files we derive from a project or a transcript.

The hook shims apply the same path and key rules with the standard library alone
(hooks/enqueue.py, hooks/session_start.py); tests/test_trust.py pins that both agree.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from total_recall import config, transcript
from total_recall.db import Database
from total_recall.errors import TranscriptRefused

ARCHIVE_SUFFIX = ".jsonl.gz"


# -- which files may be opened ----------------------------------------------------------------
def allowed_roots(settings: config.Settings) -> list[str]:
    """$CLAUDE_CONFIG_DIR/projects, the projects folder of the Claude config that `install` wrote
    our hooks into (a service may run without CLAUDE_CONFIG_DIR), and [privacy] extra_roots."""
    roots = [config.claude_config_dir() / "projects"]
    try:
        installed = json.loads((config.home() / "installed.json").read_text(encoding="utf-8"))
        if isinstance(installed, dict) and isinstance(installed.get("settings_path"), str):
            roots.append(Path(installed["settings_path"]).parent / "projects")
    except (OSError, ValueError):
        pass
    roots += [Path(r) for r in extra_roots(settings)[0]]
    return [os.path.realpath(r) for r in roots]


EXTRA_ROOTS_FIX = (
    "[privacy] extra_roots takes absolute folders (or ~/...); empty and relative entries are ignored"
)


def extra_roots(settings: config.Settings) -> tuple[list[str], list[str]]:
    """[privacy] extra_roots as (folders, entries ignored). Only an absolute path (after ``~``) is
    a folder: an empty or relative entry would be the working directory of whichever process
    reads it (``Path("")`` is "."), the daemon's or a hook's, so it is ignored (the daemon logs it
    at start, `doctor` shows it). hooks/enqueue_hook.py keeps the same rule."""
    folders, ignored = [], []
    for entry in settings.privacy.extra_roots or []:
        folder = os.path.expanduser(entry)
        if os.path.isabs(folder):
            folders.append(folder)
        else:
            ignored.append(entry)
    return folders, ignored


def refusal(path: str, settings: config.Settings) -> str | None:
    """Why ``path`` must not be opened, or None when it is a transcript we may read.

    Allowed: a regular ``*.jsonl`` file whose resolved path lies under an allowed root, named
    by an absolute path without ``..`` (so neither a symlink nor a dot-dot escapes the root).
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        return "not a path"
    if not os.path.isabs(path):
        return "not an absolute path"
    if ".." in path.split(os.sep):
        return "path contains '..'"
    if not path.endswith(".jsonl"):
        return "not a .jsonl file"
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return "path cannot be resolved"
    if not any(real.startswith(root.rstrip(os.sep) + os.sep) for root in allowed_roots(settings)):
        return "outside the Claude projects folder (and [privacy] extra_roots)"
    try:
        import stat

        if not stat.S_ISREG(os.stat(real).st_mode):
            return "not a regular file"
    except FileNotFoundError:
        return None  # a transcript that went away: the indexer reports it missing
    except (OSError, ValueError):
        return "cannot be examined"
    return None


def open_transcript(path: str, settings: config.Settings) -> IO[bytes]:
    """Open a transcript the path rule allows (`refusal`), and check that the file opened is one
    under an allowed root (transcript.open_transcript): the daemon, `note` and the archive open a
    transcript this way, never by its name alone. Raises TranscriptRefused, or TranscriptError
    when it cannot be opened (gone)."""
    reason = refusal(path, settings)
    if reason:
        raise TranscriptRefused(str(path), reason)
    return transcript.open_transcript(path, allowed_roots(settings))


def excluded(settings: config.Settings, *names: str | None) -> str | None:
    """The [privacy] exclude_projects glob that matches one of ``names`` (project paths or
    Claude's project-folder names), or None."""
    globs = settings.privacy.exclude_projects or []
    for name in filter(None, names):
        for pattern in globs:
            if fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(
                name.rstrip("/"), pattern.rstrip("/")
            ):
                return pattern
    return None


# -- forgotten scopes ---------------------------------------------------------------------------
def forgotten(db: Database, *, file: str | None = None, session: str | None = None) -> str | None:
    """'file' / 'session' when that whole transcript or session was forgotten, else None.

    A forgotten project is not refused whole: what it said before the forget is withheld line by
    line (``project_cutoff``), and sessions begun after it are remembered again."""
    for kind, value in (("file", file), ("session", session)):
        if value and scope_forgotten(db, kind, value):
            return kind
    return None


def scope_forgotten(db: Database, kind: str, value: str) -> bool:
    """Whether this session, transcript or project ('session', 'file', 'project') has a tombstone."""
    return db.one("SELECT 1 FROM forgotten_scopes WHERE kind = ? AND value = ?", (kind, value)) is not None


def forgotten_lines(
    db: Database, source_file: str, first: int | None = None, last: int | None = None
) -> set[int]:
    """The lines of a transcript that a forget tombstoned (only those in first..last when given)."""
    if first is None or last is None:
        return set(
            db.column(
                "SELECT source_line FROM tombstones WHERE kind = 'line' AND source_file = ?", (source_file,)
            )
        )
    return set(
        db.column(
            "SELECT source_line FROM tombstones WHERE kind = 'line' AND source_file = ? "
            "AND source_line BETWEEN ? AND ?",
            (source_file, first, last),
        )
    )


def forget_records(db: Database, uuids: list[str], now: float) -> None:
    """Remember that the records with these uuids were forgotten (their copies in a forked session are
    forgotten as they arrive, I202)."""
    db.executemany(
        "INSERT INTO forgotten_records (uuid, created_at) VALUES (?, ?) ON CONFLICT (uuid) DO NOTHING",
        [(u, now) for u in uuids],
    )


def title_record(title: str) -> str:
    """How a forgotten session title is kept among the forgotten records: a hash of its words."""
    return (
        "title:"
        + hashlib.sha256(" ".join(title.split()).casefold().encode("utf-8", "surrogatepass")).hexdigest()[:32]
    )


def drop_content_tombstone(db: Database, project: str | None, content_hash: str) -> int:
    """Remove the tombstone of a forgotten text (the user asks to remember it again); how many went."""
    return db.execute(
        "DELETE FROM tombstones WHERE kind = 'content' AND project IS ? AND content_hash = ?",
        (project, content_hash),
    ).rowcount


def project_cutoff(db: Database, project: str | None) -> float | None:
    """When the project was last forgotten: its messages said before then are never indexed."""
    if not project:
        return None
    return db.scalar(
        "SELECT max(created_at) FROM forgotten_scopes WHERE kind = 'project' AND value = ?", (project,)
    )


def tombstone_lines(db: Database, source_file: str, lines, now: float, reason: str) -> None:
    """Line tombstones: these lines of the transcript are never read, indexed or archived again."""
    db.executemany(
        "INSERT INTO tombstones (kind, source_file, source_line, created_at, reason) "
        "VALUES ('line', ?, ?, ?, ?)",
        [(source_file, ln, now, reason) for ln in sorted(set(lines))],
    )


def tombstone_scope(db: Database, kind: str, value: str, now: float) -> None:
    db.execute(
        "INSERT OR IGNORE INTO forgotten_scopes (kind, value, created_at) VALUES (?, ?, ?)",
        (kind, value, now),
    )


# -- pause ----------------------------------------------------------------------------------------
def pause(db: Database, seconds: float | None, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    until = None if seconds is None else now + seconds
    with db.write():
        open_range = db.scalar("SELECT id FROM paused_ranges WHERE ended_at IS NULL OR ended_at > ?", (now,))
        if open_range is not None:
            db.execute("UPDATE paused_ranges SET ended_at = ? WHERE id = ?", (until, open_range))
        else:
            db.execute("INSERT INTO paused_ranges (started_at, ended_at) VALUES (?, ?)", (now, until))
    return {"paused": True, "since": _iso(now), "until": _iso(until) if until else "resume"}


def resume(db: Database, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    with db.write():
        cur = db.execute(
            "UPDATE paused_ranges SET ended_at = ? WHERE ended_at IS NULL OR ended_at > ?", (now, now)
        )
    return {"paused": False, "ended_ranges": cur.rowcount}


def paused_ranges(db: Database) -> list[tuple[float, float]]:
    return [
        (r["started_at"], r["ended_at"] if r["ended_at"] is not None else float("inf"))
        for r in db.execute("SELECT started_at, ended_at FROM paused_ranges")
    ]


def said_at(stamp: str | None, now: float) -> float:
    """Unix time of a conversation timestamp; a message without one counts as said now."""
    if stamp:
        try:
            parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
        except (ValueError, TypeError, AttributeError):
            pass
    return now


def in_paused(stamp: str | None, ranges: list[tuple[float, float]], now: float) -> bool:
    """Whether a message with conversation time ``stamp`` was said while paused."""
    if not ranges:
        return False
    when = said_at(stamp, now)
    return any(start <= when < end for start, end in ranges)


def withheld(
    stamp: str | None, ranges: list[tuple[float, float]], cutoff: float | None, now: float
) -> str | None:
    """'paused' or 'forgotten' when a message said at ``stamp`` must not be kept, else None."""
    if cutoff is not None and said_at(stamp, now) < cutoff:
        return "forgotten"
    return "paused" if in_paused(stamp, ranges, now) else None


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, tz=timezone.utc).isoformat(timespec="seconds")


# -- keys of derived files ---------------------------------------------------------------------
def archive_name(source_file: str) -> str:
    """The archive file of a transcript: a hash of its path (never the path itself)."""
    return hashlib.sha256(source_file.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ARCHIVE_SUFFIX
