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
import stat
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
            raise TotalRecallError(
                f"no indexed project matches {project!r}; search every project instead "
                "(--all-projects; all_projects in MCP)"
            )
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


GIT_FILE_BYTES = 1 << 20  # a .git pointer, commondir or config is a few KB; a bigger one is not read


def _git_dirs(project: str) -> tuple[Path, Path] | None:
    """The git directory of a checkout and its common directory (the main clone's, for a linked
    worktree; the same folder otherwise), or None when the folder is no checkout.

    The project is a folder a transcript or a hook payload names, so this never blocks and never
    reads what git itself would not: every file is read non-blocking, only when regular and small
    (`_git_file`), and a `gitdir:` or `commondir` pointer is followed only into a git directory
    (`_is_git_dir`)."""
    try:
        git = Path(project) / ".git"
        if not git.is_dir():
            pointer = _git_file(git) or ""
            if not pointer.startswith("gitdir:"):
                return None
            git = Path(os.path.realpath(Path(project) / pointer[len("gitdir:") :].strip()))
        common = _git_file(git / "commondir")  # a linked worktree's: config is the main clone's
        common_dir = Path(os.path.realpath(git / common.strip())) if common else git
        return (git, common_dir) if _is_git_dir(git, common_dir) else None
    except (OSError, ValueError):
        return None


def git_remote(project: str) -> str | None:
    """The URL of the project's `origin` remote (else its first remote), read from the config of
    its git directory (a worktree's or submodule's `.git` file is followed); None when it has none."""
    import configparser

    dirs = _git_dirs(project)
    if dirs is None:
        return None
    try:
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read_string(_git_file(dirs[1] / "config") or "")
    except (OSError, ValueError, configparser.Error):
        return None
    remotes = {s[len('remote "') : -1]: s for s in parser.sections() if s.startswith('remote "')}
    name = "origin" if "origin" in remotes else next(iter(remotes), None)
    return parser.get(remotes[name], "url", fallback=None) if name else None


def main_checkout(project: str) -> str | None:
    """The main checkout a linked worktree belongs to (`git worktree add`, Claude Code's
    `claude --worktree` and `EnterWorktree`, which put theirs in `<repo>/.claude/worktrees/`): the
    folder holding the common `.git` directory. None for a main checkout, a bare repository's
    worktree or no checkout."""
    dirs = _git_dirs(project)
    if dirs is None or dirs[0] == dirs[1] or dirs[1].name != ".git":
        return None
    return normal(str(dirs[1].parent))


def _is_git_dir(git: Path, common: Path) -> bool:
    """Whether `git` is a git directory as git itself tells one: a HEAD file, and objects/ and
    refs/ in it or in the common directory its `commondir` names (a linked worktree's)."""
    return (git / "HEAD").is_file() and (common / "objects").is_dir() and (common / "refs").is_dir()


def _git_file(path: Path) -> str | None:
    """The text of a small regular file of git's, or None: a FIFO, a device, a folder, a file over
    GIT_FILE_BYTES or one that is not UTF-8 is never read (opened non-blocking, so nothing waits)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or opened.st_size > GIT_FILE_BYTES:
            return None
        data = b""
        while len(data) <= GIT_FILE_BYTES and (part := os.read(fd, GIT_FILE_BYTES + 1 - len(data))):
            data += part
        return data.decode("utf-8") if len(data) <= GIT_FILE_BYTES else None
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def identity(project: str) -> str:
    """What makes a project the same project on every machine: its normalised git remote
    (`git:github.com/Org/Repo`) when it has one, else its normal path, a linked worktree's being its
    main checkout's (a repository without a remote is one project in all its worktrees)."""
    remote = normal_remote(git_remote(project) or "") if project else None
    if remote:
        return f"git:{remote}"
    return (main_checkout(project) if project else None) or normal(project or "")


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
