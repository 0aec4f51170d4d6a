"""One memory across machines (issue 19): every source records the machine it was said on, and a
project is the same project wherever it is checked out when its git remote is the same."""

from __future__ import annotations

import socket
from datetime import datetime, timedelta, timezone

from conftest import isolate
from helpers import cli, cli_json, write_transcript

START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=2)
DECISION = "We decided to terminate TLS with Caddy instead of nginx."


def _checkout(path, remote: str) -> str:
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n', encoding="utf-8")
    return str(path)


def _say(base, project: str, session: str, turns) -> None:
    path = base / "claude" / "projects" / "-repo" / f"{session}.jsonl"
    write_transcript(path, turns, cwd=project, start=START, session=session)
    cli("backfill", str(path), "--wait")


def test_search_shows_the_machine_next_to_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TOTAL_RECALL_MACHINE_NAME", "laptop")
    _say(tmp_path, "/home/dev/repo", "s-laptop", [("user", DECISION)])
    result = cli_json("search", "Caddy TLS", "--all-projects")[0]
    assert result["machine"] == "laptop" and result["sources"][0]["machine"] == "laptop"
    assert result["source_line"] == 1
    text = cli("search", "Caddy TLS", "--all-projects").stdout
    assert f"{result['source_file']}:1 on laptop" in text

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
