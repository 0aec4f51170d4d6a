"""Retrieval and the skills that expose it: time filters, --queries, SKILL.md validity."""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime, timedelta, timezone

import pytest

from conftest import REPO, STORES, isolate, new_pg_database, pg_database_name, use_copy_of
from helpers import cli, cli_json, write_transcript
from total_recall import cli as cli_module

PROJECT = "/home/dev/projects/atlas"
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def index(claude_dir, name, turns, start):
    path = claude_dir / "projects" / "-home-dev-projects-atlas" / f"{name}.jsonl"
    write_transcript(path, turns, cwd=PROJECT, start=start)
    cli("backfill", str(path), "--wait")
    return path


@pytest.fixture(scope="module", params=STORES)
def two_sessions_indexed(request, tmp_path_factory):
    """Two sessions backfilled once for the module by the real CLI, on each store; every test takes
    a copy (of the home and, on PostgreSQL, of the database: CREATE DATABASE ... TEMPLATE)."""
    base = tmp_path_factory.mktemp("two-sessions")
    template = None
    with pytest.MonkeyPatch.context() as mp:
        home = isolate(base, mp)
        if request.param == "postgres":
            template = new_pg_database(request.getfixturevalue("pg_server"))
            mp.setenv("TOTAL_RECALL_STORE_URL", template)
        claude = base / "claude"
        old = index(
            claude,
            "old",
            [("user", "We decided to deploy the atlas API with Docker Compose.")],
            NOW - timedelta(days=40),
        )
        new = index(
            claude,
            "new",
            [("user", "We decided to deploy the atlas API with Kubernetes Helm charts.")],
            NOW - timedelta(hours=30),
        )
    return home, old, new, template


@pytest.fixture
def two_sessions(two_sessions_indexed, isolated_home, monkeypatch, request):
    home, old, new, template = two_sessions_indexed
    use_copy_of(home, isolated_home)
    if template:
        server = request.getfixturevalue("pg_server")
        monkeypatch.setenv("TOTAL_RECALL_STORE_URL", new_pg_database(server, pg_database_name(template)))
    return old, new


def test_time_filter_excludes_older_sessions(two_sessions):
    old, new = two_sessions
    everything = cli_json("search", "how do we deploy the atlas API", "--project", "atlas")
    assert {r["source_file"] for r in everything if r["kind"] == "idea"} == {str(old), str(new)}
    recent = cli_json("search", "how do we deploy the atlas API last week", "--project", "atlas")
    assert recent and {r["source_file"] for r in recent} == {str(new)}
    since = (NOW - timedelta(days=10)).strftime("%Y-%m-%d")
    assert {r["source_file"] for r in cli_json("search", f"deploy since {since}", "--project", "atlas")} == {
        str(new)
    }
    before = cli_json("search", f"deploy before {since}", "--project", "atlas")
    assert before and {r["source_file"] for r in before} == {str(old)}
    # nothing in the window: the dates are named and matches from any time are shown
    later = (NOW + timedelta(days=1)).strftime("%Y-%m-%d")
    answer = cli("search", f"Docker Compose deploy since {later}", "--project", "atlas")
    assert f"nothing said since {later} matches" in answer.stderr and "Docker Compose" in answer.stdout


def test_where_did_we_leave_off_recaps_the_session_before_this_one(store, tmp_path):
    """Asking "where did we leave off" (I98): the latest session other than the one asking (the /remember
    skill passes it) is searched, its last lines newest first and what was settled or left open
    before what was merely said, with a note naming it; with no asking session named, the latest
    session; with a subject, every session, its latest mentions first."""
    claude = tmp_path / "claude"
    old = index(
        claude,
        "old",
        [
            ("user", "Let's look at the flaky login test first."),
            ("assistant", "The login test waited on a fixed sleep; it now waits for the redirect."),
            ("user", "Good. We decided to move the session cache from Memcached to Redis."),
            ("assistant", "Next step: migrate the remaining cache keys to Redis tomorrow."),
        ],
        NOW - timedelta(days=3),
    )
    with old.open("a", encoding="utf-8") as fh:  # its title, as the user named it (`/rename`)
        fh.write(
            json.dumps({"type": "custom-title", "sessionId": "old", "customTitle": "Login test, cache"})
            + "\n"
        )
    cli("backfill", str(old), "--wait")
    new = index(claude, "new", [("user", "where did we leave off")], NOW - timedelta(minutes=5))

    asked = cli(
        "search", "where did we leave off", "--project", "atlas", "--current-session", "new", "--json"
    )
    recap = json.loads(asked.stdout)
    assert "searched the session before this one: old (Login test, cache)" in asked.stderr
    assert recap and {r["source_file"] for r in recap} == {str(old)}
    assert recap[0]["source_line"] == 4 and "migrate the remaining cache keys" in recap[0]["content"]
    assert [r["source_line"] for r in recap[:2]] == [4, 3]  # the newest first

    latest = cli("search", "where did we leave off", "--project", "atlas", "--json")
    assert "searched the session: new" in latest.stderr
    assert {r["source_file"] for r in json.loads(latest.stdout)} == {str(new)}

    subject = cli("search", "where did we leave off with the login test", "--project", "atlas", "--json")
    assert "searched the session" not in subject.stderr
    assert "login test" in json.loads(subject.stdout)[0]["content"]

    # With an LLM endpoint, a recap asks it nothing: there is no answer for HyDE to imagine.
    from fake_openai import FakeOpenAI

    with FakeOpenAI(chat="We were migrating the cache.") as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        mp.setenv("TOTAL_RECALL_LLM_MODEL", "hyde-test")
        again = cli_json("search", "where did we leave off", "--project", "atlas", "--current-session", "new")
        assert srv.requests_to("/chat/completions") == []
    assert [r["source_line"] for r in again] == [r["source_line"] for r in recap]


def test_a_kind_filter_whose_memories_miss_the_topic_shows_what_was_said_about_it(store, tmp_path):
    """A query that opens with a kind ("problems with dialyzer") filters to it; when no memory of
    that kind mentions the topic, a note says so and what was said about the topic is shown, that
    kind first. The verb that frames a question ("what errors did we hit") is not a topic."""
    index(
        tmp_path / "claude",
        "s",
        [
            ("user", "The deploy fails with a TLS handshake error on the staging box."),
            ("assistant", "Fixed by renewing the staging certificate with certbot."),
            ("user", "We run Dialyzer in CI on every pull request."),
        ],
        NOW - timedelta(days=2),
    )
    missing = cli("search", "problems with dialyzer", "--project", "atlas", "--json")
    assert "no problem memory mentions dialyzer: showing what was said about it" in missing.stderr
    assert any("Dialyzer" in r["content"] for r in json.loads(missing.stdout))

    framed = cli("search", "what errors did we hit", "--project", "atlas", "--json")
    assert "mentions" not in framed.stderr
    found = json.loads(framed.stdout)
    assert found and {r["intent"] for r in found} == {"problem"} and "TLS handshake" in found[0]["content"]


def test_asking_for_todos_still_open_lists_the_open_todos_not_what_was_said_about_open(store, tmp_path):
    """ "What todos are still open" over a session with an open todo, a closed one and a line that
    says "open": the open todo, not the closed one, and no note that no todo mentions "still open"
    (which would show the line about the open port instead)."""
    index(
        tmp_path / "claude",
        "s",
        [
            ("user", "TODO: add a migration test for the entities table."),
            ("user", "TODO: write the changelog for the 2.0 release."),
            ("assistant", "Port 5432 is still open on the staging firewall."),
            ("user", "The changelog for the 2.0 release is done now."),
        ],
        NOW - timedelta(days=1),
    )
    for text in ("what todos are still open", "which todos are not done yet"):
        out = cli("search", text, "--project", "atlas", "--json")
        assert "mentions" not in out.stderr, text
        found = json.loads(out.stdout)
        assert [r["content"] for r in found if r["kind"] == "idea"] == [
            "TODO: add a migration test for the entities table."
        ], text
        assert not any("5432" in (r.get("content") or "") for r in found), text


def test_unresolved_problems_leaves_out_the_problems_a_fix_was_given_for(store, tmp_path):
    """ "Unresolved problems" lists the problems no solution answered; "problems" lists both, each
    flagged: "fix given" or "open"."""
    index(
        tmp_path / "claude",
        "s",
        [
            ("user", "The deploy fails with a TLS handshake error on the staging box."),
            ("assistant", "Fixed it by renewing the staging certificate with certbot."),
            ("user", "Also the CSV export crashes on empty rows."),
            ("assistant", "I will look at the export tomorrow."),
        ],
        NOW - timedelta(days=1),
    )
    for text in ("unresolved problems", "which problems are still open"):
        found = cli_json("search", text, "--project", "atlas")
        assert [r["content"] for r in found if r["kind"] == "idea"] == [
            "Also the CSV export crashes on empty rows."
        ], text
    shown = cli("search", "problems", "--project", "atlas").stdout
    assert "TLS handshake error on the staging box. (fix given)" in shown
    assert "crashes on empty rows. (open)" in shown


def test_a_kind_asked_for_with_nothing_else_lists_its_memories_newest_first_every_one_of_a_line(
    store, tmp_path
):
    """ "Todos" and "latest decisions" name a kind and nothing else: the kind's memories, newest
    first, and several of one line when the line holds several (a plan's steps are one message);
    "latest" is not a word a decision must say."""
    index(
        tmp_path / "claude",
        "older",
        [("user", "We decided to use Postgres for the job queue."), ("assistant", "Noted.")],
        NOW - timedelta(days=9),
    )
    index(
        tmp_path / "claude",
        "newer",
        [
            ("user", "We decided to ship the CLI as a single binary."),
            ("user", "TODO: tag the release.\nTODO: write the changelog.\nTODO: announce it on the list."),
        ],
        NOW - timedelta(days=2),
    )
    todos = cli_json("search", "todos", "--project", "atlas", "-k", "5")
    assert [r["content"] for r in todos] == [
        "TODO: tag the release.",
        "TODO: write the changelog.",
        "TODO: announce it on the list.",
    ]
    assert len({r["source_line"] for r in todos}) == 1  # one message, three memories
    latest = cli("search", "latest decisions", "--project", "atlas", "--json")
    assert "mentions" not in latest.stderr
    assert [r["content"] for r in json.loads(latest.stdout)] == [
        "We decided to ship the CLI as a single binary.",
        "We decided to use Postgres for the job queue.",
    ]


def test_a_question_that_names_only_a_time_shows_what_was_settled_and_said_then(store, tmp_path):
    """ "What did we do in <month>" when that month of this year holds nothing and the same month a
    year before does: a note says so and that month's memories are shown, what was settled first, no
    note that no line says the month's name. "What did we do yesterday" with nothing said yesterday
    answers nothing and names the day of the latest memory, instead of lines from any time."""
    when = NOW - timedelta(days=400)
    month = when.strftime("%B")
    index(
        tmp_path / "claude",
        "past",
        [
            ("user", "Let me look at the flaky upload test first."),
            ("user", "We decided to retry uploads three times with backoff."),
        ],
        when,
    )
    out = cli("search", f"what did we do in {month}", "--project", "atlas", "--json")
    assert f"showing {month} {when.year}" in out.stderr
    assert "says" not in out.stderr
    found = json.loads(out.stdout)
    assert found and found[0]["content"] == "We decided to retry uploads three times with backoff."
    assert all(r["timestamp"].startswith(when.strftime("%Y-%m")) for r in found)

    empty = cli("search", "what did we do yesterday", "--project", "atlas", "--json")
    assert json.loads(empty.stdout) == []
    assert f"the latest line of this scope was said on {when.strftime('%Y-%m-%d')}" in empty.stderr


def test_a_date_no_calendar_has_is_searched_as_words_and_recent_days_are_bounded(store, tmp_path):
    """ "since 2026-02-30", "in December 9999", "the last 99999999 days": no date, so no time filter,
    and the search answers (it raised ValueError / OverflowError in the CLI, the MCP server and the
    web view). `recent --days` takes 1 to 36500 and says so otherwise."""
    index(tmp_path / "claude", "s", [("user", "We use Credo for linting.")], NOW - timedelta(days=1))
    for query in (
        "credo since 2026-02-30",
        "credo since 2026-13-45",
        "credo in december 9999",
        "credo the last 99999999 days",
        "credo the last 99999999999999999 days",
        "what did we do on 2026-02-31 with credo",
    ):
        found = cli("search", query, "--project", "atlas", "--json")
        assert found.returncode == 0 and "Credo" in json.loads(found.stdout)[0]["content"], query
    for days in ("0", "-5", "99999999", "x"):
        out = cli("recent", "--days", days, check=False)
        assert out.returncode == 2 and "takes a number of days from 1 to 36500" in out.stderr, days
    assert cli("recent", "--days", "36500").returncode == 0


def test_a_telling_word_never_said_is_named_even_when_other_words_match(store, tmp_path):
    """ "Did we ever use kubernetes?" over sessions that say "use" but never "kubernetes": the lines
    that say "use" come back, with a note that no line or memory says kubernetes, so they do not read
    as an answer. A word that is said, though not in the results shown, is not named."""
    index(
        tmp_path / "claude",
        "s",
        [
            ("user", "We use Postgres for the job queue and run it in Docker."),
            ("assistant", "Good: Docker keeps the setup close to production."),
        ],
        NOW - timedelta(days=1),
    )
    out = cli("search", "did we ever use kubernetes?", "--project", "atlas", "--json")
    assert "no line or memory in this scope says kubernetes: showing what matches the rest" in out.stderr
    assert json.loads(out.stdout)
    said = cli("search", "did we use postgres in docker", "--project", "atlas", "-k", "1", "--json")
    assert "says" not in said.stderr
    # a common word never said ("weekends") is not worth a note; the telling one is named alone
    common = cli("search", "did we run kubernetes on weekends", "--project", "atlas", "--json")
    assert "no line or memory in this scope says kubernetes: showing" in common.stderr
    # A key pasted into a search is not echoed back, not even as the lower-case pieces its words are
    key = "sk-proj-" + "Qw3rTy9UiOp2AsDf5GhJk7LzXcVb1NmQw3rTy9UiOp2AsDf5GhJk7LzXcVb1NmQ4"
    pasted = cli("search", f"did we ever use {key}", "--project", "atlas", "--json")
    assert json.loads(pasted.stdout) and "qw3rty" not in pasted.stderr.lower() and "proj" not in pasted.stderr
    assert "says some of the query's words" in pasted.stderr
    # nor is a pasted page named word by word: six words at most
    many = " ".join(f"zorblax{n}" for n in range(40))
    listed = cli("search", many, "--project", "atlas", "--json").stderr
    assert "zorblax5 or …" in listed and "zorblax6" not in listed


def test_a_time_asked_for_alone_finds_a_session_that_left_no_memory_and_a_recap_skips_bare_tool_calls(
    store, tmp_path
):
    """A session whose only record is a compaction summary leaves no memory, yet "what did we do on
    <its day>" finds its summary (the window's lines are searched with its memories). A recap of the
    last session does not open with a line that is only a tool call ("[tool Read: app.js]")."""
    from helpers import record

    when = NOW - timedelta(days=5)
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "compacted.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = record(
        "user",
        "This session is being continued from a previous conversation that ran out of context. Summary: "
        "1. We moved the billing export from CSV to Parquet files and backfilled March.",
        session="compacted",
        cwd=PROJECT,
        when=when,
    )
    path.write_text(json.dumps({**summary, "isCompactSummary": True}) + "\n", encoding="utf-8")
    cli("backfill", str(path), "--wait")
    day = when.strftime("%B %-d, %Y")
    found = cli("search", f"what did we do on {day}", "--project", "atlas", "--json")
    assert "nothing was" not in found.stderr
    assert any("Parquet" in r["content"] for r in json.loads(found.stdout))

    index(
        tmp_path / "claude",
        "later",
        [("user", "Why does the upload page hang?"), ("assistant", "[tool Read: assets/js/app.js]")],
        NOW - timedelta(days=1),
    )
    recap = cli_json("search", "where did we leave off", "--project", "atlas")
    assert recap and not recap[0]["content"].startswith("[tool ")


SUMMARY = """This session is being continued from a previous conversation that ran out of context. \
The summary below covers the earlier portion of the conversation.

Analysis:
1. **Initial Request**: the user asked to add tracing to the upload service.

Summary:
1. Primary Request and Intent:
   The user asked to add OpenTelemetry tracing to the upload service, one task after another.

2. Key Technical Concepts:
   - W3C trace context propagation

4. Errors and fixes:
   - **KeyError in the exporter config**: the nested processor list was wrong. Fixed by using the flat
     `traces_exporter: :stdout` setting.
   - **Flaky upload test (UNRESOLVED)**: the retry test times out on CI. Attempted fixes that all failed:
     - Raising the timeout
     - Mocking the clock

6. All user messages:
   - "Add tracing to the upload service"

7. Pending Tasks:
   - **atlas-7.2**: Trace the thumbnail worker's queue consumer
   - **atlas-7.3**: Write the tracing runbook for on-call

8. Current Work:
   I was making the retry test pass before committing the exporter change.

9. Optional Next Step:
   Fix the flaky retry test, then commit the exporter change.
"""


def test_a_compaction_summary_is_remembered_by_its_sections(store, tmp_path):
    """A compaction summary is the one place that says what is still to do and which error is still
    unresolved: its Pending Tasks and Next Step are todos, an unresolved error a problem, a fixed one
    a solution, each pointing at the summary's own line (no extractor call: the template's numbered
    sections are read). Concepts and the list of user messages add nothing; read again, nothing is
    stored twice. A later summary closes the todos an earlier one listed and it does not."""
    from helpers import record

    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "traced.jsonl"
    write_transcript(
        path, [("user", "Add tracing to the upload service")], cwd=PROJECT, start=NOW - timedelta(days=2)
    )
    summary = record("user", SUMMARY, session="traced", cwd=PROJECT, when=NOW - timedelta(days=1))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**summary, "isCompactSummary": True, "isVisibleInTranscriptOnly": True}) + "\n")
    cli("backfill", str(path), "--wait")

    def ideas():
        records = [json.loads(line) for line in cli("export").stdout.splitlines()]
        return [r["content"] for r in records if r["kind"] == "idea"]

    found = cli_json("search", "todos", "--project", "atlas")
    todos = [r["content"] for r in found if r.get("intent") == "todo"]
    assert "atlas-7.2: Trace the thumbnail worker's queue consumer" in todos
    assert "atlas-7.3: Write the tracing runbook for on-call" in todos
    assert "Fix the flaky retry test, then commit the exporter change." in todos
    assert all(r["source_line"] == 2 for r in found if r.get("intent") == "todo")
    problems = cli_json("search", "which problems are still unresolved", "--project", "atlas")
    assert problems[0]["content"].startswith(
        "Flaky upload test (UNRESOLVED): the retry test times out on CI."
    )
    assert "Raising the timeout; Mocking the clock" in problems[0]["content"]
    fixed = cli_json("search", "how did we fix the KeyError in the exporter config", "--project", "atlas")
    assert (
        fixed[0]["intent"] == "solution" and "Fixed by using the flat traces_exporter" in fixed[0]["content"]
    )
    said = ideas()
    assert not any("W3C" in c or c.startswith('"Add tracing') or "Initial Request" in c for c in said)
    assert len([c for c in said if c.startswith("atlas-7.2")]) == 1
    cli("backfill", str(path), "--wait")
    assert sorted(ideas()) == sorted(said)

    # A later summary lists what is pending as of then: the tasks it no longer lists were done or
    # given up, and are closed at its line; the one it lists again stays open (one memory).
    later = SUMMARY.split("7. Pending Tasks:")[0] + (
        "7. Pending Tasks:\n   - **atlas-7.3**: Write the tracing runbook for on-call\n"
    )
    summary = record("user", later, session="traced", cwd=PROJECT, when=NOW - timedelta(hours=2))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**summary, "isCompactSummary": True, "isVisibleInTranscriptOnly": True}) + "\n")
    cli("backfill", str(path), "--wait")
    open_todos = [r["content"] for r in cli_json("search", "open todos", "--project", "atlas")]
    assert open_todos == ["atlas-7.3: Write the tracing runbook for on-call"], open_todos
    done = {r["content"]: r for r in cli_json("search", "todos", "--project", "atlas") if r.get("closed")}
    assert "atlas-7.2: Trace the thumbnail worker's queue consumer" in done
    assert "Fix the flaky retry test, then commit the exporter change." in done


def test_summaries_read_in_one_batch_close_what_the_later_drops_and_keep_what_it_restates(store, tmp_path):
    """Two summaries of one session read by one backfill (a first install, a re-index): the later one
    closes the task it dropped (closing ran before the batch's messages were written and saw no
    summary), keeps the tasks it restates in other words ("(in progress)", a full stop), and a
    subagent's own summary closes none of the session's todos."""
    from helpers import record

    def summary_of(tasks: list[str], hours_ago: int, **extra) -> str:
        text = "This session is being continued.\n\nSummary:\n7. Pending Tasks:\n" + "".join(
            f"   - {t}\n" for t in tasks
        )
        line = record("user", text, session="batch", cwd=PROJECT, when=NOW - timedelta(hours=hours_ago))
        return json.dumps({**line, "isCompactSummary": True, **extra}) + "\n"

    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas"
    path = write_transcript(
        folder / "batch.jsonl", [("user", "Export work")], cwd=PROJECT, start=NOW - timedelta(days=1)
    )
    first = [
        "Paginate the export query",
        "Document the export format in docs/export.md",
        "Add a currency column",
    ]
    with path.open("a", encoding="utf-8") as fh:
        fh.write(summary_of(first, 5))
        fh.write(
            summary_of(
                ["Document the export format in docs/export.md.", "Add a currency column (in progress)"], 3
            )
        )
    cli("backfill", str(path), "--wait")
    still = sorted(r["content"] for r in cli_json("search", "open todos", "--project", "atlas"))
    assert still == ["Add a currency column", "Document the export format in docs/export.md"], still

    side = folder / "batch" / "subagents" / "agent-a1b2c3.jsonl"
    side.parent.mkdir(parents=True)
    side.write_text(summary_of(["Write the subagent's report"], 1, isSidechain=True, agentId="a1b2c3"))
    cli("backfill", str(side), "--wait")
    still = sorted(r["content"] for r in cli_json("search", "open todos", "--project", "atlas"))
    assert "Document the export format in docs/export.md" in still and "Add a currency column" in still


def test_a_line_is_shown_as_its_memory_that_says_the_querys_words(store, tmp_path):
    """A line with several memories is shown as the one that says most of the query's words, not
    as whichever another strategy ranked a little higher; the line's place in the ranking is the same."""
    index(
        tmp_path / "claude",
        "s",
        [
            (
                "assistant",
                "The project already has Igniter as a dependency. Key findings: no Igniter installers "
                "exist for Credo, Dialyxir or mix_audit, so they are plain deps in mix.exs.",
            )
        ],
        NOW - timedelta(days=1),
    )
    shown = cli_json("search", "no igniter installers exist", "--project", "atlas", "-k", "1")
    assert "installers exist" in shown[0]["content"]


def test_session_spans_are_never_results(two_sessions):
    for query in ("deploy", "atlas API", "session"):
        assert all(
            r.get("depth", 1) > 0 for r in cli_json("search", query, "--all-projects") if r["kind"] == "span"
        )


def test_intent_filter_and_project_scope(two_sessions, tmp_path):
    claude = tmp_path / "claude"
    other = claude / "projects" / "-home-dev-projects-zephyr" / "z.jsonl"
    write_transcript(
        other,
        [("user", "We decided to deploy zephyr with Docker Compose too.")],
        cwd="/home/dev/projects/zephyr",
    )
    cli("backfill", str(other), "--wait")
    scoped = cli_json("search", "decisions about deploying", "--project", "atlas")
    assert scoped and all(r["intent"] == "decision" and r["project"] == PROJECT for r in scoped)
    everywhere = cli_json("search", "Docker Compose deployment", "--all-projects")
    assert {r["project"] for r in everywhere} == {PROJECT, "/home/dev/projects/zephyr"}
    missing = cli("search", "x", "--project", "no-such-project", check=False)
    assert missing.returncode == 1 and "no indexed project matches" in missing.stderr


def test_queries_file_answers_each_line_in_order(two_sessions, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"query": "Kubernetes Helm charts", "project": PROJECT, "k": 1},
                {"query": "Docker Compose", "project": "atlas", "k": 2},
                {"query": "nothing like this was ever said zzzqqq", "project": PROJECT, "k": 3},
            ]
        )
        + "\n"
    )
    lines = [
        json.loads(line) for line in cli("search", "--queries", str(queries), "--json").stdout.splitlines()
    ]
    assert [r["query"] for r in lines] == [
        "Kubernetes Helm charts",
        "Docker Compose",
        "nothing like this was ever said zzzqqq",
    ]
    assert len(lines[0]["results"]) == 1 and "Helm" in lines[0]["results"][0]["content"]
    assert "Compose" in lines[1]["results"][0]["content"]
    for line in lines:
        for r in line["results"]:
            assert r["source_file"].startswith("/")
            lines_of = [r["source_line"]] if r["kind"] == "idea" else [r["start_line"], r["end_line"]]
            assert all(isinstance(n, int) and n >= 1 for n in lines_of)


HOSTILE = [
    '"unbalanced',
    "deploy*",
    "NEAR(deploy atlas)",
    "content:deploy",
    "deploy AND OR NOT",
    "(((",
    "'; DROP TABLE ideas; --",
    "\x07deploy\x1b[31m\x7f",
    "x" * 100_000,
]


def test_hostile_queries_return_results_or_nothing_in_process(two_sessions):
    """In-process replacement for the CLI loop below (slow): the search `total-recall search` runs
    when no daemon answers (search.run, as server.in_process calls it) answers every hostile query,
    a NUL byte included, with a list; the tables stay intact. The command line itself is covered
    by test_hostile.py::test_hostile_query_on_the_command_line."""
    from total_recall import config, db, search

    settings = config.load()
    database = db.open_store(settings)
    embedder = search.local_embedder(settings)
    try:
        for query in [*HOSTILE, '\x00deploy\x00 "*( NEAR']:
            answer = search.run(database, settings, embedder, {"query": query, "all_projects": True})
            assert isinstance(answer["results"], list), query[:40]
        kubernetes = {"query": "Kubernetes", "all_projects": True}
        assert search.run(database, settings, embedder, kubernetes)["results"]
        assert db.integrity(database) == "ok"
    finally:
        database.close()


# in-process: test_hostile_queries_return_results_or_nothing_in_process
@pytest.mark.slow
def test_hostile_queries_return_results_or_nothing(two_sessions, tmp_path):
    for query in HOSTILE:
        proc = cli("search", "--json", "--all-projects", "--", query, check=False)
        assert proc.returncode == 0, (query[:40], proc.stderr)
        assert isinstance(json.loads(proc.stdout), list)
    # A NUL byte cannot travel in argv; it can in a --queries file.
    queries = tmp_path / "hostile.jsonl"
    queries.write_text(json.dumps({"query": '\x00deploy\x00 "*( NEAR', "project": PROJECT}) + "\n")
    assert len(cli("search", "--queries", str(queries)).stdout.splitlines()) == 1
    assert cli_json("search", "Kubernetes", "--all-projects")  # tables intact


def _frontmatter(text: str) -> dict:
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert match, "SKILL.md must start with a YAML frontmatter block"
    fields = {}
    for line in match.group(1).splitlines():
        key, _, value = line.partition(":")
        assert re.fullmatch(r"[a-z][a-z-]*", key), f"bad frontmatter key {key!r}"
        fields[key] = value.strip().strip('"')
    fields["_body"] = match.group(2)
    return fields


KNOWN_FIELDS = {
    "name",
    "description",
    "when_to_use",
    "argument-hint",
    "arguments",
    "allowed-tools",
    "disable-model-invocation",
    "user-invocable",
    "model",
    "effort",
    "context",
    "agent",
    "background",
    "hooks",
    "paths",
    "shell",
    "license",
    "compatibility",
    "metadata",
}


def test_skills_are_valid_and_call_commands_that_exist():
    skills = sorted((REPO / "skills").glob("*/SKILL.md"))
    assert {p.parent.name for p in skills} == {
        "remember",
        "memory-backfill",
        "memory-stats",
        "memory-topics",
        "memorize",
    }
    commands = set(cli_module.COMMANDS)
    for path in skills:
        fields = _frontmatter(path.read_text())
        assert set(fields) - {"_body"} <= KNOWN_FIELDS, path
        assert fields["name"] == path.parent.name
        assert 20 < len(fields["description"]) <= 1024
        assert fields.get("context", "fork") == "fork"
        used = re.findall(r"total-recall ([a-z-]+)", fields["_body"] + fields.get("allowed-tools", ""))
        assert used, f"{path} calls no total-recall command"
        assert set(used) <= commands, f"{path} calls unknown commands {set(used) - commands}"
        for tool in re.findall(r"Bash\(([^)]*)\)", fields.get("allowed-tools", "")):
            assert shlex.split(tool)[0] == "total-recall"
    assert _frontmatter((REPO / "skills/remember/SKILL.md").read_text())["context"] == "fork"


def test_every_skill_command_line_parses():
    """The exact command lines the skills tell Claude to run are accepted by the CLI parser."""
    parser = cli_module.build_parser()
    for path in (REPO / "skills").glob("*/SKILL.md"):
        for line in re.findall(r"`(total-recall [^`]+)`", path.read_text()):
            argv = [
                a
                for a in shlex.split(
                    line.replace("$ARGUMENTS", "query").replace("${CLAUDE_SESSION_ID}", "abc")
                )[1:]
            ]
            parser.parse_args(argv)  # raises SystemExit on an unknown option


def test_meaning_weighs_more_when_the_words_and_the_meaning_find_different_windows():
    """When the windows the query's words rank first and those its meaning ranks first hardly
    overlap (a paraphrase), the meaning strategies' weight is doubled; when they agree, or one of
    them found nothing, it is not. Overlap is counted over the shorter list: in a small project
    both lists are short and the same."""
    from total_recall import query as querymod
    from total_recall import search

    def done(words: list[int], meaning: list[int]) -> dict:
        return {
            "chunk_bm25": ("chunk", [(i, 10.0 - n) for n, i in enumerate(words)]),
            "chunk_vec": ("chunk", [(i, 0.9 - n / 100) for n, i in enumerate(meaning)]),
        }

    paraphrase = done(list(range(1, 21)), [1, *range(100, 119)])  # one window of twenty shared
    assert search.meaning_factor(paraphrase) == search.MEANING_BOOST == 2.0
    agreeing = done(list(range(1, 21)), [*range(1, 6), *range(100, 115)])  # five shared
    assert search.meaning_factor(agreeing) == 1.0
    assert search.meaning_factor(done([3, 1, 2], [1, 2, 3])) == 1.0  # a small project: all shared
    assert search.meaning_factor(done([], list(range(1, 21)))) == 1.0  # no word matched
    assert search.meaning_factor(done(list(range(1, 21)), [])) == 1.0  # no vectors

    q = querymod.analyze("the little glyphs next to my competencies")
    assert search.weights_for(q) is search.WEIGHTS
    q.dense_factor = search.meaning_factor(paraphrase)
    doubled = search.weights_for(q)
    assert doubled["chunk_vec"] == 2 * search.WEIGHTS["chunk_vec"]
    assert doubled["idea_vec"] == 2 * search.WEIGHTS["idea_vec"]
    assert doubled["chunk_bm25"] == search.WEIGHTS["chunk_bm25"]
    code = querymod.analyze("why does `mix deps.audit` fail")
    code.dense_factor = 2.0  # a question naming code: a quarter of the meaning weight, doubled
    assert search.weights_for(code)["chunk_vec"] == search.WEIGHTS["chunk_vec"] * search.IDENTIFIER_DENSE * 2


def test_an_excerpt_shows_the_stretch_that_holds_most_of_the_rarest_query_words():
    """A long line is shown where it answers: the stretch holding most of the query's words, a word
    said once (an error's name) counting more than one said on every line; not around the first
    place any query word appears. A line holding none of them is shown from its start."""
    from total_recall.search import EXCERPT_CHARS, excerpt

    line = (
        "The function names in this module are fine. " * 12
        + "Then: (UndefinedFunctionError) function :opentelemetry.set_text_map_propagators/1 is undefined. "
        + "Other function notes follow. " * 20
    )
    shown = excerpt(line, ["undefinedfunctionerror", "function", "opentelemetry", "undefined"])
    assert "set_text_map_propagators/1 is undefined" in shown
    assert shown.startswith("…") and len(shown) <= EXCERPT_CHARS + 2
    assert excerpt(line, ["kubernetes"]).startswith("The function names")
    assert excerpt("a short line", ["line"]) == "a short line"


@pytest.mark.parametrize("query", ["", "   ", "\t"])
def test_an_empty_query_is_refused_as_the_mcp_server_and_web_view_refuse_it(query, isolated_home):
    """`search ""` answered "No memories found." with exit 0, as if memory were empty; a bare
    `search`, the MCP server and the web view say a query is needed."""
    out = cli("search", query, check=False)
    assert out.returncode != 0 and "search needs a QUERY" in out.stderr


def test_a_question_asking_for_an_overview_is_answered_by_its_topics(isolated_home, tmp_path):
    """ "Summarize how the login work went" asks for the topics about it over time: each names a
    stretch of the conversation, so up to ten of them are shown (search.OVERVIEW_SPANS), where a
    question about one fact keeps at most two (MAX_SPAN_RESULTS) among the lines that say it."""
    claude = tmp_path / "claude"
    steps = [
        "We added a login form with email and password fields to the atlas web app.",
        "The login form now rate limits failed password attempts per email address.",
        "Login sessions now expire after thirty minutes of inactivity on the atlas web app.",
        "We moved login tokens to an httpOnly cookie so scripts cannot read them.",
        "The password reset email for login now links to a one-time page.",
    ]
    for day, step in enumerate(steps):
        turns = [("user", step), ("assistant", f"Done: {step.lower()} The tests for the login flow pass.")]
        index(claude, f"login-{day}", turns, NOW - timedelta(days=30 - 5 * day))
    index(
        claude, "deploy", [("user", "We deploy the atlas API with Docker Compose.")], NOW - timedelta(days=2)
    )

    overview = cli_json("search", "Summarize how the login work went over time", "--project", "atlas")
    topics = [r for r in overview if r["kind"] == "span"]
    assert len(topics) > 2 and all("login" in f"{t['name']} {t['summary']}".lower() for t in topics)
    # Shown as text, an overview reads as a timeline: its topics in the order they happened.
    text = cli("search", "Summarize how the login work went over time", "--project", "atlas").stdout
    dates = re.findall(r"^_session \S+ · (\d{4}-\d\d-\d\d)", text, re.M)
    assert len(set(dates)) > 2 and dates == sorted(dates)
    fact = cli_json("search", "how long until a login session expires", "--project", "atlas")
    assert len([r for r in fact if r["kind"] == "span"]) <= 2
    assert next(r for r in fact if r["kind"] != "span")["content"].startswith("Login sessions now expire")
