"""One memory across machines (issue 19): every source records the machine it was said on, and a
project is the same project wherever it is checked out when its git remote is the same."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from conftest import isolate
from helpers import (
    REPO,
    cli,
    cli_json,
    daemon_process,
    env,
    git_checkout,
    git_repository,
    wait_for,
    write_transcript,
)
from total_recall import projects

START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=2)
DECISION = "We decided to terminate TLS with Caddy instead of nginx."


def _checkout(path, remote: str) -> str:
    return git_checkout(path, f'[remote "origin"]\n\turl = {remote}\n')


def _say(base, project: str, session: str, turns) -> None:
    path = base / "claude" / "projects" / "-repo" / f"{session}.jsonl"
    write_transcript(path, turns, cwd=project, start=START, session=session)
    cli("backfill", str(path), "--wait")


def _session_start(cwd: str) -> str:
    """What the SessionStart hook prints for a session launched in cwd (its digest file)."""
    start = subprocess.run(
        [sys.executable, "-I", "-S", str(REPO / "hooks" / "session_start.py")],
        input=json.dumps({"session_id": "new", "cwd": cwd, "hook_event_name": "SessionStart"}),
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert start.returncode == 0, start.stderr
    return start.stdout


def test_search_shows_the_machine_next_to_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "laptop")
    _say(tmp_path, "/home/dev/repo", "s-laptop", [("user", DECISION)])
    result = cli_json("search", "Caddy TLS", "--all-projects")[0]
    assert result["machine"] == "laptop" and result["sources"][0]["machine"] == "laptop"
    assert result["source_line"] == 1
    text = cli("search", "Caddy TLS", "--all-projects").stdout
    assert f"`{result['source_file']}:1` on laptop" in text  # file:line copied whole, the machine after it

    monkeypatch.delenv("TOTAL_RECALL_MACHINE_NAME")  # the default is the host name
    cli("note", "the staging database is reset every Monday", "--project", "/home/dev/repo")
    note = cli_json("search", "staging database reset", "--all-projects")[0]
    assert note["machine"] == socket.gethostname()


def test_an_export_from_another_machine_joins_the_same_repository_checked_out_elsewhere(
    tmp_path, monkeypatch
):
    laptop_repo = _checkout(tmp_path / "laptop-src" / "repo", "git@github.com:Org/Repo.git")
    desktop_repo = _checkout(tmp_path / "desktop-work" / "Repo", "https://github.com/Org/Repo")
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "laptop")
    _say(tmp_path, laptop_repo, "s-laptop", [("user", DECISION)])
    (tmp_path / "laptop.jsonl").write_text(cli("export").stdout, encoding="utf-8")

    desktop = tmp_path / "desktop"
    desktop.mkdir()
    isolate(desktop, monkeypatch)
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "desktop")
    _say(desktop, desktop_repo, "s-desktop", [("user", "Let's plan the release."), ("user", DECISION)])
    cli("import", str(tmp_path / "laptop.jsonl"))
    hits = [
        r
        for r in cli_json("search", "Caddy TLS", "--all-projects")
        if r["kind"] == "idea" and "Caddy" in r["content"]
    ]
    assert len(hits) == 1, hits  # one memory, said on two machines
    assert hits[0]["project"] == desktop_repo and hits[0]["mention_count"] == 2
    assert sorted((s["machine"], s["source_line"]) for s in hits[0]["sources"]) == [
        ("desktop", 2),
        ("laptop", 1),
    ]


# -- the same project on every machine: search scope, digests and dedup by identity --------------
THURSDAY = "We decided the release train leaves every Thursday."
MONDAY = "We decided the billing release train leaves every Monday."


def _found(query: str, cwd: str) -> str:
    """Everything a search from cwd (no --project, no --all-projects) returned, as one text."""
    return json.dumps(cli_json("search", query, cwd=cwd))


def _the_decision(cwd: str) -> list[dict]:
    return [
        r for r in cli_json("search", "Caddy TLS", cwd=cwd) if r["kind"] == "idea" and "Caddy" in r["content"]
    ]


def test_two_checkouts_of_one_repository_are_one_project_for_search_digests_and_dedup(
    tmp_path, monkeypatch, store
):
    """Two clones of one remote (as two machines' checkouts would be, here in one store): a search
    from either covers both, the SessionStart digest of one shows what was decided in the other,
    the same decision said in both is one memory, and a project with another remote stays apart."""
    laptop = _checkout(tmp_path / "laptop-src" / "app", "git@github.com:Org/App.git")
    desktop = _checkout(tmp_path / "desktop-work" / "App", "https://github.com/Org/App")
    other = _checkout(tmp_path / "billing", "git@github.com:Org/Billing.git")
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "laptop")
    _say(tmp_path, laptop, "s-laptop", [("user", DECISION), ("user", "The laptop runs the load tests.")])
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "desktop")
    _say(tmp_path, desktop, "s-desktop", [("user", THURSDAY), ("user", DECISION)])
    _say(tmp_path, other, "s-billing", [("user", MONDAY)])

    assert "Thursday" in _found("when does the release train leave", laptop)
    assert "Monday" not in _found("when does the release train leave", laptop)
    assert "load tests" in _found("who runs the load tests", desktop)
    assert "Thursday" not in _found("when does the release train leave", other)

    same = _the_decision(laptop)
    assert len(same) == 1 and same[0]["mention_count"] == 2, same
    assert sorted(
        (s["source_file"].rsplit("/", 1)[-1], s["source_line"], s["machine"]) for s in same[0]["sources"]
    ) == [("s-desktop.jsonl", 2, "desktop"), ("s-laptop.jsonl", 1, "laptop")]
    digest = cli("digest", cwd=laptop).stdout
    assert "Thursday" in digest and "Monday" not in digest and digest.count("# app") == 1, digest
    assert "Thursday" in _session_start(laptop) and "Monday" not in _session_start(laptop)
    assert "Monday" in _session_start(other) and "Thursday" not in _session_start(other)

    fresh = _checkout(tmp_path / "fresh-clone" / "app", "https://github.com/Org/App.git")
    (Path(fresh) / "src").mkdir()  # a clone nothing was said in yet, searched from a subfolder
    assert "Thursday" in _found("when does the release train leave", str(Path(fresh) / "src"))
    assert "Monday" not in _found("when does the release train leave", str(Path(fresh) / "src"))

    cli("forget", "--project", desktop)  # the project, in every checkout: the laptop's words too
    assert not _the_decision(laptop) and "load tests" not in _found("who runs the load tests", laptop)
    assert "Monday" in _found("billing release train", other)


def test_two_machines_sharing_one_store_see_one_project_in_their_own_checkouts(tmp_path, monkeypatch, pg_url):
    """Two homes (separate queues, daemons and digests, another [machine] name) on one PostgreSQL
    store, each with its own checkout of one repository at another path: the laptop's search finds
    the desktop's memory without --all-projects, its SessionStart digest shows the desktop's
    decision once its daemon follows the store, and the decision said on both is one memory."""
    from test_pgstore import _machine, _use

    laptop_repo = _checkout(tmp_path / "home-a" / "src" / "app", "git@github.com:Org/App.git")
    desktop_repo = _checkout(tmp_path / "home-b" / "work" / "app", "ssh://git@github.com:22/Org/App.git")
    billing = _checkout(tmp_path / "home-b" / "work" / "billing", "git@github.com:Org/Billing.git")
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
    _machine(tmp_path, monkeypatch, "laptop", pg_url)
    _say(laptop, laptop_repo, "s-laptop", [("user", DECISION), ("user", "The laptop runs the load tests.")])
    _machine(tmp_path, monkeypatch, "desktop", pg_url)
    _say(desktop, desktop_repo, "s-desktop", [("user", THURSDAY), ("user", DECISION)])
    _say(desktop, billing, "s-billing", [("user", MONDAY)])

    _use(laptop, monkeypatch, "laptop", pg_url)
    assert "Thursday" in _found("when does the release train leave", laptop_repo)
    assert "Monday" not in _found("when does the release train leave", laptop_repo)
    same = _the_decision(laptop_repo)
    assert len(same) == 1 and same[0]["mention_count"] == 2, same
    assert sorted((s["machine"], s["source_line"]) for s in same[0]["sources"]) == [
        ("desktop", 2),
        ("laptop", 1),
    ]
    assert "Thursday" not in _session_start(laptop_repo)  # written before the desktop said it
    with daemon_process(laptop / "laptop.log"):
        wait_for(lambda: "Thursday" in _session_start(laptop_repo), timeout=60)
    assert "Monday" not in _session_start(laptop_repo)
    assert "Caddy" in _session_start(laptop_repo)


def _worktree(repo: str, name: str) -> str:
    path = Path(repo) / ".claude" / "worktrees" / name  # where `claude --worktree` puts its worktrees
    subprocess.run(
        ["git", "-C", repo, "worktree", "add", "-q", "-b", name, str(path)], check=True, capture_output=True
    )
    return str(path)


def test_a_worktree_of_a_repository_without_a_remote_is_the_same_project(tmp_path, monkeypatch, store):
    """`claude --worktree` (and git worktree) sessions run in a linked worktree: without a remote it is
    the same repository, so a search or the SessionStart digest in the main checkout shows what was
    decided in the worktree, and the other way round; another local repository stays apart."""
    repo = str(git_repository(tmp_path / "app"))
    tree = _worktree(repo, "fix-tls")
    other = str(git_repository(tmp_path / "billing"))
    assert projects.identity(tree) == projects.identity(repo) == repo
    assert projects.identity(other) == other
    _say(tmp_path, tree, "s-worktree", [("user", DECISION)])
    _say(tmp_path, repo, "s-main", [("user", THURSDAY)])
    _say(tmp_path, other, "s-billing", [("user", MONDAY)])
    assert len(_the_decision(repo)) == 1
    assert "Thursday" in _found("when does the release train leave", tree)
    assert "Monday" not in _found("when does the release train leave", repo)
    assert "Caddy" in cli("digest", cwd=repo).stdout
    assert "Caddy" in _session_start(repo) and "Caddy" not in _session_start(other)
