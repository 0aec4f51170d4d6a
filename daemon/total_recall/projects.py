"""Project identity: every rule that turns a launch directory into a project's name or key.

One owner, so the digest a hook reads, the folder Claude Code writes transcripts to, the name a
user types and the projects a search covers never disagree. The one copy elsewhere is
hooks/session_start.py's `digest_key` (hooks import only the standard library); a test pins it
to agree with `digest_key` here on hard cases (client-a vs client_a, unicode forms, trailing
slashes).
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path

from total_recall.errors import TotalRecallError

FOLDER_CHARS = 120  # the readable part of a digest key; the hash keeps longer paths apart


def normal(path: str) -> str:
    """The form of a project path both the daemon and the hook key on: NFC, no trailing slash."""
    path = unicodedata.normalize("NFC", path)
    return os.path.normpath(path) if path else path


def claude_folder(directory: str) -> str:
    """Claude Code's folder rule: every character outside [A-Za-z0-9] becomes '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in directory)


def transcript_folder(cwd: str) -> str:
    """The folder under ~/.claude/projects that holds the transcripts of sessions started in cwd."""
    return claude_folder(os.path.abspath(cwd))


def digest_key(project: str) -> str:
    """Claude Code's folder rule plus a short hash of the normalised path, so /home/u/client-a and
    /home/u/client_a get different digests (hooks/session_start.py has the same function)."""
    norm = normal(project)
    digest = hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{claude_folder(norm)[:FOLDER_CHARS]}-{digest}"


def short_name(project: str) -> str:
    """The short, typeable name of a project path: its last folder, lower-cased."""
    return Path(project).name.lower() if project else ""


def resolve(known: list[str], project: str | None, all_projects: bool, cwd: str | None) -> list[str] | None:
    """The projects a command covers, among the known ones. None = every project.

    A directory or a short name picks the projects it names; with neither, the project the
    working directory is inside (the deepest one), else every project.
    """
    if all_projects:
        return None
    if project:
        as_path = os.path.abspath(os.path.expanduser(project))
        hits = [p for p in known if p == as_path or p == project or short_name(p) == project.lower()]
        if not hits:
            raise TotalRecallError(f"no indexed project matches {project!r}; try --all-projects")
        return hits
    here = os.path.abspath(cwd or os.getcwd())
    inside = [p for p in known if p and (here == p or here.startswith(p.rstrip("/") + "/"))]
    if inside:
        return [max(inside, key=len)]
    return None  # not inside any indexed project: search everything
