"""Project identity has one owner (total_recall.projects); the stdlib hook's copy agrees with it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import unicodedata

import pytest

from helpers import env, git_checkout
from total_recall import config, projects
from total_recall.errors import TotalRecallError

HARD_PATHS = [
    "/home/u/client-a",
    "/home/u/client_a",
    "/home/u/client.a",
    "/home/u/client a",
    "/home/u/caf\u00e9",
    unicodedata.normalize("NFD", "/home/u/caf\u00e9"),
    "/home/u/\u65e5\u672c\u8a9e",
    "/home/u/x y/",
    "/home/u/x y//",
    "/home/u//x y",
    "/home/u/./x y",
    "/home/u/w/../x y",
    "/",
    "",
    "C:\\work\\repo",
    "/home/a b/c.d_e",
    "/tmp/\u00fcn\u00ef/x",
    "/x/" + "y" * 300,
    "/home/u/emoji-\U0001f600",
    "/home/u/bad-\udcff-surrogate",
]


def hook_module():
    spec = importlib.util.spec_from_file_location(
        "session_start_hook", config.resource_dir("hooks") / "session_start.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", HARD_PATHS, ids=repr)
def test_the_hook_computes_the_same_digest_key(path):
    """Replaces test_memory.py::test_digest_key_matches_the_hook (same paths, and harder ones)."""
    assert hook_module().digest_key(path) == projects.digest_key(path)


def test_folder_collisions_never_share_a_digest():
    keys = {
        projects.digest_key(p)
        for p in ("/home/u/client-a", "/home/u/client_a", "/home/u/client.a", "/home/u/client a")
    }
    assert len(keys) == 4
    assert len({projects.claude_folder(p) for p in ("/home/u/client-a", "/home/u/client_a")}) == 1


def test_one_project_whatever_its_spelling():
    nfc = "/home/u/caf\u00e9"
    assert projects.digest_key(unicodedata.normalize("NFD", nfc)) == projects.digest_key(nfc)
    assert projects.digest_key("/home/u/x y/") == projects.digest_key("/home/u/x y")
    assert projects.digest_key("/home/u/./w/../x y") == projects.digest_key("/home/u/x y")


def test_transcript_folder_is_claude_codes_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert projects.transcript_folder("/home/u/my_app.v2") == "-home-u-my-app-v2"
    assert projects.transcript_folder("caf\u00e9") == projects.claude_folder(
        os.path.join(str(tmp_path), "caf\u00e9")
    )
    assert projects.transcript_folder("x").endswith("-x")


def test_short_names_and_resolution():
    known = ["/home/u/Atlas", "/home/u/atlas/sub", "/srv/other", ""]
    assert projects.short_name("/home/u/Atlas") == "atlas"
    assert projects.short_name("") == ""
    assert projects.resolve(known, "ATLAS", False, None) == ["/home/u/Atlas"]
    assert projects.resolve(known, "/srv/other/", False, None) == ["/srv/other"]
    assert projects.resolve(known, None, False, "/home/u/atlas/sub/deep") == ["/home/u/atlas/sub"]
    assert projects.resolve(known, None, False, "/home/u/Atlas2") is None  # a prefix is not inside
    assert projects.resolve(known, None, True, "/srv/other") is None
    with pytest.raises(TotalRecallError, match="no indexed project matches"):
        projects.resolve(known, "missing", False, None)


# -- the same project on every machine (issue 19) -------------------------------------------------
SAME_REMOTE = [
    "git@github.com:Org/Repo.git",
    "https://github.com/Org/Repo",
    "https://github.com/Org/Repo.git/",
    "https://user:s3cret-token@GitHub.com/Org/Repo.git",
    "ssh://git@github.com:22/Org/Repo.git",
    "ssh://git@GITHUB.COM/Org/Repo",
    "git://github.com/Org/Repo.git",
    "git+ssh://git@github.com/Org/Repo",
]


@pytest.mark.parametrize("url", SAME_REMOTE)
def test_every_spelling_of_one_remote_is_one_identity_without_credentials(url):
    assert projects.normal_remote(url) == "github.com/Org/Repo"
    assert "s3cret" not in (projects.normal_remote(url) or "")


def test_remotes_that_differ_stay_apart():
    seen = {
        projects.normal_remote(u)
        for u in (
            "git@github.com:Org/Repo.git",
            "git@github.com:Org/Repo2.git",
            "git@gitlab.com:Org/Repo.git",
            "git@github.com:Other/Repo.git",
            "https://gitlab.example.com/group/sub/Repo.git",
            "/srv/git/Repo.git",
        )
    }
    assert len(seen) == 6
    assert projects.normal_remote("file:///srv/git/Repo.git") == projects.normal_remote("/srv/git/Repo.git")
    for nothing in ("", "   ", "../sibling.git", "./x"):  # relative remotes name nothing shared
        assert projects.normal_remote(nothing) is None
    assert projects.normal_remote("C:/repos/Repo.git") == "/C:/repos/Repo"  # a drive, not a host "C"


def _clone(path, remotes: dict[str, str]) -> str:
    body = "[core]\n\tbare = false\n" + "".join(f'[remote "{n}"]\n\turl = {u}\n' for n, u in remotes.items())
    return git_checkout(path, body)


def test_two_checkouts_of_one_remote_in_different_folders_are_one_project(tmp_path):
    laptop = _clone(tmp_path / "laptop" / "src" / "repo", {"origin": "git@github.com:Org/Repo.git"})
    desktop = _clone(tmp_path / "desktop" / "work" / "Repo", {"origin": "https://github.com/Org/Repo"})
    assert projects.identity(laptop) == projects.identity(desktop) == "git:github.com/Org/Repo"
    # origin wins over other remotes; a clone with only another remote uses that one
    fork = _clone(
        tmp_path / "fork", {"upstream": "git@github.com:Org/Repo.git", "origin": "git@github.com:Me/Repo"}
    )
    assert projects.identity(fork) == "git:github.com/Me/Repo"
    only = _clone(tmp_path / "only", {"upstream": "git@github.com:Org/Repo.git"})
    assert projects.identity(only) == "git:github.com/Org/Repo"
    # a worktree's .git is a file pointing into the main clone's git dir
    wt = tmp_path / "wt"
    wt.mkdir()
    gitdir = tmp_path / "laptop" / "src" / "repo" / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/wt\n")
    (gitdir / "commondir").write_text("../..\n")
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert projects.identity(str(wt)) == "git:github.com/Org/Repo"
    # the project of this machine that another machine's project is
    assert projects.local_project([desktop], laptop, projects.identity(laptop)) == desktop
    assert projects.local_project([desktop], "/elsewhere/x", "/elsewhere/x") == "/elsewhere/x"


def test_without_a_remote_the_path_is_the_identity(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert projects.identity(str(plain)) == str(plain)
    assert projects.identity(str(plain) + "/") == str(plain)
    broken = tmp_path / "broken"
    git_checkout(broken, "")
    (broken / ".git" / "config").write_bytes(b"\xff\xfe not a config [[[")
    assert projects.identity(str(broken)) == str(broken)
    assert projects.identity(str(tmp_path / "missing")) == str(tmp_path / "missing")


def test_a_linked_worktree_without_a_remote_is_its_main_checkout(tmp_path):
    """A linked worktree's `.git` file points into the main clone's `.git/worktrees/<name>`, whose
    `commondir` leads back: without a remote its identity is the main checkout's path. A submodule
    (its git dir has no commondir) and a bare repository's worktree are their own."""
    main = git_checkout(tmp_path / "app", "[core]\n\tbare = false\n")
    gitdir = tmp_path / "app" / ".git" / "worktrees" / "fix"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/fix\n")
    (gitdir / "commondir").write_text("../..\n")
    tree = tmp_path / "app" / ".claude" / "worktrees" / "fix"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {gitdir}\n")
    assert projects.main_checkout(str(tree)) == main
    assert projects.identity(str(tree)) == projects.identity(main) == main
    assert projects.main_checkout(main) is None
    module_dir = tmp_path / "app" / ".git" / "modules" / "lib"
    module_dir.mkdir(parents=True)
    (module_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (module_dir / "objects").mkdir()
    (module_dir / "refs").mkdir()
    module = tmp_path / "app" / "lib"
    module.mkdir()
    (module / ".git").write_text(f"gitdir: {module_dir}\n")
    assert projects.identity(str(module)) == str(module)
    bare = tmp_path / "bare.git"
    for folder in ("objects", "refs", "worktrees/x"):
        (bare / folder).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "worktrees" / "x" / "HEAD").write_text("ref: refs/heads/x\n")
    (bare / "worktrees" / "x" / "commondir").write_text("../..\n")
    from_bare = tmp_path / "x"
    from_bare.mkdir()
    (from_bare / ".git").write_text(f"gitdir: {bare / 'worktrees' / 'x'}\n")
    assert projects.identity(str(from_bare)) == str(from_bare)


IDENTITIES = (
    "import json, sys; from total_recall import projects; "
    "print(json.dumps([projects.identity(p) for p in sys.argv[1:]]))"
)


def test_a_checkout_steers_no_read_outside_its_git_directory_and_nothing_blocks(tmp_path):
    """A project folder comes from a transcript's or a hook payload's `cwd`. Its `.git` is followed
    only into a git directory (HEAD, objects/ and refs/, as git tells one), and git's files are read
    only when regular and small, never waited on: a pointer to any other folder holding a `config`,
    a FIFO, a device or a huge file leaves the path as the identity (in a process of its own, so a
    read that blocks fails the test instead of hanging it)."""
    remote = '[remote "origin"]\n\turl = https://example.com/Outside/Repo\n'
    elsewhere = tmp_path / "elsewhere"  # a folder with a config, but no git directory
    elsewhere.mkdir()
    (elsewhere / "config").write_text(remote)
    cases = {}
    cases["pointer"] = tmp_path / "pointer"
    cases["pointer"].mkdir()
    (cases["pointer"] / ".git").write_text(f"gitdir: {elsewhere}\n")
    worktree = tmp_path / "wt-meta"  # a worktree's git dir whose commondir names that folder
    worktree.mkdir()
    (worktree / "HEAD").write_text("ref: refs/heads/x\n")
    (worktree / "commondir").write_text(f"{elsewhere}\n")
    cases["commondir"] = tmp_path / "wt"
    cases["commondir"].mkdir()
    (cases["commondir"] / ".git").write_text(f"gitdir: {worktree}\n")
    cases["fifo"] = tmp_path / "fifo"
    git_checkout(cases["fifo"], "")
    (cases["fifo"] / ".git" / "config").unlink()
    os.mkfifo(cases["fifo"] / ".git" / "config")
    cases["fifo-pointer"] = tmp_path / "fifo-pointer"
    cases["fifo-pointer"].mkdir()
    os.mkfifo(cases["fifo-pointer"] / ".git")
    cases["device"] = tmp_path / "device"
    git_checkout(cases["device"], "")
    (cases["device"] / ".git" / "config").unlink()
    (cases["device"] / ".git" / "config").symlink_to("/dev/zero")
    cases["huge"] = tmp_path / "huge"
    git_checkout(cases["huge"], remote + "#" * (4 << 20))  # no git config is 4 MB
    cases["real"] = tmp_path / "real"
    git_checkout(cases["real"], remote)
    done = subprocess.run(
        [sys.executable, "-c", IDENTITIES, *map(str, cases.values())],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = dict(zip(cases, json.loads(done.stdout)))
    assert found.pop("real") == "git:example.com/Outside/Repo"
    assert found == {name: str(path) for name, path in cases.items() if name != "real"}
