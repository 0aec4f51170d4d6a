"""`total-recall mcp` driven over stdio by the MCP SDK's own client, as Claude Code would."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from helpers import cli, sqlite_connect, write_transcript

PROJECT = "/home/dev/projects/atlas"
START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=1)
TURNS = [
    ("user", "We decided to store the atlas data in PostgreSQL 16 with logical replication."),
    ("assistant", "The frontend is built with React and Vite; tests run with Vitest."),
    ("user", "The flaky login test is caused by a race on the session cookie."),
    ("assistant", "We fixed the flaky login test by waiting for the session cookie before clicking."),
]


def _params(cwd: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("TOTAL_RECALL_", "CLAUDE_"))}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "total_recall", "mcp"],
        env={**env, "CLAUDE_PROJECT_DIR": cwd},
        cwd=cwd,
    )


async def _session(cwd: str, steps):
    async with stdio_client(_params(cwd)) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return await steps(session, init)


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def test_initialize_list_search_note_then_find_the_note(tmp_path, store):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "mcp-sess.jsonl"
    write_transcript(path, TURNS, cwd=PROJECT, start=START, session="mcp-sess")
    cli("backfill", str(path), "--wait")

    async def steps(session: ClientSession, init):
        assert init.server_info.name == "total-recall"
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search", "get", "recent", "digest", "topics", "note"}
        for tool in tools.values():
            assert len(tool.description or "") > 40 and tool.input_schema["type"] == "object"
        assert {"query", "project", "session", "since", "until", "intent", "k"} <= set(
            tools["search"].input_schema["properties"]
        )

        found = await session.call_tool(
            "search", {"query": "what caused the flaky login test", "project": "atlas", "k": 3}
        )
        assert not found.is_error, _text(found)
        top = found.structured_content["results"][0]
        assert "race on the session cookie" in top["content"]
        assert f"{path}:{top['source_line']}" in _text(found) and top["source_line"] == 3

        one = await session.call_tool("get", {"id": top["id"]})
        assert one.structured_content["sources"][0]["excerpt"]
        assert f"{path}:3" in _text(one)

        stored = await session.call_tool(
            "note", {"text": "we chose Caddy over nginx for TLS", "intent": "decision", "session": "mcp-sess"}
        )
        assert not stored.is_error, _text(stored)
        again = await session.call_tool(
            "search", {"query": "which web server did we choose", "intent": "decision"}
        )
        assert again.structured_content["results"][0]["id"] == stored.structured_content["id"]
        assert "Caddy" in _text(again).splitlines()[0]

        for name, args in (
            ("recent", {}),
            ("digest", {"project": "atlas"}),
            ("topics", {"session": "mcp-sess"}),
        ):
            answer = await session.call_tool(name, args)
            assert not answer.is_error and _text(answer).strip(), name

        missing = await session.call_tool("get", {"id": 987654})
        assert missing.is_error and "no memory with id 987654" in _text(missing)
        bad = await session.call_tool("search", {"query": "x", "since": "last tuesday-ish"})
        assert bad.is_error and "since takes a date" in _text(bad)
        still = await session.call_tool("recent", {"days": 3})  # the server survived the errors
        assert not still.is_error

    anyio.run(_session, str(tmp_path), steps)


def test_a_missing_database_says_how_to_set_up(tmp_path, isolated_home):
    async def steps(session: ClientSession, init):
        answer = await session.call_tool("search", {"query": "anything"})
        assert answer.is_error and "total-recall up" in _text(answer)
        assert not (isolated_home / "memory.db").exists()  # asking never creates an empty database

    anyio.run(_session, str(tmp_path), steps)


@pytest.mark.parametrize("argv", [["--help"], ["mcp", "--help"], ["ui", "--help"]])
def test_help_loads_neither_the_mcp_sdk_nor_the_web_framework(argv):
    import json
    import subprocess

    code = (
        "import contextlib, io, json, sys\nimport total_recall.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        cli.main({argv!r})\n    except SystemExit:\n        pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'starlette', 'uvicorn', 'jinja2', 'pydantic'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_plugin_ships_the_server_in_its_mcp_config():
    import json

    from conftest import REPO
    from total_recall import cli as cli_module

    entry = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]["total-recall"]
    assert entry["command"] == "total-recall" and entry["args"] == ["mcp"]
    assert "mcp" in cli_module.COMMANDS


def test_search_over_a_real_transcript_points_at_the_line_it_came_from(
    tmp_path, fixture_transcripts, isolated_home
):
    import json
    import shutil

    shared = next(
        p for p in fixture_transcripts if p.name == "obra__episodic-memory__tiny-conversation.jsonl"
    )
    source = tmp_path / "claude" / "projects" / "-fixtures" / shared.name  # only the projects folder is read
    source.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared, source)
    cli("backfill", str(source), "--wait")
    with sqlite_connect(isolated_home / "memory.db") as conn:
        content, line = conn.execute(
            "SELECT content, source_line FROM ideas WHERE intent != 'context' "
            "ORDER BY length(content) DESC LIMIT 1"
        ).fetchone()
    raw = source.read_text(encoding="utf-8").splitlines()[line - 1]
    said = json.dumps(json.loads(raw).get("message", {}), ensure_ascii=False)
    assert any(word in said for word in content.split()[:8] if len(word) > 4)  # the line really says it

    async def steps(session: ClientSession, init):
        found = await session.call_tool("search", {"query": content, "all_projects": True, "k": 5})
        assert not found.is_error, _text(found)
        assert found.structured_content["results"][0]["source_line"] == line
        assert f"{source}:{line}" in _text(found).splitlines()[0]

    anyio.run(_session, str(tmp_path), steps)


def test_a_line_found_as_a_message_is_rendered_with_its_source(tmp_path):
    """A transcript line with no idea comes back as a `message` result (DESIGN.md I44); the tool
    answers with its role and file:line instead of failing (the e2e tests through Claude Code
    found `search` erroring on these)."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "msg-sess.jsonl"
    write_transcript(
        path,
        [("user", "Run the zanzibar-7 migration script."), ("assistant", "OK")],
        cwd=PROJECT,
        start=START,
        session="msg-sess",
    )
    cli("backfill", str(path), "--wait")

    async def steps(session: ClientSession, init):
        found = await session.call_tool("search", {"query": "OK", "all_projects": True, "k": 10})
        assert not found.is_error, _text(found)
        kinds = [r["kind"] for r in found.structured_content["results"]]
        assert "message" in kinds
        assert f"[assistant said] OK ({path}:2" in _text(found)
        # Its id is a line's, not a memory's: the `get` tool says so to the model that reads both.
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert (
            "of kind `message` is a transcript line"
            in tools["get"].input_schema["properties"]["id"]["description"]
        )

    anyio.run(_session, str(tmp_path), steps)


def test_two_lines_saying_the_same_text_are_one_result_that_names_both(tmp_path):
    """The same text at two lines (here an error pasted twice) is one result whose `sources` hold
    both places, and the tool's text names the second one (search.DUPLICATE_SHARE, I103)."""
    error = (
        "ERROR 2026-03-02 worker-7 psycopg.OperationalError: connection to server at 10.0.4.12 port "
        "5432 failed: FATAL remaining connection slots are reserved for roles with the SUPERUSER "
        "attribute while the nightly ledger export was still holding its pool"
    )
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "twin-sess.jsonl"
    write_transcript(
        path,
        [("user", error), ("assistant", "Raise max_connections?"), ("user", error)],
        cwd=PROJECT,
        start=START,
        session="twin-sess",
    )
    cli("backfill", str(path), "--wait")

    async def steps(session: ClientSession, init):
        found = await session.call_tool(
            "search", {"query": "remaining connection slots reserved ledger export", "all_projects": True}
        )
        assert not found.is_error, _text(found)
        lines = [r for r in found.structured_content["results"] if r["kind"] != "span"]
        holding = [r for r in lines if "connection slots" in r["content"]]
        assert len(holding) == 1
        assert {s["source_line"] for s in holding[0]["sources"]} == {1, 3}
        assert f"also at {path}:" in _text(found)

    anyio.run(_session, str(tmp_path), steps)


def test_an_intent_asked_for_lists_every_memory_of_that_kind_on_one_line(tmp_path):
    """`intent` asks for a kind as a question naming it would: a plan's todos said on one line are
    each a result. It filtered one result per line afterwards, so "credo" with intent todo listed
    one of the three credo todos of the list below."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "plan-sess.jsonl"
    plan = (
        "Todo list:\n- Add a credo config to the repo\n- Run credo in CI on every push\n"
        "- Fix the credo warnings in lib/atlas\n- Write the release notes"
    )
    write_transcript(
        path,
        [("user", "Plan the linting work."), ("assistant", plan)],
        cwd=PROJECT,
        start=START,
        session="plan",
    )
    cli("backfill", str(path), "--wait")

    async def steps(session: ClientSession, init):
        found = await session.call_tool("search", {"query": "credo", "intent": "todo", "all_projects": True})
        assert not found.is_error, _text(found)
        said = [r["content"] for r in found.structured_content["results"]]
        assert {r["intent"] for r in found.structured_content["results"]} == {"todo"}
        assert len([c for c in said if "credo" in c]) == 3, said

    anyio.run(_session, str(tmp_path), steps)


def test_an_unknown_project_or_intent_is_said_in_words_an_mcp_caller_can_use(tmp_path):
    """The errors a tool call gets name its own arguments (all_projects, intent), not only the CLI's
    flags ("try --all-projects", "--intent takes one of")."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "words-sess.jsonl"
    write_transcript(path, TURNS, cwd=PROJECT, start=START, session="words-sess")
    cli("backfill", str(path), "--wait")

    async def steps(session: ClientSession, init):
        missing = await session.call_tool("search", {"query": "caddy", "project": "nosuch"})
        assert missing.is_error and "all_projects" in _text(missing)
        wrong = await session.call_tool("note", {"text": "we chose Caddy", "intent": "wish"})
        assert wrong.is_error and "intent takes one of" in _text(wrong) and "--intent" not in _text(wrong)

    anyio.run(_session, str(tmp_path), steps)


def test_an_overview_over_mcp_reads_as_a_timeline(tmp_path):
    """ "In what order did we ..." over MCP: the topics and lines in the order they were said, as the
    CLI's text shows them, not best first."""
    claude = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas"
    steps = [  # newest first, in file name and in what they say of the question's words
        "We built the login features: the login form, login sessions and the login reset email.",
        "Login sessions now expire after thirty minutes of inactivity on the atlas web app.",
        "We added a form with email and password fields to the atlas web app.",
    ]
    for day, step in enumerate(steps):
        when = START - timedelta(days=5 + 5 * day)
        write_transcript(claude / f"login-{day}.jsonl", [("user", step)], cwd=PROJECT, start=when)
    cli("backfill", str(claude), "--wait")

    async def steps_(session: ClientSession, init):
        query = {"query": "In what order did we build the login features?", "project": "atlas"}
        return _text(await session.call_tool("search", query))

    text = anyio.run(_session, str(tmp_path), steps_)
    dates = [line.rsplit(", ", 1)[-1][:10] for line in text.splitlines() if line.endswith(")")]
    assert len(set(dates)) == 3 and dates == sorted(dates)
