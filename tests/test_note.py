"""Explicit memory (`total-recall note`): stored with its session and project, searchable at once."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from helpers import cli, cli_json, db_rows, write_transcript

pytestmark = pytest.mark.usefixtures("store")  # every test on SQLite and on PostgreSQL

PROJECT = "/home/dev/projects/atlas"
START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=2)
TURNS = [
    ("user", "We decided to store the atlas data in PostgreSQL 16 with logical replication."),
    ("assistant", "The frontend is built with React and Vite; tests run with Vitest."),
    ("user", "The deploy pipeline pushes Docker images to the GitLab registry on every tag."),
    ("assistant", "We fixed the flaky login test by waiting for the session cookie."),
    ("user", "Remember that we chose Caddy over nginx for TLS."),
]


def _indexed_session(tmp_path):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "sess-note.jsonl"
    write_transcript(path, TURNS, cwd=PROJECT, start=START, session="sess-note")
    cli("backfill", str(path), "--wait")
    return path


def test_a_note_is_found_at_rank_one_in_its_project_with_its_session_and_line(tmp_path):
    path = _indexed_session(tmp_path)
    stored = cli_json(
        "note", "we chose Caddy over nginx for TLS", "--intent", "decision", "--session", "sess-note"
    )
    assert (
        stored["intent"] == "decision" and stored["project"] == PROJECT and stored["session"] == "sess-note"
    )
    assert stored["source_file"] == str(path) and stored["source_line"] == len(TURNS)
    assert stored["searchable_by_vector"] is True
    results = cli_json("search", "which web server did we choose", "--project", "atlas")
    assert results[0]["id"] == stored["id"], [r["content"] for r in results]
    assert "idea_vec" in results[0]["matched_by"]  # embedded at once: no daemon ran a repair pass


def test_a_note_given_a_short_session_id_belongs_to_that_session(tmp_path):
    """`--session` takes the short id results and topics print, as search and topics do: stored as
    typed, it named no session (search --session did not find the note, and its project was the
    current folder's). An id of no indexed session is kept as given (the session /memorize runs in
    may not be indexed yet); a prefix of two sessions is refused."""
    path = _indexed_session(tmp_path)
    other = path.with_name("sess-other.jsonl")
    write_transcript(other, TURNS[:1], cwd=PROJECT, start=START, session="sess-other")
    cli("backfill", str(other), "--wait")
    stored = cli_json("note", "the okapi refactor waits for the release", "--session", "sess-n")
    assert stored["session"] == "sess-note" and stored["project"] == PROJECT
    assert stored["source_file"] == str(path)
    found = cli_json("search", "okapi refactor", "--session", "sess-n")
    assert [r["id"] for r in found if r["kind"] == "idea"][:1] == [stored["id"]]
    assert (
        cli_json("note", "a thought for a new session", "--session", "brand-new-id")["session"]
        == "brand-new-id"
    )
    ambiguous = cli("note", "which one?", "--session", "sess-", check=False)
    assert ambiguous.returncode != 0 and "ambiguous" in ambiguous.stderr


def test_a_note_reads_its_session_transcript_only_as_the_daemon_would(tmp_path):
    """`note --session` (the MCP `note` tool too) counts the lines the conversation has reached in
    the session's transcript, opened as the daemon opens one: lines written since the last batch
    count; a transcript replaced by a symlink to an outside file, a FIFO or a device is not read (the
    note stays on the last indexed line), and nothing blocks."""
    path = _indexed_session(tmp_path)
    write_transcript(path, TURNS[:2], cwd=PROJECT, start=START, session="sess-note", append=True)
    assert (
        cli_json("note", "we chose Caddy for TLS", "--session", "sess-note")["source_line"] == len(TURNS) + 2
    )
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n" * 777)
    path.unlink()
    path.symlink_to(outside)
    assert cli_json("note", "we chose Vite", "--session", "sess-note")["source_line"] == len(TURNS)
    for special in ("fifo", "/dev/zero"):
        path.unlink()
        os.mkfifo(path) if special == "fifo" else path.symlink_to(special)
        done = cli(
            "note", f"we chose {special}", "--session", "sess-note", "--json", process=True, timeout=60
        )
        assert json.loads(done.stdout)["source_line"] == len(TURNS)


def test_a_note_without_a_session_belongs_to_the_current_project_and_can_be_pinned(tmp_path):
    _indexed_session(tmp_path)
    work = tmp_path / "checkout"
    work.mkdir()
    stored = cli_json(
        "note",
        "Release",
        "notes",
        "live in CHANGES.md",
        "--intent",
        "todo",
        "--pin",
        "--project",
        "atlas",
        cwd=str(work),
    )
    assert stored["pinned"] is True and stored["project"] == PROJECT
    assert stored["source_file"] == "total-recall-note" and stored["source_line"] == 1
    again = cli_json("note", "the staging database is reset every Monday", "--project", "atlas")
    assert again["source_line"] == 2 and again["intent"] == "context"
    blank = cli_json(
        "note", "the wiki lives in Notion", "--session", "", "--project", "atlas"
    )  # unexpanded id
    assert blank["session"] is None and blank["source_line"] == 3
    digest = cli("digest", "atlas").stdout
    assert "Release notes live in CHANGES.md" in digest.split("## Pinned")[1]


def test_bad_notes_are_refused_with_a_clear_message(tmp_path):
    empty = cli("note", "   ", check=False)
    assert empty.returncode == 1 and "the note is empty" in empty.stderr
    wrong = cli("note", "x", "--intent", "rumour", check=False)
    assert wrong.returncode == 2 and "--intent" in wrong.stderr


def test_forgetting_a_note_of_a_session_forgets_the_note_not_the_line_it_was_written_at(tmp_path):
    """A note attached to a session cites the line the conversation had reached. Forgetting the note
    takes its words from every row, and leaves that line, which said something else: its words,
    its window, no tombstone on it, its record not marked forgotten (I209)."""
    path = _indexed_session(tmp_path)
    stored = cli_json("note", "note about zebraword", "--session", "sess-note")
    line = stored["source_line"]
    said = db_rows(
        "SELECT content, uuid FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?) "
        "AND source_line = ?",
        (str(path), line),
    )
    assert said and said[0][0]
    dry = cli_json("forget", str(stored["id"]), "--dry-run")
    assert dry["messages"] == 0
    cli_json("forget", str(stored["id"]))
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%zebraword%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%zebraword%'") == [(0,)]
    assert (
        db_rows(
            "SELECT content, uuid FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?) "
            "AND source_line = ?",
            (str(path), line),
        )
        == said
    )
    assert db_rows("SELECT count(*) FROM tombstones WHERE kind = 'line'") == [(0,)]
    assert db_rows("SELECT count(*) FROM forgotten_records") == [(0,)]
    assert not any("zebraword" in r["content"] for r in cli_json("search", "zebraword", "--all-projects"))


def test_nothing_is_noted_while_paused_nor_for_a_forgotten_session(tmp_path):
    """A pause covers notes too: the CLI's and the MCP tool's (one function), which Claude may call in
    a paused conversation; after `resume` notes are taken again. A forgotten session takes no note
    (I210)."""
    path = _indexed_session(tmp_path)
    cli("pause")
    paused = cli("note", "the merger closes Friday", "--session", "sess-note", check=False)
    assert paused.returncode != 0 and "paused" in paused.stderr
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%merger%'") == [(0,)]
    cli("resume")
    assert cli_json("note", "the merger closes Friday")["content"] == "the merger closes Friday"
    cli_json("forget", "--session", "sess-note")
    late = cli("note", "one more thing about it", "--session", "sess-note", check=False)
    assert late.returncode != 0 and "forgotten" in late.stderr
    assert db_rows("SELECT count(*) FROM ideas WHERE session_id = 'sess-note'") == [(0,)]
    assert path.exists()


def test_notes_at_one_line_are_forgotten_one_at_a_time_and_outlive_the_lines_memory(tmp_path):
    """Two notes at the line the conversation had reached, one with a lead-in the memory drops
    ("Remember: ..."): each has its own window; forgetting one takes only it (the line and the other
    note stay), and forgetting the line's own memory leaves both notes whole (I209)."""
    path = _indexed_session(tmp_path)
    first = cli_json("note", "the deploy window is friday", "--session", "sess-note")
    second = cli_json("note", "Remember: the staging box is called kestrel-7.", "--session", "sess-note")
    line = first["source_line"]
    assert second["source_line"] == line
    windows = db_rows("SELECT count(*) FROM chunks WHERE kind = 'note'")
    assert windows == [(2,)]
    cli_json("forget", str(second["id"]))
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%kestrel%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM tombstones WHERE kind = 'line'") == [(0,)]
    said = db_rows(
        "SELECT id FROM ideas WHERE file_id = (SELECT id FROM files WHERE path = ?) AND source_line = ? "
        "AND content NOT LIKE '%friday%'",
        (str(path), line),
    )
    assert said  # the line's own memory
    cli_json("forget", str(said[0][0]))
    kept = db_rows(
        "SELECT i.content, count(s.idea_id) FROM ideas i JOIN idea_sources s ON s.idea_id = i.id "
        "WHERE i.id = ? GROUP BY i.id",
        (first["id"],),
    )
    assert kept == [("the deploy window is friday", 1)]
    assert db_rows("SELECT count(*) FROM chunks WHERE kind = 'note'") == [(1,)]


def test_a_note_that_names_a_secret_hides_it_where_it_was_said_bare_before(tmp_path):
    """The conversation said "Tulip-Gate-8842" bare; a note then names it a secret: the note is
    redacted, and so is every row that held the value before (I216)."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "sess-bare.jsonl"
    write_transcript(path, [("user", "We decided we use Tulip-Gate-8842 as the staging login.")], cwd=PROJECT)
    cli("backfill", str(path), "--wait")
    stored = cli_json("note", "set API_TOKEN=Tulip-Gate-8842 in the vault", "--project", PROJECT)
    assert "Tulip-Gate-8842" not in stored["content"]
    for table in ("messages", "chunks", "ideas"):
        assert db_rows(f"SELECT count(*) FROM {table} WHERE content LIKE '%Tulip-Gate-8842%'") == [(0,)]
