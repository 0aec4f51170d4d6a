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

    @property
    def db(self) -> Path:
        return self.home / "memory.db"

    @property
    def config(self) -> Path:
        return self.home / "config.toml"

    @property
    def spool(self) -> Path:
        return self.home / "spool.jsonl"

    @property
    def status(self) -> Path:
        return self.home / "daemon.status.json"

    @property
    def lock(self) -> Path:
        return self.home / "daemon.lock"

    @property
    def socket(self) -> Path:
        return self.home / "daemon.sock"

    @property
    def log(self) -> Path:
        return self.home / "daemon.log"

    @property
    def wake(self) -> Path:
        """Touched by hooks so the daemon's file watcher wakes at once."""
        return self.home / "wake"

    @property
    def digests(self) -> Path:
        return self.home / "digests"

    @property
    def archive(self) -> Path:
        return self.home / "archive"


def paths() -> Paths:
    return Paths(home())
