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

import pytest

from conftest import REPO, SLOW_ON_POSTGRES
from helpers import cli, cli_json, db_rows

SESSION_FILE = "marot__spotter__subagent.jsonl"
PROJECT = "/home/marco/projects/spotter"
TODOS = [
    "Install Credo, Dialyxir and mix_audit via igniter",
    "Add the mix quality alias to mix.exs",
    "Document the dialyzer PLT cache in the README",
]


def todo_write(line_no: int, statuses: list[str]) -> str:
    return json.dumps(
        {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": PROJECT,
            "sessionId": "491e126e-1e71-469c-ade2-fcc8af567c74",
            "version": "2.1.38",
            "gitBranch": "master",
            "type": "assistant",
            "uuid": f"00000000-0000-0000-0000-{line_no:012d}",
            "timestamp": f"2026-02-10T22:{10 + line_no % 40:02d}:00.000Z",
            "message": {
                "model": "claude-opus-4-6",
                "id": f"msg_todo_{line_no}",
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_todo_{line_no}",
                        "name": "TodoWrite",
                        "input": {
                            "todos": [
                                {"content": c, "status": s, "activeForm": c} for c, s in zip(TODOS, statuses)
                            ]
                        },
                    }
                ],
            },
        }
    )


def session_start() -> str:
    payload = {"session_id": "next", "cwd": PROJECT, "hook_event_name": "SessionStart", "source": "startup"}
    return subprocess.run(
        [sys.executable, "-I", "-S", str(REPO / "hooks" / "session_start.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


@pytest.mark.parametrize("store", SLOW_ON_POSTGRES, indirect=True)  # PostgreSQL run: 3.4 s
def test_plan_and_todos_are_remembered_and_completed_todos_leave_the_digest(
    tmp_path, fixture_transcripts, store
):
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
    open_todos = {
        r[0]
        for r in db_rows("SELECT content FROM ideas WHERE intent = 'todo' AND closed_source_line IS NULL")
    }
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


def test_a_later_statement_that_the_work_is_done_closes_the_todo(tmp_path, store):
    from helpers import write_transcript

    path = tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl"
    write_transcript(
        path,
        [("user", "TODO: add a migration test for the entities table."), ("assistant", "Noted.")],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT closed_source_line FROM ideas WHERE intent = 'todo'") == [(None,)]
    write_transcript(
        path,
        [("user", "The migration test for the entities table is done now.")],
        cwd="/home/dev/projects/shop",
        append=True,
    )
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT closed_source_line FROM ideas WHERE intent = 'todo'") == [(3,)]


# --- Claude Code 2.1.x task tools (TaskCreate / TaskUpdate) -------------------------------------
# Lines shaped as the real CLI (2.1.197, tasks on by default) writes them: the assistant's tool_use,
# then a user line with its tool_result and `toolUseResult` (TaskCreate: {"task": {"id", "subject"}};
# TaskUpdate: {"success", "taskId", "updatedFields", "statusChange"}; neither result repeats a
# description, and a TaskUpdate's names no subject).

TASK_PROJECT = "/home/dev/projects/release"
TASK_SESSION = "081eaba7-9a26-42d1-9069-40f3b9197034"
TAG = ("Tag the 2.0 release in git", "Create the v2.0 tag on main and push it.")
ANNOUNCE = ("Announce the 2.0 release on the mailing list", "Announce the release on the list.")
CHANGELOG = ("Write the changelog for 2.0", "Summarise the merged pull requests.")
TAG_TODO = "Tag the 2.0 release in git — Create the v2.0 tag on main and push it."


class TaskSession:
    """Writes a Claude Code 2.1 session line by line, chaining uuids as the CLI does."""

    def __init__(self, path):
        self.path, self.parent, self.n = path, None, 0
        path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, record: dict) -> int:
        self.n += 1
        record = {
            "parentUuid": self.parent,
            "isSidechain": False,
            **record,
            "uuid": f"00000000-0000-4000-8000-{self.n:012d}",
            "timestamp": f"2026-11-23T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
            "userType": "external",
            "entrypoint": "sdk-cli",
            "cwd": TASK_PROJECT,
            "sessionId": TASK_SESSION,
            "version": "2.1.197",
            "gitBranch": "main",
        }
        self.parent = record["uuid"]
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        return sum(1 for _ in self.path.open(encoding="utf-8"))

    def prompt(self, text: str) -> int:
        return self._write(
            {
                "promptId": "p",
                "type": "user",
                "message": {"role": "user", "content": text},
                "permissionMode": "default",
                "promptSource": "sdk",
            }
        )

    def say(self, text: str) -> int:
        return self._write(
            {
                "message": {
                    "id": f"msg_{self.n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-4-8",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                },
                "requestId": "req",
                "type": "assistant",
            }
        )

    def call(self, name: str, args: dict, result: str, tool_use_result: dict | None) -> int:
        """One tool call and its result; the line number of the call."""
        tool = f"toolu_{self.n:04d}"
        line = self._write(
            {
                "message": {
                    "id": f"msg_{self.n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-4-8",
                    "stop_reason": "tool_use",
                    "content": [{"type": "tool_use", "id": tool, "name": name, "input": args}],
                },
                "requestId": "req",
                "type": "assistant",
            }
        )
        extra = {} if tool_use_result is None else {"toolUseResult": tool_use_result}
        self._write(
            {
                "promptId": "p",
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"tool_use_id": tool, "type": "tool_result", "content": result}],
                },
                **extra,
                "sourceToolAssistantUUID": self.parent,
            }
        )
        return line

    def create(self, task_id: str, subject: str, description: str) -> int:
        args = {"subject": subject, "description": description, "activeForm": f"Working on {subject}"}
        return self.call(
            "TaskCreate",
            args,
            f"Task #{task_id} created successfully: {subject}",
            {"task": {"id": task_id, "subject": subject}},
        )

    def update(self, task_id: str, status: str, before: str = "pending", **args) -> int:
        return self.call(
            "TaskUpdate",
            {"taskId": task_id, "status": status, **args},
            f"Updated task #{task_id} status",
            {
                "success": True,
                "taskId": task_id,
                "updatedFields": ["status"],
                "statusChange": {"from": before, "to": status},
            },
        )


def todos() -> dict[str, int | None]:
    """Every todo of the database: content -> the line that closed it (None while open)."""
    return dict(db_rows("SELECT content, closed_source_line FROM ideas WHERE intent = 'todo'"))


def test_task_tools_open_todos_and_a_later_completion_closes_them_after_a_restart(tmp_path, store):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-release" / f"{TASK_SESSION}.jsonl"
    s = TaskSession(path)
    s.prompt("Plan the 2.0 release.")
    s.create("1", *TAG)
    s.create("2", *ANNOUNCE)
    s.create("3", *CHANGELOG)
    s.say("Three steps are planned.")
    cli("backfill", str(path), "--wait")

    # The description is kept when it says more than the subject (TAG), dropped when not (ANNOUNCE).
    assert todos() == {TAG_TODO: None, ANNOUNCE[0]: None, CHANGELOG[0] + " — " + CHANGELOG[1]: None}
    assert not db_rows(
        "SELECT content FROM ideas WHERE content LIKE '%[tool %' OR content LIKE '%created success%'"
    )
    assert ANNOUNCE[0] in session_start_in(TASK_PROJECT)

    # A later turn, read by a later backfill (as after a daemon restart): the task ids it names
    # were learned by the earlier read.
    s.prompt("The release is tagged and announced; drop the changelog.")
    s.update("1", "in_progress")
    tagged = s.update("1", "completed", before="in_progress")
    s.update("3", "deleted")
    announced = s.update("2", "completed")
    s.say("Both are done.")
    cli("backfill", str(path), "--wait")

    changelog = CHANGELOG[0] + " — " + CHANGELOG[1]
    assert todos() == {
        TAG_TODO: tagged,
        ANNOUNCE[0]: announced,
        changelog: None,
    }  # deleted: nothing new, not done
    digest = cli_json("digest", "release")["digest"]
    assert TAG[0] not in digest and ANNOUNCE[0] not in digest and CHANGELOG[0] in digest
    found = cli_json("search", "mailing list announcement", "--project", "release")
    assert any(r.get("content") == ANNOUNCE[0] and r["closed"] for r in found if r["kind"] == "idea")


def session_start_in(project: str) -> str:
    payload = {"session_id": "next", "cwd": project, "hook_event_name": "SessionStart", "source": "startup"}
    return subprocess.run(
        [sys.executable, "-I", "-S", str(REPO / "hooks" / "session_start.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


def test_the_reader_renders_task_calls_as_todo_entries_whole_or_in_pieces(tmp_path):
    from total_recall.transcript import read_new

    s = TaskSession(tmp_path / "s.jsonl")
    s.prompt("Plan the 2.0 release.")
    s.create("1", *TAG)
    # A result without toolUseResult (older or trimmed records): its text names the id.
    s.call(
        "TaskCreate",
        {"subject": ANNOUNCE[0], "description": ANNOUNCE[1]},
        f"Task #2 created successfully: {ANNOUNCE[0]}",
        None,
    )
    s.prompt("Go on.")
    started = s.update("1", "in_progress")
    deleted = s.update("2", "deleted")
    tagged = s.update("1", "completed", before="in_progress")
    announced = s.update("2", "completed")
    renamed = s.update("9", "completed", subject="Publish the 2.0 docs")  # created where nobody saw it
    unknown = s.update("8", "completed")

    def entries(messages):
        return {m.line: m.text for m in messages if m.role == "assistant"}

    whole = read_new(s.path)
    lines = entries(whole.messages)
    assert lines[2] == f"[todos]\n- [pending] {TAG_TODO}\n[/todos]"
    assert lines[4] == f"[todos]\n- [pending] {ANNOUNCE[0]}\n[/todos]"
    for line in (started, deleted, unknown):
        assert lines[line] == "[tool TaskUpdate]"
    assert lines[tagged] == f"[todos]\n- [completed] {TAG_TODO}\n[/todos]"
    assert lines[announced] == f"[todos]\n- [completed] {ANNOUNCE[0]}\n[/todos]"
    assert lines[renamed] == "[todos]\n- [completed] Publish the 2.0 docs\n[/todos]"

    # Read in pieces, one line at a time, each read continuing from the last: the same text.
    pieces, offset, line = [], 0, 0
    while True:
        part = read_new(s.path, offset, line, max_bytes=1)
        if part.end_offset == offset:
            break
        pieces += part.messages
        offset, line = part.end_offset, part.end_line
    assert entries(pieces) == lines
