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
import re
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


# -- the same project on every machine ----------------------------------------------------------------
SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/\s]+)@)?(?P<host>[^:/\s]+):(?!//)(?P<path>.+)$")


def normal_remote(url: str) -> str | None:
    """A git remote URL in the one form every clone of the repository shares: host (lower-case,
    without user, password or port) and path (without a trailing .git or slash), no scheme.

    git@github.com:Org/Repo.git, https://user:token@GitHub.com/Org/Repo and
    ssh://git@github.com:22/Org/Repo.git/ are all github.com/Org/Repo. The path keeps its case:
    not every host folds it. None for an empty or unreadable URL. Credentials never survive.
    """
    url = (url or "").strip()
    if not url:
        return None
    if "://" in url:
        scheme, _, rest = url.partition("://")
        netloc, _, path = rest.partition("/")
        host = netloc.rpartition("@")[2]
        if scheme.lower() == "file" or not host:
            host, path = "", rest if not host else path
        host = host.split(":", 1)[0]
    elif url.startswith("."):
        return None  # relative to this clone: names nothing another machine can compare
    elif (m := SCP_LIKE.match(url)) and not url.startswith("/") and len(m["host"]) > 1:
        host, path = m["host"], m["path"]
    else:  # a local path used as a remote (C:/... is a drive, not a host)
        host, path = "", url
    path = path.strip("/")
    while path.endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    if not path:
        return None
    return f"{host.lower()}/{path}" if host else f"/{path}"


def git_remote(project: str) -> str | None:
    """The URL of the project's `origin` remote (else its first remote), read from .git/config
    (a worktree's or submodule's `.git` file is followed); None when it has none."""
    import configparser

    git = Path(project) / ".git"
    try:
        if git.is_file():
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (Path(project) / pointer[len("gitdir:") :].strip()).resolve()
            common = git / "commondir"
            if common.is_file():
                git = (git / common.read_text(encoding="utf-8").strip()).resolve()
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read(git / "config", encoding="utf-8")
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    remotes = {s[len('remote "') : -1]: s for s in parser.sections() if s.startswith('remote "')}
    name = "origin" if "origin" in remotes else next(iter(remotes), None)
    return parser.get(remotes[name], "url", fallback=None) if name else None


def identity(project: str) -> str:
    """What makes a project the same project on every machine: its normalised git remote
    (`git:github.com/Org/Repo`) when it has one, else its normal path."""
    remote = normal_remote(git_remote(project) or "") if project else None
    return f"git:{remote}" if remote else normal(project or "")


def checkout_root(path: str) -> str | None:
    """The checkout a directory lies in: the nearest folder, itself or above, that holds `.git`."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return normal(str(folder))
    return None


def local_project(known: list[str], project: str | None, project_identity: str | None) -> str | None:
    """The project of this machine that another machine's `project` is: the known one with the
    same identity (a clone of the same remote, wherever it is checked out), else the same path."""
    if not project or not project_identity or project in known:
        return project
    same = sorted(p for p in known if identity(p) == project_identity)
    return same[0] if same else project
