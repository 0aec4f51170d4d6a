"""Search units: every line's words are searchable, one result per line, pointers on the words."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

from helpers import (
    ASKED_TOOLS,
    cli,
    cli_json,
    daemon_process,
    db_rows,
    memory_store,
    stored_vectors,
    write_transcript,
)
from total_recall.search import participants

pytestmark = pytest.mark.usefixtures("store")  # every test on SQLite and on PostgreSQL

PROJECT = "/home/dev/projects/atlas"
SESSION = "5d0f6a7e-0000-4000-8000-000000000001"


def _line(kind: str, content, n: int, msg_id: str | None = None) -> str:
    base = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": PROJECT,
        "sessionId": SESSION,
        "version": "2.1.39",
        "gitBranch": "main",
        # One record, one uuid, as Claude Code writes them (a copy of a record keeps its uuid).
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps([kind, content, n, msg_id]))),
        "timestamp": f"2026-03-02T10:{n:02d}:00.000Z",
        "type": kind,
    }
    if kind == "user":
        base["message"] = {"role": "user", "content": content}
    elif kind == "attachment":
        base["attachment"] = content
    else:
        base["message"] = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": content,
            "stop_reason": None,
        }
    return json.dumps(base)


def _first_memory(question: str) -> dict:
    """The first result of a search over the atlas project that is not a topic."""
    return [r for r in cli_json("search", question, "--project", "atlas") if r["kind"] != "span"][0]


def _thought_reply(text: str, n: int, msg_id: str) -> list[str]:
    """A reply as Claude Code writes one with extended thinking: a thinking line (n), its text (n + 1)."""
    thinking = [{"type": "thinking", "thinking": "Let me think it over.", "signature": "x"}]
    return [
        _line("assistant", thinking, n, msg_id),
        _line("assistant", [{"type": "text", "text": text}], n + 1, msg_id),
    ]


# A question and its reply after a thinking line (lines 1-3).
BILLING = [
    _line("user", "Which queue should the billing events go through?", 1),
    *_thought_reply(
        "We decided to route billing events through RabbitMQ, since it is already deployed.", 2, "msg_t"
    ),
]


def billing_reply(claude_dir):
    """BILLING, indexed."""
    return _backfill(claude_dir, BILLING)


def as_an_older_version_left_it(moves=((2, 3),)) -> None:
    """The store as a version before 2026-11-27 left it: each (thinking line, text line) reply's
    memories, sources and windows on its thinking line, and no `pointer_version`."""
    with memory_store() as database, database.write():
        for first, text in moves:
            for table in ("ideas", "idea_sources", "chunks"):
                database.execute(f"UPDATE {table} SET source_line = ? WHERE source_line = ?", (first, text))
        database.execute("DELETE FROM meta WHERE key = 'pointer_version'")
        database.execute("UPDATE messages SET uuid = NULL")  # lines stored before 0015 have none


def transcript(claude_dir):
    """A prompt, one response written over three lines (thinking, text, tool_use), a tool result
    holding an error only it mentions, and a short user reply."""
    lines = [
        _line("user", "The session cache keeps dropping logins, can you look at it?", 1),
        *_thought_reply(
            "We should move the session cache from memcached to Redis "
            "because memcached evicts entries under memory pressure.",
            2,
            "msg_a",
        ),
        _line(
            "assistant",
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "redis-cli ping"}}],
            4,
            "msg_a",
        ),
        _line(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "Could not connect to Redis at 127.0.0.1:6379: ECONNREFUSED",
                }
            ],
            5,
        ),
        _line("user", "ok, do it", 6),
    ]
    return _backfill(claude_dir, lines)


def _task_exchange(prompt: str, report: str) -> list[str]:
    """Lines 1-3 of a session: the user's prompt, the assistant's Task call, the subagent's report."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Task", "input": {"description": "Investigate"}}
    return [
        _line("user", prompt, 1),
        _line("assistant", [call], 2, "msg_task"),
        _line("user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": report}], 3),
    ]


def _backfill(claude_dir, lines: list[str]):
    """The session's JSONL lines written where Claude Code keeps the project's transcripts, indexed."""
    path = claude_dir / "projects" / "-home-dev-projects-atlas" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    cli("backfill", str(path), "--wait")
    return path


def test_an_idea_of_a_merged_response_points_at_its_text_line(tmp_path):
    path = transcript(tmp_path / "claude")
    rows = db_rows("SELECT source_line, content FROM ideas WHERE content LIKE '%Redis%'")
    assert rows and {line for line, _ in rows} == {3}  # not line 2 (thinking), where the message starts
    hits = cli_json("search", "why did we switch the session cache to Redis", "--project", "atlas")
    assert hits[0]["kind"] == "idea" and (hits[0]["source_file"], hits[0]["source_line"]) == (str(path), 3)


def test_a_reply_whose_thinking_line_comes_first_points_at_its_one_text_line(tmp_path):
    """The commonest reply with extended thinking: a thinking line, then one text line, one
    `message.id`. Its memory, its words' windows and its search result are all on the text line,
    not on the thinking line where the message starts (a check by line counted every such hit a miss)."""
    assert_billing_reply_on_its_text_line(billing_reply(tmp_path / "claude"))


def assert_billing_reply_on_its_text_line(path) -> None:
    """BILLING's reply: its memory, its windows and its search result on line 3, not the thinking line."""
    assert db_rows("SELECT source_line FROM ideas WHERE content LIKE '%RabbitMQ%'") == [(3,)]
    assert db_rows(
        "SELECT DISTINCT source_line, message_line FROM chunks WHERE content LIKE '%RabbitMQ%'"
    ) == [(3, 2)]
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    top = next(r for r in hits if "RabbitMQ" in r["content"])
    assert (top["source_file"], top["source_line"]) == (str(path), 3)


def test_a_line_with_no_memory_is_found_by_its_words_as_a_message(tmp_path):
    path = transcript(tmp_path / "claude")
    assert not db_rows("SELECT id FROM ideas WHERE source_line = 5")  # a tool result is no memory
    hits = cli_json("search", "ECONNREFUSED 6379", "--project", "atlas")
    message = next(r for r in hits if r["kind"] == "message")
    assert (message["source_file"], message["source_line"]) == (str(path), 5)
    assert "ECONNREFUSED" in message["content"] and message["role"] == "user"
    assert message["message_kind"] == "tool_result"  # Claude Code keeps a tool's output in a user record
    assert message["intent"] is None and message["message_start_line"] == 5
    assert "chunk_bm25" in message["matched_by"]
    text = cli("search", "ECONNREFUSED 6379", "--project", "atlas").stdout
    assert f"{path}:5" in text  # the human rendering shows file:line too
    # ... and says whose words they are: the tool's, not the user's
    shown = next(line for line in text.splitlines() if "ECONNREFUSED" in line)
    assert shown.startswith("- **tool output**")
    assert "- **user said** ok, do it" in text  # the user's own prompt is still theirs


def test_a_headless_summarisers_lines_are_found_as_the_summarisers_not_the_users(tmp_path):
    """A session another tool ran to summarise a conversation (`claude -p "Summarize this part of a
    conversation ..."`) holds someone's conversation in its prompt: found by its words, it is
    introduced as given to a summariser, never as what the user said, and no recap opens with it."""
    from helpers import write_transcript

    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "summariser.jsonl"
    write_transcript(
        path,
        [
            ("user", "Summarize this part of a conversation: the user hit a Bluetooth controller error."),
            ("assistant", "The user debugged a Bluetooth controller initialization error."),
        ],
        cwd="/home/dev/projects/atlas",
    )
    cli("backfill", str(path), "--wait")
    hits = cli_json("search", "bluetooth controller", "--project", "atlas")
    assert {r["message_kind"] for r in hits if r["kind"] == "message"} == {
        "summariser_prompt",
        "summariser_response",
    }
    text = cli("search", "bluetooth controller", "--project", "atlas").stdout
    assert "given to a summariser" in text and "user said" not in text and "assistant said" not in text


def test_a_line_found_by_its_words_is_shown_as_its_idea_once(tmp_path):
    transcript(tmp_path / "claude")
    hits = cli_json(
        "search", "memcached evicts entries under memory pressure", "--project", "atlas", "-k", "10"
    )
    lines = [(r["source_file"], r["source_line"]) for r in hits if r["kind"] in ("idea", "message")]
    assert len(lines) == len(set(lines))  # one result per transcript line
    top = hits[0]
    assert top["kind"] == "idea" and top["source_line"] == 3
    assert {"chunk_bm25", "idea_bm25"} <= set(top["matched_by"])  # its words and its idea both voted


def test_an_intent_filter_keeps_message_results_out(tmp_path):
    transcript(tmp_path / "claude")
    hits = cli_json("search", "todos about the session cache", "--project", "atlas")
    assert hits and all(r["kind"] == "idea" and r["intent"] == "todo" for r in hits)


def test_forget_removes_the_lines_words_from_search(tmp_path):
    path = transcript(tmp_path / "claude")
    idea = db_rows("SELECT id FROM ideas WHERE source_line = 3")[0][0]
    cli("forget", str(idea))
    hits = cli_json("search", "memcached evicts entries under memory pressure", "--project", "atlas")
    assert all((r["source_file"], r.get("source_line")) != (str(path), 3) for r in hits)
    assert db_rows(
        "SELECT count(*) FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = ?) AND "
        "source_line = 3",
        (str(path),),
    ) == [(0,)]


def test_forgetting_a_later_line_of_a_merged_response_removes_its_words_from_the_stored_response(tmp_path):
    """The response over lines 2-4 is one messages row at line 2; its idea points at line 3. A forget
    of that idea takes line 3's words out of the row (the web view's and the MCP tool's excerpt
    read it) and leaves line 4's; reading the transcript again brings nothing back."""
    from total_recall import browse, config
    from total_recall import db as dbmod

    path = transcript(tmp_path / "claude")
    [(idea,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%memcached evicts%'")
    went = cli_json("forget", str(idea))
    assert went["messages"] == 1
    stored = db_rows("SELECT source_line, content FROM messages WHERE source_line = 2")
    assert stored == [(2, "[tool Bash: redis-cli ping]")]
    database = dbmod.open_store(config.load())
    try:
        shown = " ".join(r["content"] for r in browse.excerpt(database, str(path), 3, 3))
    finally:
        database.close()
    assert "memcached" not in shown and "redis-cli ping" in shown
    # Claude Code rewrote the file (its head changed) and the session went on: every line is read
    # again from byte 0.
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace("8000-000000000001", "8000-0000000000ff")
    path.write_text("\n".join([*lines, _line("user", "thanks, that works now", 7)]) + "\n")
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT source_line, content FROM messages WHERE source_line = 2") == stored
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%memcached%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%redis-cli ping%'") == [(1,)]


def test_an_idea_that_is_its_whole_line_shares_the_lines_vector_and_a_part_has_its_own(tmp_path):
    """Embedding is most of the indexing time: an idea that is (nearly) its line's whole window
    takes the window's vector; an idea that is one sentence of a longer turn is embedded itself."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(
            [
                _line(
                    "user",
                    "Thanks, Sam! We decided to use PostgreSQL for the job queue because it already stores "
                    "the orders.",
                    1,
                ),
                _line(
                    "assistant",
                    [
                        {
                            "type": "text",
                            "text": (
                                "I read the worker logs from last night and the two crash reports that came "
                                "with them. "
                                "We decided to pin redis-py to 5.0 because 5.1 breaks the connection pool. "
                                "The dashboards, the staging copy and the nightly export all look fine to "
                                "me, and nothing "
                                "else in the logs stood out as worth a closer look this morning."
                            ),
                        }
                    ],
                    2,
                    "msg_b",
                ),
            ]
        )
        + "\n"
    )
    cli("backfill", str(path), "--wait")

    def vectors(line: int) -> tuple[list[bytes], list[bytes]]:
        ideas = [r[0] for r in db_rows("SELECT id FROM ideas WHERE source_line = ? ORDER BY id", (line,))]
        chunks = [r[0] for r in db_rows("SELECT id FROM chunks WHERE source_line = ? ORDER BY id", (line,))]
        idea_vectors, chunk_vectors = stored_vectors("ideas", ideas), stored_vectors("chunks", chunks)
        return [idea_vectors[i] for i in ideas if i in idea_vectors], [
            chunk_vectors[c] for c in chunks if c in chunk_vectors
        ]

    ideas, chunks = vectors(1)
    # the decision is the prompt but for its thanks: one vector, embedded once
    assert len(ideas) == 1 and chunks == ideas
    ideas, chunks = vectors(2)
    assert ideas and len(chunks) == 1 and all(v != chunks[0] for v in ideas)  # a sentence of a long turn


def test_a_question_about_what_i_said_or_what_you_said_ranks_that_sides_line_first(tmp_path):
    """Both sides talk about the retry limit; the question's pronouns pick whose line comes first."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(
            [
                _line(
                    "user", "I think the upload retry limit should be three attempts with a short backoff.", 1
                ),
                _line(
                    "assistant",
                    [
                        {
                            "type": "text",
                            "text": "A retry limit of five attempts with exponential backoff "
                            "suits the upload better, since the storage API throttles.",
                        }
                    ],
                    2,
                    "msg_c",
                ),
            ]
        )
        + "\n"
    )
    cli("backfill", str(path), "--wait")
    mine = cli_json("search", "what retry limit for the upload did I want", "--project", "atlas")
    yours = cli_json("search", "what retry limit for the upload did you recommend", "--project", "atlas")
    assert mine[0]["source_line"] == 1
    assert yours[0]["source_line"] == 2


def _conversation(tmp_path, turns: list[tuple[str, str]]):
    """A transcript of (side, text) turns, indexed offline."""
    lines = [
        _line("user", text, n)
        if side == "user"
        else _line("assistant", [{"type": "text", "text": text}], n, f"m{n}")
        for n, (side, text) in enumerate(turns, 1)
    ]
    return _backfill(tmp_path / "claude", lines)


def test_a_question_naming_a_participant_ranks_their_line_first(tmp_path):
    """Nothing says who is who but how they address each other ("Hi Ana!", "thanks, Sam!"): a
    question about what Ana did ranks Ana's line above Sam's line that addresses her, which its
    words alone rank first."""
    _conversation(
        tmp_path,
        [
            ("user", "Hi Ana! How was the week?"),
            ("assistant", "Busy, thanks, Sam! I booked a trip to Porto for the design workshop."),
            ("user", "Ana, I am off on a trip too: Lisbon, for the conference!"),
            ("assistant", "Lisbon is lovely in spring, Sam."),
        ],
    )
    assert _first_memory("Where did Ana book a trip to?")["source_line"] == 2
    with memory_store() as database:  # a place no line addresses is not a participant
        assert participants(database, "Did Sam and Ana meet in Lisbon?", None) == {
            "Ana": "assistant",
            "Sam": "user",
        }


def test_speakers_who_share_a_role_are_told_apart_by_their_tags(tmp_path):
    """Every turn written as the user's "Name: text" (a group chat, or a conversion that keeps no
    roles): the role says nothing about who spoke, and Sam's lines that address Ana vote her onto
    the other side. The tags say who is who: a question about what Ana booked ranks Ana's line
    above Sam's, which its words alone rank first."""
    _conversation(
        tmp_path,
        [
            ("user", "Sam: Hi Ana! How was the week?"),
            ("user", "Ana: Busy! I booked a trip to Porto for the design workshop."),
            ("user", "Sam: Ana, I booked a trip too: Lisbon, for the conference, and booked the hotel!"),
            ("user", "Ana: Lisbon is lovely in spring."),
            ("user", "Sam: Thanks Ana, see you after the trip."),
        ],
    )
    assert _first_memory("Where did Ana book a trip to?")["source_line"] == 2
    with memory_store() as database:
        assert participants(database, "Did Sam and Ana meet in Lisbon?", None) == {
            "Ana": "@Ana",
            "Sam": "@Sam",
        }


def test_a_participant_typed_in_lower_case_is_one_in_the_cli_and_through_the_daemon(tmp_path):
    """/remember is typed in lower case: "where did ana book a trip" (or "Where did sam ...?") names
    Ana as the question with a capital does, whether the CLI searches in its own process or the
    daemon does, where the vote on who is who runs beside the other jobs on its second connection.
    Without the vote Sam's line, which addresses Ana and holds the question's words, comes first."""
    _conversation(
        tmp_path,
        [
            ("user", "Hi Ana! How was the week?"),
            ("assistant", "Busy, thanks, Sam! I booked a trip to Porto for the design workshop."),
            ("user", "Ana, I am off on a trip too: Lisbon, I booked it for the conference!"),
            ("assistant", "Lisbon is lovely in spring, Sam."),
        ],
    )

    def first_line(query: str) -> int:
        return [
            r["source_line"] for r in cli_json("search", query, "--project", "atlas") if r["kind"] != "span"
        ][0]

    assert first_line("where did ana book a trip to") == 2
    assert first_line("Where did sam book a trip to?") == 3  # typed in sentence case
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        assert first_line("where did ana book a trip to") == 2
        assert first_line("where did sam book a trip to") == 3
    assert proc.returncode == 0
    with memory_store() as database:  # every word is a candidate; only the people are placed
        assert participants(database, "did sam and ana meet in lisbon", None, typed=True) == {
            "Ana": "assistant",
            "Sam": "user",
        }


def test_what_the_user_picked_among_claudes_options_is_found_as_their_decision(tmp_path):
    """Claude asks with AskUserQuestion and the user picks an option: the result names the pick by its
    label, its description says what it means ("Skip Sobelow"). Asked weeks later what was decided
    about Sobelow, the search finds that line first, as the user's decision, though only the option's
    description names Sobelow (the assistant's later line about Sobelow came first before)."""
    asked = [ASKED_TOOLS]
    call = {"type": "tool_use", "id": "toolu_q", "name": "AskUserQuestion", "input": {"questions": asked}}
    said = 'User has answered your questions: "Which tools should we set up?"="Credo + Dialyxir + mix_audit".'
    answer = json.loads(
        _line("user", [{"type": "tool_result", "tool_use_id": "toolu_q", "content": said}], 3)
    )
    answer["toolUseResult"] = {
        "questions": asked,
        "answers": {asked[0]["question"]: "Credo + Dialyxir + mix_audit"},
    }
    path = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Set up the Elixir code quality checks for this project.", 1),
            _line("assistant", [call], 2, "m2"),
            json.dumps(answer),
            _line(
                "assistant",
                [{"type": "text", "text": "Sobelow scans Phoenix apps for security issues."}],
                4,
                "m4",
            ),
        ],
    )
    top = _first_memory("what did we decide about sobelow?")
    assert (top["source_file"], top["source_line"], top.get("intent")) == (str(path), 3, "decision")
    assert "Skip Sobelow" in top["content"]


def test_what_the_user_typed_when_refusing_a_tool_call_is_found_as_their_decision(tmp_path):
    """The user refuses `npm install` and types "no, use pnpm instead of npm": Claude Code stores it as
    the call's error result, after its own boilerplate. It is found as the user's decision, on its
    line, with the user's words only."""
    call = {"type": "tool_use", "id": "toolu_n", "name": "Bash", "input": {"command": "npm install"}}
    refused = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
        "file edit, the new_string was NOT written to the file). To tell you how to proceed, the user "
        "said:\nno, use pnpm instead of npm"
    )
    result = {"type": "tool_result", "tool_use_id": "toolu_n", "content": refused, "is_error": True}
    path = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Install the frontend dependencies and start the dev server.", 1),
            _line("assistant", [call], 2, "m2"),
            _line("user", [result], 3),
            _line("assistant", [{"type": "text", "text": "Switching to pnpm for the install."}], 4, "m4"),
        ],
    )
    top = _first_memory("what did we decide about npm?")
    assert (top["source_file"], top["source_line"], top.get("intent")) == (str(path), 3, "decision")
    assert top["content"] == "no, use pnpm instead of npm"


def test_what_the_user_typed_while_claude_worked_is_found_as_their_decision(tmp_path):
    """A message typed during a turn reaches the transcript only as a `queued_command` attachment:
    "let's use pnpm instead of npm from now on" is found on its line as the user's decision."""
    call = {"type": "tool_use", "id": "toolu_n", "name": "Bash", "input": {"command": "npm install"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_n", "content": "added 120 packages"}
    queued = {
        "type": "queued_command",
        "prompt": "let's use pnpm instead of npm from now on",
        "commandMode": "prompt",
        "origin": {"kind": "human"},
    }
    path = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Install the frontend dependencies and start the dev server.", 1),
            _line("assistant", [call], 2, "m2"),
            _line("user", [result], 3),
            _line("attachment", queued, 4),
            _line("assistant", [{"type": "text", "text": "Switching to pnpm."}], 5, "m5"),
        ],
    )
    top = _first_memory("what did we decide about npm?")
    assert (top["source_file"], top["source_line"], top.get("intent")) == (str(path), 4, "decision")
    assert top["content"] == "let's use pnpm instead of npm from now on"


def test_the_reply_to_a_short_question_ranks_with_the_question(tmp_path):
    """A short question's subject is in its reply: "Got any favourite editors?" - "Neovim, with a
    minimal config." The reply, which shares no word with the search, outranks a later line that
    shares one (at NEIGHBOUR_WEIGHT instead of ANSWER_WEIGHT the PostgreSQL run fails)."""
    _conversation(
        tmp_path,
        [
            ("user", "Got any favourite editors?"),
            ("assistant", "Neovim, with a minimal config that starts in a blink."),
            ("user", "Editor wars: every editor fan swears theirs is best."),
            ("assistant", "True enough."),
        ],
    )
    found = [r.get("source_line") for r in cli_json("search", "which favourite editor", "--project", "atlas")]
    assert found.index(2) < found.index(3)


def test_a_question_naming_code_ranks_the_line_with_that_code_first(tmp_path):
    """A question that names code (here a flag) wants the line that says it: the meaning
    strategies step back (IDENTIFIER_DENSE), and the answer outranks a question that is about the
    same command in other words (at full weight the line about the command in general wins)."""
    _conversation(
        tmp_path,
        [
            ("user", "How do I reindex only the recent transcripts with the backfill command?"),
            ("assistant", "Pass --since 2026-01-01 to skip transcripts older than that date."),
            ("user", "And what does the backfill command do by default?"),
            (
                "assistant",
                "By default backfill reads every transcript under the projects folder and indexes them all.",
            ),
        ],
    )
    assert _first_memory("what does --since do in backfill")["source_line"] == 2


def test_a_speaker_tag_is_not_part_of_a_lines_meaning(tmp_path):
    """A chat written as "Name: text" gets the vector the same words get without the tag (the tag
    would make the line match any question about that person); a label ("Error: ...") stays."""
    _conversation(
        tmp_path,
        [
            ("user", "Sam: I booked a trip to Lisbon for the conference."),
            ("assistant", "I booked a trip to Lisbon for the conference."),
            ("user", "Error: the build failed at the linker step."),
            ("assistant", "the build failed at the linker step."),
        ],
    )
    ids = {line: r[0] for r in db_rows("SELECT id, source_line FROM chunks") for line in [r[1]]}
    vectors = stored_vectors("chunks", list(ids.values()))
    assert vectors[ids[1]] == vectors[ids[2]]
    assert vectors[ids[3]] != vectors[ids[4]]


def test_a_day_the_question_names_ranks_that_days_line_first_and_hides_nothing(tmp_path):
    """A day named in a question is often not the day the thing was said ("I got the job" is told
    days later): lines of that day come first, the others stay findable."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    said = [
        ("2026-03-02T10:01:00.000Z", "The staging database migration failed on the orders table."),
        ("2026-03-09T10:02:00.000Z", "The staging database migration finished after the index rebuild."),
    ]
    lines = []
    for n, (stamp, text) in enumerate(said, 1):
        record = json.loads(_line("user", text, n))
        record["timestamp"] = stamp
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    cli("backfill", str(path), "--wait")
    on_the_day = cli_json("search", "the staging database migration on March 9th, 2026", "--project", "atlas")
    assert [r["source_line"] for r in on_the_day if r["kind"] != "span"][:2] == [2, 1]
    elsewhere = cli_json("search", "the staging database migration on 20 February 2026", "--project", "atlas")
    assert {r["source_line"] for r in elsewhere if r["kind"] != "span"} == {1, 2}


def test_with_an_llm_the_hyde_passage_finds_a_line_by_words_the_question_does_not_say(tmp_path, monkeypatch):
    """HyDE's passage is searched by its words too (query expansion): a tool result, which has no
    vector, holding the error the passage names is found for a question that names none of it."""
    from fake_openai import FakeOpenAI

    path = transcript(tmp_path / "claude")  # indexed offline, local model
    question = "why could the app not reach the cache server"
    before = cli_json("search", question, "--project", "atlas", "-k", "10")
    assert (str(path), 5) not in {(r.get("source_file"), r.get("source_line")) for r in before}
    passage = "redis-cli failed with ECONNREFUSED on 127.0.0.1:6379: the Redis server was not running."
    with FakeOpenAI(chat=passage) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "hyde-test")
        hits = cli_json("search", question, "--project", "atlas", "-k", "10", "--hyde")
        asked = [r["json"] for r in srv.requests_to("/chat/completions")]
    assert len(asked) == 1 and question in asked[0]["messages"][1]["content"]
    found = next(r for r in hits if (r.get("source_file"), r.get("source_line")) == (str(path), 5))
    assert found["kind"] == "message" and "hyde_bm25" in found["matched_by"]


def test_with_rerank_on_the_llm_orders_the_first_results_and_a_failing_one_leaves_ours(tmp_path, monkeypatch):
    """search.rerank = on: the LLM is shown the first rerank_depth results, numbered, and the ones it
    lists come first in its order, then the ones it left out in ours; what it names wrongly (out of
    range, twice, no number) is ignored. Prose, an error or an order of no passage leaves our order,
    with a note, after a second try; so does an empty order (the model judged none to answer), asked
    once. Off (the default), and for a kind asked for alone ("todos"), it is asked nothing."""
    import re

    from fake_openai import FakeOpenAI

    transcript(tmp_path / "claude")
    question = "why could the app not reach the cache server"
    args = ("search", question, "--project", "atlas")
    ours = cli_json(*args, "-k", "50")
    assert 4 <= len(ours) < 30  # all of them within the depth the model is shown (rerank_depth 30)

    def places(found):
        return [(r.get("source_file"), r.get("source_line"), r["kind"], r.get("id")) for r in found]

    place = places(ours)

    def reversed_order(request):
        shown = re.findall(r"^\[(\d+)\] ", request["messages"][1]["content"], re.M)
        return json.dumps({"order": [int(n) for n in reversed(shown)]})

    monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "rerank-test")
    with FakeOpenAI(chat=reversed_order) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        assert places(cli_json(*args, "-k", "3")) == place[:3]  # off by default: nothing asked
        assert srv.requests_to("/chat/completions") == []
        monkeypatch.setenv("TOTAL_RECALL_SEARCH_RERANK", "on")
        assert places(cli_json(*args, "-k", "3")) == place[::-1][:3]
        sent = [r["json"] for r in srv.requests_to("/chat/completions")]
        assert len(sent) == 1 and f"Question: {question}" in sent[0]["messages"][1]["content"]
        assert f"[{len(ours)}] " in sent[0]["messages"][1]["content"]  # every result was shown
        assert not cli("search", "todos", "--project", "atlas").stderr.count("re-ranking")
        # A kind asked for alone lists its memories newest first: no re-ranking, and no HyDE either
        # (an imagined answer's words would add lines to the list).
        assert len(srv.requests_to("/chat/completions")) == 1

    with FakeOpenAI(chat=json.dumps({"order": [99, 2, 2, "1", True, "x"]})) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        assert places(cli_json(*args, "-k", "4")) == [place[1], place[0], place[2], place[3]]

    with FakeOpenAI(chat=json.dumps({"order": []})) as srv:  # none helps: an answer, not a failure
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        out = cli(*args, "-k", "3", "--json")
        assert places(json.loads(out.stdout)) == place[:3]
        assert f"the model judged none of the first {len(ours)} results to answer this" in out.stderr
        assert len(srv.requests_to("/chat/completions")) == 1

    for answer in ("The first ones look best.", json.dumps({"order": ["x", 0]}), {"status": 500}):
        with FakeOpenAI(chat=answer) as srv:
            monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
            out = cli(*args, "-k", "3", "--json")
            assert places(json.loads(out.stdout)) == place[:3], answer
            assert "re-ranking skipped: re-ranking via" in out.stderr, answer
            assert len(srv.requests_to("/chat/completions")) == 2, answer  # retried once, then ours


def test_a_hung_endpoint_holds_a_search_for_two_short_tries_not_the_extraction_timeout(tmp_path, monkeypatch):
    """HyDE and re-ranking run while the user waits: each call ends within search.llm_timeout, not
    llm.timeout (120 s, for a batch's extraction), and after two tries the search answers without
    them, with notes; an endpoint that failed HyDE is not asked to re-rank in the same search."""
    import time

    from fake_openai import FakeOpenAI

    transcript(tmp_path / "claude")
    monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "slow")
    monkeypatch.setenv("TOTAL_RECALL_SEARCH_RERANK", "on")
    monkeypatch.setenv("TOTAL_RECALL_SEARCH_LLM_TIMEOUT", "1")
    with FakeOpenAI(chat={"hang": 30}) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        started = time.monotonic()
        out = cli("search", "redis cache", "--project", "atlas", "--json")
        took = time.monotonic() - started
        asked = len(srv.requests_to("/chat/completions"))
    assert json.loads(out.stdout), out.stderr  # the search's own results
    assert "HyDE skipped" in out.stderr and "re-ranking skipped: the endpoint failed for HyDE" in out.stderr
    assert asked == 2  # HyDE's two tries; re-ranking does not ask a failed endpoint again
    assert took < 10, took  # 2 calls of at most about 1 s, and a second's wait before the retry
    # A longer question gets no HyDE (search.hyde = auto): re-ranking tries twice, then our order.
    with FakeOpenAI(chat={"hang": 30}) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        out = cli("search", "why could the app not reach the cache server", "--project", "atlas", "--json")
        assert len(srv.requests_to("/chat/completions")) == 2
    assert json.loads(out.stdout) and "re-ranking skipped: re-ranking via" in out.stderr


def test_a_searchs_llm_calls_are_recorded_and_a_spent_budget_asks_the_endpoint_nothing(tmp_path, monkeypatch):
    """HyDE and re-ranking spend tokens while the user waits: each call is a llm_calls row
    ("hyde", "rerank") that `stats` shows apart from extraction and that counts against
    llm.daily_token_budget, as extraction's calls do. Once today's budget is spent, a search asks
    the endpoint nothing and says why; its own results are unchanged."""
    import re

    from fake_openai import FakeOpenAI

    transcript(tmp_path / "claude")
    question = "why could the app not reach the cache server"
    args = ("search", question, "--project", "atlas", "--json")

    usage = {"prompt_tokens": 700, "completion_tokens": 50, "total_tokens": 750}

    def first_listed(request):
        if "Passages:" not in request["messages"][1]["content"]:  # HyDE's passage
            return {"content": "The cache server was unreachable: its port was closed.", "usage": usage}
        shown = re.findall(r"^\[(\d+)\] ", request["messages"][1]["content"], re.M)
        return {"content": json.dumps({"order": [int(shown[0])]}), "usage": usage}

    monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "budget-test")
    monkeypatch.setenv("TOTAL_RECALL_SEARCH_HYDE", "on")
    monkeypatch.setenv("TOTAL_RECALL_SEARCH_RERANK", "on")
    with FakeOpenAI(chat=first_listed) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_DAILY_TOKEN_BUDGET", "2000")
        out = cli(*args)
        assert out.returncode == 0 and "skipped" not in out.stderr, out.stderr
        assert len(srv.requests_to("/chat/completions")) == 2  # HyDE, then re-ranking
        today = cli_json("stats")["llm_today"]
        assert (today["search_calls"], today["search_tokens"]) == (2, 1500)
        assert today["calls"] == 0 and not today["budget_exhausted"]  # no extraction call was made
        # 1500 of 2000 tokens spent: the next search still asks (a call is not cut short), and
        # then the budget is spent.
        assert cli(*args).returncode == 0 and len(srv.requests_to("/chat/completions")) == 4
        assert cli_json("stats")["llm_today"]["budget_exhausted"]
        spent = cli(*args)
        assert len(srv.requests_to("/chat/completions")) == 4  # nothing more was asked
    assert json.loads(spent.stdout), spent.stderr
    assert "HyDE skipped: today's LLM token budget (llm.daily_token_budget) is spent" in spent.stderr
    assert "re-ranking skipped: today's LLM token budget" in spent.stderr
    monkeypatch.delenv("TOTAL_RECALL_LLM_BASE_URL")
    offline = cli(*args)  # the same search's own order, asked of no endpoint
    assert [r.get("id") for r in json.loads(spent.stdout)] == [
        r.get("id") for r in json.loads(offline.stdout)
    ]


def test_lines_of_no_topic_are_headed_by_their_own_session():
    from total_recall import render

    def message(session: str, line: int, kind: str, role: str) -> dict:
        return {
            "kind": "message",
            "content": f"line {line}",
            "role": role,
            "message_kind": kind,
            "session": session,
            "project": "/home/dev/projects/atlas",
            "timestamp": "2026-03-02T10:00:00Z",
            "source_file": f"/t/{session}.jsonl",
            "source_line": line,
            "span": None,
        }

    text = render.results_markdown(
        [
            message("aaaaaaaa-1", 4, "tool_result", "user"),
            message("bbbbbbbb-2", 9, "compact_summary", "assistant"),
            message("aaaaaaaa-1", 7, "prompt", "user"),
        ]
    )
    blocks = text.split("## ")[1:]
    assert len(blocks) == 2  # one heading per session, each naming the session of the lines under it
    assert "session aaaaaaaa" in blocks[0] and "/t/aaaaaaaa-1.jsonl:4" in blocks[0]
    assert "/t/aaaaaaaa-1.jsonl:7" in blocks[0] and "bbbbbbbb" not in blocks[0]
    assert "session bbbbbbbb" in blocks[1] and "/t/bbbbbbbb-2.jsonl:9" in blocks[1]
    assert "**tool output** line 4" in blocks[0] and "**user said** line 7" in blocks[0]
    assert "**summary of an earlier part** line 9" in blocks[1]


def test_what_did_we_decide_about_a_subject_finds_the_subject_whatever_its_lines_were_taken_for(tmp_path):
    # "What did we decide about X?" asks about X: the line that settles it may be no decision idea
    # (here the offline extractor takes it for a fact), so the kind only boosts; a query that opens
    # by naming the kind ("decisions about ...") still lists that kind only.
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "tracing.jsonl"
    write_transcript(
        path,
        [
            ("user", "The test suite is slow, can you look at how tracing runs in tests?"),
            (
                "assistant",
                "Tracing in the test environment now uses the no-op exporter, so no spans leave the box.",
            ),
            ("user", "We decided to use Credo for linting the whole umbrella."),
        ],
        cwd="/home/dev/projects/atlas",
    )
    cli("backfill", str(path), "--wait")
    hits = cli_json(
        "search", "what did we decide about tracing in the test environment", "--project", "atlas"
    )
    assert hits and (hits[0]["source_file"], hits[0]["source_line"]) in {(str(path), 1), (str(path), 2)}
    assert (str(path), 2) in {(r["source_file"], r["source_line"]) for r in hits[:3]}
    listed = cli_json("search", "decisions about linting", "--project", "atlas")
    assert listed and all(r["kind"] == "idea" and r["intent"] == "decision" for r in listed)
    # ... unless no memory of that kind mentions the subject: then what was said about it, with a note
    asked = "decisions about tracing in tests"
    shown = cli_json("search", asked, "--project", "atlas")
    assert (str(path), 2) in {(r["source_file"], r["source_line"]) for r in shown[:3]}
    assert "no decision memory mentions tracing tests" in cli("search", asked, "--project", "atlas").stderr


def test_a_decision_that_does_not_say_the_questions_words_is_found_through_the_names_it_shares(
    tmp_path, fixture_transcripts
):
    # In the real session the user picked "Credo + Dialyxir + mix_audit: skip Sobelow" from an offered
    # choice; the plan, the todos and a dozen tool lines repeat "Setup Code Quality Tools (Credo,
    # Dialyxir, mix_audit)" and took every place above it (20th). The pick names the top plan's tools,
    # so asked for a decision it is shown beside the plan (search.KIND_SHARE).
    source = next(p for p in fixture_transcripts if p.name == "marot__spotter__subagent.jsonl")
    path = tmp_path / "claude" / "projects" / "-home-marco-projects-spotter" / source.name
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    cli("backfill", str(path), "--wait")
    [(picked,)] = db_rows("SELECT id FROM ideas WHERE intent = 'decision' AND content LIKE '%I chose Credo%'")
    hits = cli_json("search", "what did we decide about the code quality tools", "--all-projects", "-k", "10")
    assert ("idea", picked) in [(r["kind"], r["id"]) for r in hits]
    # A question that asks for no kind of memory is ranked as before: the pick is not pulled in.
    plain = cli_json("search", "code quality tools", "--all-projects", "-k", "5")
    assert ("idea", picked) not in [(r["kind"], r["id"]) for r in plain]


def test_a_query_whose_words_no_line_says_is_answered_with_a_note_that_it_is_only_close_in_meaning(tmp_path):
    """The vectors always return their nearest lines: asked about something never said, the
    results would read as an answer. A note says that no line or memory of the scope holds any of
    the query's words; a query whose words some line says gets no such note, and neither does a
    search in another project that says them, or a query that only names a kind ("what is left to
    do")."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / "tracing.jsonl"
    write_transcript(
        path,
        [
            ("user", "The test suite is slow, can you look at how tracing runs in tests?"),
            ("assistant", "Tracing in tests now uses the no-op exporter, so no spans leave the box."),
            ("user", "We still need to add a benchmark for the exporter."),
        ],
        cwd="/home/dev/projects/atlas",
    )
    other = tmp_path / "claude" / "projects" / "-home-dev-projects-helm" / "charts.jsonl"
    write_transcript(
        other,
        [("user", "We pinned the Kubernetes chart to version 4.2 for the staging cluster.")],
        cwd="/home/dev/projects/helm",
    )
    cli("backfill", str(path), "--wait")
    cli("backfill", str(other), "--wait")
    note = "no line or memory in this scope says"
    asked = cli("search", "kubernetes chart version", "--project", "atlas")
    assert f"{note} kubernetes or chart or version" in asked.stderr
    assert "/tracing.jsonl:" in asked.stdout  # the closest lines are still shown
    assert note not in cli("search", "how does tracing run in tests", "--project", "atlas").stderr
    assert note not in cli("search", "kubernetes chart version", "--project", "helm").stderr
    # A query whose only words name a kind of memory asks for that kind: nothing to say of its words.
    left = cli("search", "what is left to do", "--project", "atlas")
    assert "benchmark for the exporter" in left.stdout and note not in left.stderr


def test_a_tool_calls_line_ranks_below_the_result_that_holds_the_same_words(tmp_path):
    """A tool call's line ("[tool WebSearch: ...]") repeats words its result holds with their
    answer; it keeps TOOL_CALL_FACTOR of its score, so the result line comes first although the
    shorter call line is the better BM25 match (without the factor the call line wins on SQLite;
    PostgreSQL's full-text rank puts the result first either way, and the factor keeps it there)."""
    query = "xterm scroll events embedded page"
    lines = [
        _line("user", "Scrolling back in the terminal pane still does not work, look it up online.", 1),
        _line(
            "assistant",
            [{"type": "tool_use", "id": "toolu_9", "name": "WebSearch", "input": {"query": query}}],
            2,
            "msg_w",
        ),
        _line(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_9",
                    "content": f'Web search results for query: "{query}". Issue #1343: xterm captures all '
                    "scroll events, so an embedded page cannot scroll; the fix lets wheel events bubble.",
                }
            ],
            3,
        ),
    ]
    _backfill(tmp_path / "claude", lines)
    found = [r for r in cli_json("search", query, "--project", "atlas") if r["kind"] != "span"]
    assert [r["source_line"] for r in found[:2]] == [3, 2]


def test_what_a_subagent_reported_past_its_first_lines_is_found(tmp_path):
    """A Task call's result is the subagent's report; what it found deep in the report (here past
    its first 2,000 characters; other tool output keeps its first 500) is searchable and points at
    the result's line (I99)."""
    filler = " ".join(["The parser module reads each record and validates the header fields."] * 30)
    report = f"{filler}\n\nFinding: the flaky upload test fails because the S3 mock drops multipart ETags."
    _backfill(
        tmp_path / "claude", _task_exchange("Have a subagent look into why the upload test is flaky.", report)
    )
    found = cli_json("search", "multipart ETags dropped by the mock", "--project", "atlas")
    top = found[0]
    assert (top["source_line"], top["kind"]) == (3, "message") and "multipart ETags" in top["content"]


def test_how_a_long_command_output_ended_is_found(tmp_path):
    """A command's output keeps its first 500 characters and its last ~200: the exception a
    traceback ends with, a test run's failures and counts are written last. A file read's end is
    not kept (its end says no more than its middle)."""
    frames = "\n".join(f'  File "/repo/atlas/loader{i}.py", line {i}, in load_{i}' for i in range(40))
    failure = f"Traceback (most recent call last):\n{frames}\nKeyError: 'tenant_quota_bucket'"
    listing = "\n".join(f"{i:5d}\tdef handler_{i}(event): return event" for i in range(60))
    read_end = "\n    99\tSENTINEL_WATERMARK_OFFSET = 4096"
    lines = [
        _line("user", "Run the loader tests and read the handlers module.", 1),
        _line("assistant", [_call("toolu_1", "Bash", command="pytest tests/test_loader.py")], 2, "m1"),
        _line("user", [_result("toolu_1", failure, is_error=True)], 3),
        _line("assistant", [_call("toolu_2", "Read", file_path="/repo/atlas/handlers.py")], 4, "m2"),
        _line("user", [_result("toolu_2", listing + read_end)], 5),
    ]
    lines[2] = json.dumps(json.loads(lines[2]) | {"toolUseResult": {"stdout": "", "stderr": failure}})
    lines[4] = json.dumps(json.loads(lines[4]) | {"toolUseResult": {"type": "text", "file": {}}})
    _backfill(tmp_path / "claude", lines)
    found = cli_json("search", "KeyError tenant_quota_bucket", "--project", "atlas")
    assert found and (found[0]["source_line"], found[0]["kind"]) == (3, "message")
    assert "KeyError: 'tenant_quota_bucket'" in found[0]["content"]
    read = cli_json("search", "SENTINEL_WATERMARK_OFFSET", "--project", "atlas")
    assert not [r for r in read if r.get("source_line") == 5]


def _call(call_id: str, name: str, **tool_input) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def _result(call_id: str, content: str, **flags) -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **flags}


def test_a_subagents_report_in_its_own_file_and_in_the_task_result_is_one_result_with_both_places(tmp_path):
    """Claude Code 2.x keeps a subagent's transcript in <session>/subagents/agent-<id>.jsonl; its
    last reply is the report that the parent's Task result returns too. The same text at two places
    is one result naming both (search.DUPLICATE_SHARE), not two results; a line that only shares some
    of its words stays a result of its own (I103)."""
    report = (
        "Findings: the flaky upload test fails because the S3 mock clock drifts between the "
        "multipart start and its completion. I propose freezing time with freezegun in conftest and "
        "retrying the multipart completion twice; keep boto3 and drop the custom retry wrapper."
    )
    claude = tmp_path / "claude"
    parent = _backfill(
        claude,
        [
            *_task_exchange("Why is the upload test flaky? Investigate with a subagent.", report),
            _line(
                "assistant",
                [
                    {
                        "type": "text",
                        "text": "The S3 mock clock drifts during the multipart upload; "
                        "freezing time in conftest is the fix I would apply first, before any retry.",
                    }
                ],
                4,
                "msg_q",
            ),
        ],
    )
    agent = parent.parent / SESSION / "subagents" / "agent-a5f1.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_text(
        "\n".join(
            [
                _line("user", "Find out why the upload test is flaky.", 1),
                _line("assistant", [{"type": "text", "text": report}], 2, "msg_s"),
            ]
        )
        + "\n"
    )
    cli("backfill", str(agent), "--wait")
    found = cli_json("search", "why does the multipart upload test fail, S3 mock clock", "--project", "atlas")
    lines = [r for r in found if r["kind"] != "span"]
    places = [{(s["source_file"], s["source_line"]) for s in r["sources"]} for r in lines]
    holding = [p for p in places if (str(parent), 3) in p or (str(agent), 2) in p]
    assert holding == [{(str(parent), 3), (str(agent), 2)}]  # one result, both places
    assert any((str(parent), 4) in p for p in places)  # the reply that shares some words stays
    text = cli(
        "search", "why does the multipart upload test fail, S3 mock clock", "--project", "atlas"
    ).stdout
    said = [line for line in text.splitlines() if "clock drifts between" in line and "**topic**" not in line]
    assert len(said) == 1 and "also at `" in text


def test_when_the_question_names_a_side_the_other_sides_reply_gains_nothing_from_its_neighbour(tmp_path):
    """ "What did I say about X": the assistant's reply to the user's line about X is not what the
    user said, so it does not ride on that line's score (the neighbour share); the user's other
    line about X comes before it (with the share the reply comes first)."""
    _conversation(
        tmp_path,
        [
            ("user", "The staging database should be restored from the nightly snapshot before the demo."),
            ("assistant", "Sure, I will take care of it tonight."),
            ("user", "Thanks. Unrelated: the logo colours look off on dark backgrounds."),
            ("assistant", "I will darken the logo outline for dark mode."),
            ("user", "Keep the staging snapshot small, the demo laptop has little disk."),
        ],
    )
    found = cli_json("search", "what did I say about the staging database snapshot", "--project", "atlas")
    lines = [r["source_line"] for r in found if r["kind"] != "span"]
    assert lines[0] == 1
    assert lines.index(5) < lines.index(2)


def test_an_idea_added_by_its_relation_is_not_a_second_result_for_a_line_already_shown(tmp_path):
    """Graph expansion adds the ideas that answer, build on or supersede a top result; one that sits
    on a line already shown (as another of its ideas) is not a second result for that line."""
    _conversation(
        tmp_path,
        [
            ("user", "Should the ledger service store money in Postgres or in MySQL?"),
            (
                "assistant",
                "We will use Postgres for the ledger service, because it has exact numeric types. "
                "The nightly ledger backups still need a restore drill.",
            ),
            ("user", "Fine, and the invoices service keeps its own MySQL database for now."),
        ],
    )
    with memory_store() as database:  # the reply's second idea answers the question
        relations = database.execute("SELECT relation_type FROM relations").fetchall()
    assert [r[0] for r in relations] == ["answers"]
    found = cli_json("search", "which database for the ledger service", "--project", "atlas")
    places = [(r["source_file"], r["source_line"]) for r in found if r["kind"] != "span"]
    assert len(places) == len(set(places))


def test_a_long_reply_does_not_outrank_the_line_it_echoes_by_its_number_of_windows(tmp_path, store):
    """A reply cut into many windows has as many chances that one of them repeats the query's
    words, and a line keeps its best window: the window strategies' share of its score is divided
    by 1 + WINDOW_DISCOUNT * ln(windows). Typed as keywords (no side named), the user's line that
    states the figure comes before the long reply that keeps repeating it; with WINDOW_DISCOUNT = 0
    the reply comes first in both stores. PostgreSQL's ts_rank_cd does not weigh a window by its
    length as BM25 does, so there the reply says the echo less often to be level without it."""
    filler = (
        "Keep the handlers small, log the slow paths, measure again after every change, and "
        "write down what moved so the next person can repeat the run without guessing. "
    )
    echo = "The dashboard API response time can be cut by caching the monthly totals. "
    fillers, repeats = (2, 16) if store == "sqlite" else (6, 8)  # 9 and 12 windows
    reply = " ".join(echo + filler * fillers for _ in range(repeats))
    _conversation(
        tmp_path,
        [
            (
                "user",
                "Our dashboard API response time is 450 ms on average since the new index; the "
                "budget page and the login form are fine.",
            ),
            ("assistant", reply),
        ],
    )
    found = cli_json("search", "dashboard api response time", "--project", "atlas")
    lines = [r["source_line"] for r in found if r["kind"] != "span"]
    assert lines[:2] == [1, 2]


def test_a_rare_word_outranks_a_common_word_said_many_times_in_either_store(tmp_path):
    """Full text ranks as BM25 does in both stores: a word most lines say tells them apart by little,
    so the one line holding the query's rare word comes first, not the line that repeats the common
    one. (PostgreSQL's ts_rank_cd counts every query word alike; the store now weighs each word by its
    inverse document frequency, lookup._ts_rank.)"""
    _conversation(
        tmp_path,
        [
            ("user", "The deploy script runs after the tests; deploy the staging build, then deploy prod."),
            ("assistant", "The deploy step failed once on staging, so the deploy retries the deploy twice."),
            ("user", "We renewed the kerberos ticket on the build agent yesterday."),
            ("assistant", "Each deploy writes its log under logs/deploy, one file per deploy."),
            ("user", "Keep the deploy notes short."),
        ],
    )
    found = cli_json("search", "kerberos deploy", "--project", "atlas")
    lines = [r["source_line"] for r in found if r["kind"] != "span"]
    assert lines[0] == 3


def test_pointers_an_older_indexer_left_on_a_thinking_line_move_to_the_text_line(tmp_path):
    """A store indexed before a reply's only piece after its thinking line kept its own line has
    that reply's memories, sources and windows on the thinking line: the transcript is read again, a
    slice at a time, and every such row moves to where indexing it now puts it (repoint.py, I150)."""
    from total_recall import config, repoint

    machine = config.load().machine_name()
    path = _backfill(
        tmp_path / "claude",
        [
            *BILLING,
            _line("user", "And where do the invoices go once they are rendered?", 4),
            *_thought_reply(
                "We decided to keep rendered invoices in S3 under a per-tenant prefix.", 5, "msg_u"
            ),
            _line("user", "Fine. Who signs the invoice PDFs?", 7),
            _line(
                "assistant",
                [{"type": "text", "text": "The billing worker signs them with the HSM key."}],
                8,
                "msg_v",
            ),
        ],
    )
    lines = {
        "ideas": "SELECT source_line, content FROM ideas",
        "idea_sources": "SELECT s.source_line, content FROM idea_sources s JOIN ideas i ON i.id = s.idea_id",
        "chunks": "SELECT source_line, message_line, seq, content FROM chunks",
        "messages": "SELECT source_line, uuid FROM messages",
    }

    def pointers() -> dict[str, set]:
        return {table: set(db_rows(sql)) for table, sql in lines.items()}

    fresh = pointers()
    assert {line for line, _ in fresh["ideas"]} >= {3, 6}
    with memory_store() as database:
        assert not repoint.pending(
            database, machine
        )  # a store created empty by this version: nothing to read

    as_an_older_version_left_it(((2, 3), (5, 6)))
    old = pointers()
    assert old != fresh and {line for line, _ in old["ideas"]} >= {2, 5}
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    assert next(r for r in hits if "RabbitMQ" in r["content"])["source_line"] == 2

    # A few bytes at a time: every slice resumes where the one before stopped.
    slices = 0
    with memory_store() as database:
        assert repoint.pending(database, machine) and repoint.left(database, machine) == 1
        while repoint.pending(database, machine):
            repoint.run_slice(database, config.load(), budget=1)
            slices += 1
            assert slices < 50
        assert repoint.left(database, machine) is None
    assert slices > 3  # one message a slice: the pass was cut inside the transcript and resumed
    assert pointers() == fresh
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    top = next(r for r in hits if "RabbitMQ" in r["content"])
    assert (top["source_file"], top["source_line"]) == (str(path), 3)
    moved = db_rows("SELECT old, new FROM memory_events WHERE cause = 'repoint'")
    assert len(moved) == len([1 for line, _ in fresh["ideas"] if line in (3, 6)])
    assert all(json.loads(o)["source_line"] + 1 == json.loads(n)["source_line"] for o, n in moved)

    # A pass over rows the current indexer wrote moves nothing.
    with memory_store() as database:
        with database.write():
            database.execute("DELETE FROM meta WHERE key = ?", (f"repointed:{machine}",))
        report = repoint.run_slice(database, config.load())
    assert report == {"transcripts": 1, "moved": 0, "done": True}
    assert pointers() == fresh


def test_the_daemon_moves_pointers_an_older_indexer_left_in_the_background(tmp_path, monkeypatch, store):
    """The running daemon does the pass of the test above on its heartbeat; `doctor` shows what is left."""
    from helpers import wait_for
    from total_recall import config, maintain

    monkeypatch.setenv("TOTAL_RECALL_DAEMON_HEARTBEAT", "1")
    machine = config.load().machine_name()
    path = billing_reply(tmp_path / "claude")
    as_an_older_version_left_it()
    with memory_store() as database:  # the digests as the older indexer wrote them
        maintain.refresh_all_digests(database)
    assert f"{path.name}:2)" in "".join(p.read_text() for p in config.paths().digests.glob("*.md"))
    if store == "sqlite":  # doctor reads the home's own file
        assert cli_json("doctor", "--fast")["transcripts_to_repoint"] == 1
    log = tmp_path / "daemon.log"
    with daemon_process(log) as proc:
        wait_for(
            lambda: (
                bool(db_rows("SELECT 1 FROM meta WHERE key = ?", (f"repointed:{machine}",)))
                or proc.poll() is not None
            ),
            timeout=60,
            interval=0.2,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
    assert proc.returncode == 0
    assert_billing_reply_on_its_text_line(path)
    if store == "sqlite":
        assert cli_json("doctor", "--fast")["transcripts_to_repoint"] is None
    # The session-start digests cite file:line: written again with the moved line.
    digests = "".join(p.read_text() for p in config.paths().digests.glob("*.md"))
    assert f"{path.name}:3)" in digests and f"{path.name}:2)" not in digests


def billing_reply_and_its_fork(claude_dir):
    """BILLING indexed, then a session forked from it: its transcript starts with copies of BILLING's
    records (same uuids, its own session id) and goes on with a line of its own (4); both indexed."""
    first = billing_reply(claude_dir)
    return first, fork_of(first)


def fork_of(first):
    """A session forked from `first` (BILLING), indexed: copies of its records, then a line of its own."""
    fork = first.with_name("6a7e5d0f-0000-4000-8000-000000000002.jsonl")
    copies = [json.loads(line) | {"sessionId": fork.stem} for line in BILLING]
    said = _line("user", "And which queue takes the refunds? We decided refunds go through SQS.", 4)
    fork.write_text("".join(json.dumps(r) + "\n" for r in copies) + said.replace(SESSION, fork.stem) + "\n")
    cli("backfill", str(fork), "--wait")
    return fork


def test_the_lines_a_forked_session_copied_count_once(tmp_path):
    """`claude --resume ID --fork-session` starts the new transcript with copies of the old one's
    records (same uuids, the new session id): the copies are stored as skipped (`copied`), so the
    decision said once keeps one mention, one source and one result; what the fork says after them
    is indexed as usual (I152)."""
    first, fork = billing_reply_and_its_fork(tmp_path / "claude")
    assert db_rows("SELECT mention_count FROM ideas WHERE content LIKE '%RabbitMQ%'") == [(1,)]
    assert {
        r[0] for r in db_rows("SELECT (SELECT path FROM files WHERE id = file_id) FROM idea_sources")
    } == {
        str(first),
        str(fork),
    }  # the fork's own line is a source, its copies are not
    assert db_rows(
        "SELECT source_line, skip_reason FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?) "
        "AND source_line < 4 ORDER BY source_line",
        (str(fork),),
    ) == [(1, "copied"), (2, "copied")]  # the reply's two lines are one message, stored at its first
    assert db_rows(
        "SELECT count(*) FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = ?)", (str(fork),)
    ) == [(1,)]
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    assert {r["source_file"] for r in hits if "RabbitMQ" in r["content"]} == {str(first)}
    assert any("SQS" in r["content"] for r in cli_json("search", "refunds queue", "--project", "atlas"))


def forget_the_queue_choice(how: str) -> None:
    """Forget the billing reply's RabbitMQ memory (`how` "memory") or its whole session ("session")."""
    if how == "memory":
        [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%RabbitMQ%'")
        cli_json("forget", str(idea_id))
    else:
        cli_json("forget", "--session", SESSION)


@pytest.mark.parametrize("how", ["memory", "session"])
def test_forgetting_lines_forgets_the_copies_a_forked_session_holds_of_them(tmp_path, how):
    """The copies are the same records: forgetting the memory said on a line, or the session, takes
    the fork's copies of those lines too (no row keeps their words, a re-read does not bring them
    back), and the fork's own line stays (I152, I38)."""
    first, fork = billing_reply_and_its_fork(tmp_path / "claude")
    forget_the_queue_choice(how)
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    with memory_store() as database, database.write():  # the fork read again from its first byte
        database.execute(
            "UPDATE index_state SET byte_offset = 0, line_number = 0, head_hash = NULL WHERE source_file = ?",
            (str(fork),),
        )
    cli("backfill", str(fork), "--wait")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    assert not any(
        "RabbitMQ" in r["content"] for r in cli_json("search", "billing events queue", "--all-projects")
    )
    assert any("SQS" in r["content"] for r in cli_json("search", "refunds queue", "--project", "atlas"))


@pytest.mark.parametrize("how", ["memory", "session"])
def test_a_session_forked_after_a_forget_holds_no_copy_of_the_forgotten_words(tmp_path, how):
    """Forgotten first, forked later (`claude --resume ID --fork-session` copies the old records, the
    forgotten ones too): the copy of a forgotten line is forgotten as it arrives, so its words are in no
    row, also when the forget took the whole session and left no row of it; the fork's own line is
    indexed (I201, I202)."""
    first = billing_reply(tmp_path / "claude")
    forget_the_queue_choice(how)
    if how == "session":
        assert db_rows("SELECT count(*) FROM messages") == [(0,)]
    fork = fork_of(first)
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    assert db_rows(
        "SELECT source_line, skip_reason FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?) "
        "ORDER BY source_line",
        (str(fork),),
    ) == [(1, "copied" if how == "memory" else "forgotten"), (2, "forgotten"), (4, None)]
    assert not any(
        "RabbitMQ" in r["content"] for r in cli_json("search", "billing events queue", "--all-projects")
    )
    assert any("SQS" in r["content"] for r in cli_json("search", "refunds queue", "--project", "atlas"))


def test_a_forked_copy_of_a_response_holds_none_of_the_words_forgotten_of_it(tmp_path):
    """A response written over two lines, the memory of its second line forgotten: the response's row
    keeps its first line's words only. A session forked later copies both lines; its copy holds what
    the original row holds now, not the forgotten words the fork's file repeats (I202)."""
    first = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Which queue should the billing events go through?", 1),
            _line(
                "assistant",
                [{"type": "text", "text": "We decided to route billing events through RabbitMQ."}],
                2,
                "msg_two",
            ),
            _line(
                "assistant",
                [{"type": "text", "text": "The vault passphrase is kept in the team safe."}],
                3,
                "msg_two",
            ),
        ],
    )
    [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%passphrase%'")
    cli_json("forget", str(idea_id))
    fork = first.with_name("6a7e5d0f-0000-4000-8000-000000000003.jsonl")
    copies = [json.loads(line) | {"sessionId": fork.stem} for line in first.read_text().splitlines()]
    fork.write_text("".join(json.dumps(r) + "\n" for r in copies))
    cli("backfill", str(fork), "--wait")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%passphrase%'") == [(0,)]
    assert db_rows(
        "SELECT skip_reason, content FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?) "
        "AND source_line = 2",
        (str(fork),),
    ) == [("copied", "We decided to route billing events through RabbitMQ.")]


def test_a_forks_copies_of_tool_lines_count_once_and_go_with_a_session_forget(tmp_path):
    """A fork copies tool calls and their output too: those copies are `copied` like a prompt's (no
    second window, no second result), and forgetting the original session takes them with it."""
    call = {
        "type": "tool_use",
        "id": "toolu_g1",
        "name": "Bash",
        "input": {"command": "grep -r gammaword src/"},
    }
    result = {"type": "tool_result", "tool_use_id": "toolu_g1", "content": "src/link.c: gammaword undefined"}
    first = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Why does the linker fail on the release build?", 1),
            _line("assistant", [call], 2, "msg_g"),
            _line("user", [result], 3),
            _line(
                "assistant",
                [{"type": "text", "text": "The gammaword symbol is undefined in link.c."}],
                4,
                "msg_h",
            ),
        ],
    )
    fork = first.with_name("6a7e5d0f-0000-4000-8000-000000000004.jsonl")
    copies = [json.loads(line) | {"sessionId": fork.stem} for line in first.read_text().splitlines()]
    fork.write_text("".join(json.dumps(r) + "\n" for r in copies))
    cli("backfill", str(fork), "--wait")
    assert db_rows(
        "SELECT DISTINCT skip_reason FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?)",
        (str(fork),),
    ) == [("copied",)]
    assert db_rows(
        "SELECT count(*) FROM chunks WHERE file_id = (SELECT id FROM files WHERE path = ?)", (str(fork),)
    ) == [(0,)]
    hits = cli_json("search", "gammaword undefined", "--all-projects")
    assert hits and {r["source_file"] for r in hits} == {str(first)}
    cli_json("forget", "--session", SESSION)
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%gammaword%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE content LIKE '%gammaword%'") == [(0,)]
    assert cli_json("search", "gammaword undefined", "--all-projects") == []


def test_a_record_uuid_that_is_no_uuid_is_not_stored(tmp_path):
    """The uuid is stored beside the line (I152); a hand-made or hostile record could put anything
    there, a token included: only a value shaped like a uuid is kept."""
    token = "sk-ant-api03-" + "Q" * 40
    odd = json.loads(_line("user", "Which region hosts the staging cluster?", 1)) | {"uuid": token}
    _backfill(tmp_path / "claude", [json.dumps(odd), *BILLING[1:]])
    assert db_rows("SELECT source_line, uuid FROM messages ORDER BY source_line")[0] == (1, None)
    assert all(u and len(u) == 36 for _, u in db_rows("SELECT source_line, uuid FROM messages")[1:])
    assert not db_rows("SELECT 1 FROM messages WHERE uuid LIKE '%sk-ant%'")


REVIEWED = {
    "file": "src/webhooks.py",
    "line": 42,
    "summary": "The webhook signature check compares timestamps in local time.",
    "failure_scenario": "A request signed during a daylight saving change is rejected as expired.",
    "severity": "important",
}


def test_a_code_reviews_findings_are_problems_found_at_the_call_and_their_fix_a_solution(tmp_path):
    """A review that reports with Claude Code's ReportFindings tool says what it found only in the
    call's input: each finding is a problem memory at the call's line, found by a developer's
    question weeks later, and the re-report after the fix is a solution."""
    review = {
        "type": "tool_use",
        "id": "toolu_r1",
        "name": "ReportFindings",
        "input": {"findings": [REVIEWED]},
    }
    fixed = {
        "type": "tool_use",
        "id": "toolu_r2",
        "name": "ReportFindings",
        "input": {"findings": [dict(REVIEWED, outcome="fixed")]},
    }
    path = _backfill(
        tmp_path / "claude",
        [
            _line("user", "Review the webhook changes.", 1),
            _line("assistant", [review], 2, "msg_r1"),
            _line("user", [{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "Reported."}], 3),
            _line("user", "Fix the important one.", 4),
            _line("assistant", [fixed], 5, "msg_r2"),
        ],
    )
    rows = db_rows("SELECT source_line, intent FROM ideas WHERE content LIKE '%timestamps in local time%'")
    assert (2, "problem") in rows and (5, "solution") in rows, rows
    hits = cli_json("search", "what did the review find about webhook signatures", "--project", "atlas")
    places = [(r["source_file"], r.get("source_line")) for r in hits[:5]]
    shown = [(r["kind"], r.get("source_line"), r["content"][:50], r["intent"]) for r in hits]
    assert "local time" in hits[0]["content"] and {(str(path), 2), (str(path), 5)} <= set(places), shown


def moved_into_a_worktree(
    claude_dir, *, keep_old: bool = False, changed_head: bool = False, forget: bool = False
):
    """BILLING indexed, then its transcript moved (Claude Code 2.1.332's EnterWorktree) into another
    project folder, with a line said after the move; the new path indexed. `keep_old`: copied
    instead (the old file stays); `changed_head`: the first line differs (not the same file)."""
    first = billing_reply(claude_dir)
    if forget:  # the decision forgotten before the move
        [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%RabbitMQ%'")
        cli_json("forget", str(idea_id))
    moved = claude_dir / "projects" / "-home-dev-projects-atlas--claude-worktrees-fix" / first.name
    moved.parent.mkdir(parents=True)
    lines = first.read_text().splitlines()
    if changed_head:
        lines[0] = lines[0].replace("billing events", "billing  events")
    said = _line("user", "In the worktree: we decided refunds go through SQS.", 4)
    moved.write_text("\n".join([*lines, said]) + "\n")
    if not keep_old:
        first.unlink()
    cli("backfill", str(moved), "--wait")
    return first, moved


def test_a_transcript_claude_code_moved_keeps_its_memories_at_its_new_path(tmp_path):
    """Claude Code 2.1.332 moves a session's transcript into a worktree's project folder mid-session
    (the old file is gone): what was read from it follows it to its new path, is not read a second
    time (no `copied` lines pointing at a file that is gone), and reading goes on where it left off."""
    first, moved = moved_into_a_worktree(tmp_path / "claude")
    assert db_rows("SELECT path FROM files") == [(str(moved),)]
    assert db_rows("SELECT source_file FROM index_state") == [(str(moved),)]
    assert db_rows("SELECT DISTINCT source_file FROM spans") == [(str(moved),)]
    assert db_rows("SELECT source_line, skip_reason FROM messages ORDER BY source_line") == [
        (1, None),
        (2, None),  # the reply's thinking and text lines: one message, stored at its first
        (4, None),
    ]
    assert not db_rows("SELECT 1 FROM messages WHERE skip_reason = 'copied'")
    assert db_rows("SELECT mention_count FROM ideas WHERE content LIKE '%RabbitMQ%'") == [(1,)]
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    [hit] = [r for r in hits if "RabbitMQ" in r["content"] and r["kind"] == "idea"]
    assert (hit["source_file"], hit["source_line"]) == (str(moved), 3)
    assert any(
        r["source_file"] == str(moved) for r in cli_json("search", "refunds queue", "--project", "atlas")
    )


@pytest.mark.parametrize("how", ["copied", "changed"])
def test_a_transcript_that_only_looks_moved_is_read_as_its_own(tmp_path, how):
    """The old file still there (a copy: a fork keeps its copies apart, I152), or other first bytes
    (another file of the same name): nothing of the old path moves."""
    first, moved = moved_into_a_worktree(
        tmp_path / "claude", keep_old=how == "copied", changed_head=how == "changed"
    )
    assert {p for (p,) in db_rows("SELECT path FROM files")} == {str(first), str(moved)}
    assert {p for (p,) in db_rows("SELECT source_file FROM index_state")} == {str(first), str(moved)}


def test_what_was_forgotten_before_a_transcript_moved_stays_forgotten_when_read_again(tmp_path):
    """The forget's line tombstones move with the transcript: reading it again from its first byte
    (a recover does) does not bring the forgotten decision back."""
    _, moved = moved_into_a_worktree(tmp_path / "claude", forget=True)
    assert db_rows("SELECT DISTINCT source_file FROM tombstones WHERE kind = 'line'") == [(str(moved),)]
    with memory_store() as database, database.write():
        database.execute("UPDATE index_state SET byte_offset = 0, line_number = 0, head_hash = NULL")
    cli("backfill", str(moved), "--wait")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%RabbitMQ%'") == [(0,)]
    assert not any(
        "RabbitMQ" in r["content"] for r in cli_json("search", "billing events queue", "--all-projects")
    )


def test_a_transcript_moved_into_a_worktree_and_back_keeps_its_memories_where_it_ends(tmp_path):
    """ExitWorktree moves the transcript back to the project's folder: the rows follow it again."""
    first, moved = moved_into_a_worktree(tmp_path / "claude")
    said = _line("user", "Back in the main checkout: we decided to tag the release as 2.4.", 5)
    first.write_text(moved.read_text() + said + "\n")
    moved.unlink()
    cli("backfill", str(first), "--wait")
    assert db_rows("SELECT path FROM files") == [(str(first),)]
    assert db_rows("SELECT source_line, skip_reason FROM messages ORDER BY source_line") == [
        (1, None),
        (2, None),
        (4, None),
        (5, None),
    ]
    hits = cli_json("search", "which queue for the billing events", "--project", "atlas")
    assert {r["source_file"] for r in hits if "RabbitMQ" in r["content"]} == {str(first)}


def test_notes_of_no_session_are_headed_by_their_own_project():
    """Two notes of no session in two projects are two groups, each under its own project and
    "no session" (they were one group under the first one's project, headed "session None"), and a
    result's `file:line` is copied whole, the machine after it."""
    from total_recall import render

    def noted(n: int, project: str) -> dict:
        return {
            "kind": "idea",
            "id": n,
            "content": f"note {n}",
            "intent": "context",
            "confidence": 1.0,
            "answered": False,
            "superseded_by": [],
            "session": None,
            "project": project,
            "timestamp": "2026-03-02T10:00:00Z",
            "source_file": "total-recall-note",
            "source_line": n,
            "machine": "laptop",
            "span": None,
        }

    text = render.results_markdown([noted(1, "/p/spotter"), noted(2, "/p/streaming")])
    blocks = text.split("## ")[1:]
    assert len(blocks) == 2 and "None" not in text
    assert "_no session · 2026-03-02 · project /p/spotter_" in blocks[0] and "note 1" in blocks[0]
    assert "project /p/streaming_" in blocks[1] and "note 2" in blocks[1]
    assert "`total-recall-note:1` on laptop" in blocks[0]
