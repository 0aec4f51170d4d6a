"""Where things live: the home folder and the runtime files in it (database, spool, status file,
socket, log, digests). Standard library only and no dataclasses: the CLI's warm search path needs
the socket's path and nothing else of the settings (DESIGN.md I58). `config` re-exports all of it.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = "~/.claude-plugin-total-recall"


def home() -> Path:
    return Path(os.environ.get("TOTAL_RECALL_HOME") or DEFAULT_HOME).expanduser()


def claude_config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()


def ensure_home() -> Path:
    """Create the home folder private to the user (0700) and return it."""
    h = home()
    h.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(h, 0o700)
    return h


def _file(name: str) -> property:
    """A file or folder of the home folder, as a read-only attribute of Paths."""
    return property(lambda self: self.home / name)


class Paths:
    """The runtime files of one home folder; immutable."""

    __slots__ = ("home",)

    def __init__(self, home: Path) -> None:
        object.__setattr__(self, "home", Path(home))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Paths is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Paths) and other.home == self.home

    def __hash__(self) -> int:
        return hash(self.home)

    def __repr__(self) -> str:
        return f"Paths(home={self.home!r})"

    db = _file("memory.db")
    config = _file("config.toml")
    spool = _file("spool.jsonl")
    status = _file("daemon.status.json")
    lock = _file("daemon.lock")
    socket = _file("daemon.sock")
    log = _file("daemon.log")
    wake = _file("wake")  # touched by hooks so the daemon's file watcher wakes at once
    digests = _file("digests")
    seen_secrets = _file("seen-secrets")  # keyed digests of the secret values hidden so far (redact.Seen)
    archive = _file("archive")

    def damaged_copy(self, stamp: str) -> Path:
        """Where `recover` keeps a damaged database (its -wal and -shm beside it)."""
        return self.home / f"memory.db.damaged-{stamp}"

    def recovering(self, stamp: str) -> Path:
        """The database `recover` fills before it takes the place of the damaged one."""
        return self.home / f".memory.db.recovering-{stamp}"

    def database_copies(self) -> list[Path]:
        """Every copy of a database `recover` left in the home: the damaged ones it kept (with their
        -wal and -shm) and any it was filling when it stopped."""
        return sorted([*self.home.glob("memory.db.damaged-*"), *self.home.glob(".memory.db.recovering-*")])


def paths() -> Paths:
    return Paths(home())
