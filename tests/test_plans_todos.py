"""Plans and todos from Claude Code's own tools, on a real fixture session.

The shared fixture `marot__spotter__subagent.jsonl` writes a plan file and calls ExitPlanMode; it
has no TodoWrite call, so the test appends two, in Claude Code's record format, to a copy of it:
one listing three pending todos, a later one marking them completed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from conftest import REPO
from helpers import cli, cli_json, db_rows

SESSION_FILE = "marot__spotter__subagent.jsonl"
PROJECT = "/home/marco/projects/spotter"
TODOS = ["Install Credo, Dialyxir and mix_audit via igniter", "Add the mix quality alias to mix.exs",
         "Document the dialyzer PLT cache in the README"]


def todo_write(line_no: int, statuses: list[str]) -> str:
    return json.dumps({
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": PROJECT,
        "sessionId": "491e126e-1e71-469c-ade2-fcc8af567c74", "version": "2.1.38", "gitBranch": "master",
        "type": "assistant", "uuid": f"00000000-0000-0000-0000-{line_no:012d}",
        "timestamp": f"2026-02-10T22:{10 + line_no % 40:02d}:00.000Z",
        "message": {"model": "claude-opus-4-6", "id": f"msg_todo_{line_no}", "type": "message", "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_todo_{line_no}", "name": "TodoWrite",
                                 "input": {"todos": [{"content": c, "status": s, "activeForm": c}
                                                     for c, s in zip(TODOS, statuses)]}}]}})


def session_start() -> str:
    payload = {"session_id": "next", "cwd": PROJECT, "hook_event_name": "SessionStart", "source": "startup"}
    return subprocess.run([sys.executable, "-I", "-S", str(REPO / "hooks" / "session_start.py")],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=30).stdout


def test_plan_and_todos_are_remembered_and_completed_todos_leave_the_digest(tmp_path, fixture_transcripts):
    source = next(p for p in fixture_transcripts if p.name == SESSION_FILE)
    path = tmp_path / "claude" / "projects" / "-home-marco-projects-spotter" / "491e126e.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    lines = path.read_text(encoding="utf-8").count("\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(todo_write(lines + 1, ["in_progress", "pending", "pending"]) + "\n")
    cli("backfill", str(path), "--wait")

    plan = db_rows("SELECT content FROM ideas WHERE intent = 'decision' AND content LIKE 'Plan:%'")
    assert plan == [("Plan: Setup Code Quality Tools (Credo, Dialyxir, mix_audit)",)]
    steps = {r[0] for r in db_rows("SELECT content FROM ideas WHERE intent = 'todo' AND source_line = 67")}
    assert "Add mix quality alias" in steps and "Install quality tools and configure Credo" in steps
    open_todos = {r[0] for r in db_rows("SELECT content FROM ideas WHERE intent = 'todo' "
                                        "AND closed_source_line IS NULL")}
    assert set(TODOS) <= open_todos
    assert not db_rows("SELECT content FROM ideas WHERE content LIKE '[tool %'")  # tool calls are not ideas
    assert TODOS[1] in session_start()

    with path.open("a", encoding="utf-8") as fh:
        fh.write(todo_write(lines + 2, ["completed", "completed", "completed"]) + "\n")
    cli("backfill", str(path), "--wait")

    closed = db_rows("SELECT content, closed_source_line FROM ideas WHERE content IN (?, ?, ?)", tuple(TODOS))
    assert sorted(closed) == sorted((t, lines + 2) for t in TODOS)  # one memory each, closed by that line
    start = session_start()
    digest = cli_json("digest", "spotter")["digest"]
    for todo in TODOS:
        assert todo not in start and todo not in digest
    left = cli_json("search", "what is left to do", "--project", "spotter")
    assert left and all(r["intent"] == "todo" and not r["closed"] for r in left if r["kind"] == "idea")
    assert not {r["content"] for r in left if r["kind"] == "idea"} & set(TODOS)
    # Closed todos stay searchable, marked done.
    found = cli_json("search", "mix quality alias", "--project", "spotter")
    assert any(r.get("content") == TODOS[1] and r["closed"] for r in found if r["kind"] == "idea")


def test_a_later_statement_that_the_work_is_done_closes_the_todo(tmp_path):
    from helpers import write_transcript

    path = tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl"
    write_transcript(path, [("user", "TODO: add a migration test for the entities table."),
                            ("assistant", "Noted.")], cwd="/home/dev/projects/shop")
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT closed_source_line FROM ideas WHERE intent = 'todo'") == [(None,)]
    write_transcript(path, [("user", "The migration test for the entities table is done now.")],
                     cwd="/home/dev/projects/shop", append=True)
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT closed_source_line FROM ideas WHERE intent = 'todo'") == [(3,)]
