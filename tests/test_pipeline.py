"""The whole path with real processes: hook -> queue -> daemon -> database -> search."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import use_copy_of
from helpers import (
    cli,
    cli_json,
    daemon_process,
    db_rows,
    db_write,
    hook,
    local_rows,
    wait_for,
    wait_until_done,
    write_transcript,
)
from total_recall.extract.offline import APPROVAL_WORDS

PROJECT = "/home/dev/projects/demo"

CONVERSATION = [
    ("user", "We need a cache in front of the pricing API because every page load calls it three times."),
    (
        "assistant",
        "Two options: Redis as a shared cache, or an in-process LRU cache per worker. "
        "Redis adds an operational dependency.",
    ),
    ("user", "We decided to go with Redis for the pricing cache, with a 5 minute TTL."),
    ("assistant", "Good. I will add the client in src/pricing/cache.py and configure REDIS_URL."),
    (
        "user",
        "The issue is that the checkout tests fail with ConnectionRefusedError when Redis is not running.",
    ),
    ("assistant", "Fixed by starting a throwaway Redis in the pytest fixture redis_server_fixture."),
    ("user", "Should we also cache the tax rates?"),
    ("assistant", "Yes, the tax rates change only once a day, so caching them for an hour is safe."),
    ("user", "TODO: add a metric for the cache hit ratio before the release."),
    ("user", "thanks"),
]


def transcript_path(claude_dir, session="sess-0001"):
    return claude_dir / "projects" / "-home-dev-projects-demo" / f"{session}.jsonl"


def stop_payload(path, session: str = "sess-0001") -> dict:
    """What Claude Code's Stop hook gets on stdin for a turn of this transcript."""
    return {"session_id": session, "transcript_path": str(path), "cwd": PROJECT, "hook_event_name": "Stop"}


@pytest.fixture
def claude_dir(tmp_path):
    return tmp_path / "claude"


def counts() -> dict:
    return {
        t: db_rows(f"SELECT count(*) FROM {t}")[0][0]
        for t in ("ideas", "spans", "entities", "relations", "messages", "idea_entities", "memory_events")
    }


def test_backfill_indexes_every_line_once_and_is_idempotent(claude_dir, store):
    path = write_transcript(transcript_path(claude_dir), CONVERSATION, cwd=PROJECT)
    result = cli_json("backfill", str(path), "--wait")
    assert result["queued"] == 1
    state = db_rows("SELECT byte_offset, line_number, project, session_id FROM index_state")
    assert state == [(path.stat().st_size, len(CONVERSATION), PROJECT, "sess-0001")]
    # Every line with content is either an idea's source or a recorded skip with a reason.
    lines_with_ideas = {r[0] for r in db_rows("SELECT DISTINCT source_line FROM ideas")}
    skipped = dict(db_rows("SELECT source_line, skip_reason FROM messages WHERE skip_reason IS NOT NULL"))
    for line in range(1, len(CONVERSATION) + 1):
        assert line in lines_with_ideas or line in skipped, line
    assert skipped.get(10) == "acknowledgement"
    # Every idea knows where it came from and when it was said.
    for source_file, line, session, project, when in db_rows(
        "SELECT (SELECT path FROM files WHERE id = file_id), source_line, session_id, project, message_time "
        "FROM ideas"
    ):
        assert source_file == str(path) and 1 <= line <= len(CONVERSATION)
        assert session == "sess-0001" and project == PROJECT and when.startswith("2026-03-02T")
    before = counts()
    assert before["ideas"] >= 8
    again = cli_json("backfill", str(path), "--wait")
    assert again["queued"] == 0 and again["already_indexed"] == 1
    # Forcing a re-read of the same lines (offset lost) adds nothing either.
    db_write("UPDATE index_state SET byte_offset = 0, line_number = 0")
    cli_json("backfill", str(path), "--wait")
    after = counts()
    assert {k: after[k] for k in ("ideas", "spans", "entities", "relations", "messages")} == {
        k: before[k] for k in ("ideas", "spans", "entities", "relations", "messages")
    }


def test_hook_then_daemon_once_indexes_only_new_lines(claude_dir, store):
    path = write_transcript(transcript_path(claude_dir), CONVERSATION[:4], cwd=PROJECT)
    cli("init")
    payload = stop_payload(path)
    assert hook(payload).returncode == 0
    cli("daemon", "--once")
    first = db_rows("SELECT max(source_line) FROM ideas")[0][0]
    assert first == 4 or first == 3
    n_ideas = counts()["ideas"]
    write_transcript(
        path,
        CONVERSATION[4:],
        cwd=PROJECT,
        append=True,
        start=__import__("datetime").datetime(2026, 3, 2, 11, 0, tzinfo=__import__("datetime").timezone.utc),
    )
    assert hook(payload).returncode == 0
    cli("daemon", "--once")
    lines = [r[0] for r in db_rows("SELECT source_line FROM ideas ORDER BY id")]
    assert counts()["ideas"] > n_ideas
    assert min(lines[n_ideas:]) >= 5  # the second run only extracted the appended lines
    assert local_rows("SELECT state, count(*) FROM work_queue GROUP BY state") == [("done", 2)]


AGENT_REPORT = (
    "The flaky checkout test fails because the fixture reuses one Redis database across workers; "
    "give each pytest-xdist worker its own database number."
)


def test_a_subagent_that_never_announced_itself_is_read_after_its_session(claude_dir, store):
    """A subagent's file is announced by SubagentStop only; one killed with its session (the user quit
    while it ran in the background) never fires it. Reading the session queues the agent files under
    `<session>/subagents/` (a workflow's too) that hold bytes not yet indexed: their reports are found,
    under the session; a file waiting in the queue, parked or fully read is not queued again."""
    path = write_transcript(transcript_path(claude_dir), CONVERSATION[:2], cwd=PROJECT)
    agents = path.with_suffix("") / "subagents"
    agent = write_transcript(
        agents / "agent-a1b2.jsonl",
        [("user", "Find why checkout is flaky."), ("assistant", AGENT_REPORT)],
        session="sess-0001",
        cwd=PROJECT,
    )
    runner = write_transcript(
        agents / "workflows" / "wf_1-2" / "agent-c3d4.jsonl",
        [
            ("user", "Check the TTL."),
            ("assistant", "The pricing cache TTL is five minutes in every environment."),
        ],
        session="sess-0001",
        cwd=PROJECT,
    )
    (agents / "workflows" / "wf_1-2" / "journal.jsonl").write_text('{"type":"launched"}\n')
    cli("init")
    assert hook(stop_payload(path)).returncode == 0
    cli("daemon", "--once")
    hits = cli_json("search", "why is the checkout test flaky", "--project", PROJECT)
    assert any(r["source_file"] == str(agent) for r in hits if "own database number" in r["content"]), hits
    assert db_rows(
        "SELECT DISTINCT f.path, m.session_id FROM messages m JOIN files f ON f.id = m.file_id "
        "WHERE f.path != ? ORDER BY f.path",
        (str(path),),
    ) == [(str(agent), "sess-0001"), (str(runner), "sess-0001")]
    assert local_rows(
        "SELECT transcript_path, event FROM work_queue WHERE event = 'subagent' ORDER BY 1"
    ) == [
        (str(agent), "subagent"),
        (str(runner), "subagent"),
    ]
    # read again: nothing new in the agents, nothing queued for them
    assert hook(stop_payload(path)).returncode == 0
    cli("daemon", "--once")
    assert local_rows("SELECT count(*) FROM work_queue WHERE event = 'subagent'") == [(2,)]
    # an agent whose file grew is queued again, unless a row of it waits (here: parked, given up on)
    for grown in (agent, runner):
        write_transcript(
            grown, [("assistant", "One more finding.")], session="sess-0001", cwd=PROJECT, append=True
        )
    from total_recall import config, db

    local = db.connect(config.paths().db, migrate_to_head=False)
    with local.write():
        local.execute(
            "INSERT INTO work_queue (transcript_path, event, state, enqueued_at) "
            "VALUES (?, 'subagent', 'parked', 0)",
            (str(runner),),
        )
    local.close()
    assert hook(stop_payload(path)).returncode == 0
    cli("daemon", "--once")
    assert local_rows(
        "SELECT transcript_path, state, count(*) FROM work_queue WHERE event = 'subagent' "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    ) == [(str(agent), "done", 2), (str(runner), "done", 1), (str(runner), "parked", 1)]


def test_a_yes_to_a_proposal_in_the_next_turn_is_a_decision_and_answers_it(claude_dir, store):
    """Claude Code's usual way to decide: the assistant ends its turn proposing one action, the
    user's next prompt is a short yes. The hook queues each turn, so the yes is read in a later
    batch than the proposal: it becomes a decision holding the proposed action, at the yes's line,
    and the proposal stops being an open question (I104)."""
    turns = [
        ("user", "The upload test is flaky again on CI, find out why."),
        (
            "assistant",
            "The S3 mock's clock drifts between the multipart start and its completion. "
            "Shall I freeze time with freezegun in the upload fixture?",
        ),
    ]
    path = write_transcript(transcript_path(claude_dir), turns, cwd=PROJECT)
    cli("init")
    payload = stop_payload(path)
    assert hook(payload).returncode == 0
    cli("daemon", "--once")
    assert db_rows("SELECT intent, answered FROM ideas WHERE content LIKE '%freezegun%'") == [("question", 0)]
    later = __import__("datetime").datetime(2026, 3, 2, 10, 30, tzinfo=__import__("datetime").timezone.utc)
    write_transcript(path, [("user", "yes do that")], cwd=PROJECT, append=True, start=later)
    assert hook({**payload, "hook_event_name": "UserPromptSubmit"}).returncode == 0
    cli("daemon", "--once")
    decided = db_rows("SELECT content, source_line FROM ideas WHERE intent = 'decision'")
    assert decided == [("Freeze time with freezegun in the upload fixture.", 3)]
    assert db_rows("SELECT answered FROM ideas WHERE intent = 'question'") == [(1,)]
    found = cli_json("search", "what did we decide about the S3 mock clock drift", "--project", PROJECT)
    assert ("decision", 3) in [(r["intent"], r["source_line"]) for r in found[:2]]
    # A yes to a question of fact, or to a choice between two things, decides nothing.
    write_transcript(
        path,
        [
            ("assistant", "Is the CI runner on Ubuntu 22.04?"),
            ("user", "yes"),
            ("assistant", "Should I pin boto3, or upgrade moto?"),
            ("user", "ok"),
        ],
        cwd=PROJECT,
        append=True,
        start=later + __import__("datetime").timedelta(minutes=5),
    )
    assert hook(payload).returncode == 0
    cli("daemon", "--once")
    assert len(db_rows("SELECT id FROM ideas WHERE intent = 'decision'")) == 1


def test_search_finds_by_paraphrase_identifier_and_entity(claude_dir, store):
    path = write_transcript(transcript_path(claude_dir), CONVERSATION, cwd=PROJECT)
    cli("backfill", str(path), "--wait")

    def top(query, k=3, **kw):
        results = cli_json("search", query, "-k", str(k), "--project", "demo")
        return [r for r in results if r["kind"] == "idea"]

    paraphrase = top("which shared store did we pick for caching prices?")
    assert any("Redis for the pricing cache" in r["content"] for r in paraphrase)
    identifier = top("redis_server_fixture", k=1)
    assert identifier and "redis_server_fixture" in identifier[0]["content"]
    by_entity = top("src/pricing/cache.py", k=3)
    assert any("src/pricing/cache.py" in r["content"] for r in by_entity)
    hit = paraphrase[0]
    # --json points at the right file and line.
    line = json.loads(path.read_text().splitlines()[hit["source_line"] - 1])
    text = line["message"]["content"]
    text = text if isinstance(text, str) else text[0]["text"]
    assert hit["source_file"] == str(path) and hit["content"][:20] in text


def test_daemon_process_serves_searches_identical_to_in_process(claude_dir, tmp_path):
    path = write_transcript(transcript_path(claude_dir), CONVERSATION, cwd=PROJECT)
    cli("init")
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        payload = {
            "session_id": "sess-0001",
            "transcript_path": str(path),
            "cwd": PROJECT,
            "hook_event_name": "SessionEnd",
        }
        assert hook(payload).returncode == 0
        wait_until_done(1, timeout=90)
        status = cli_json("status")
        assert status["running"] and status["pid"] == proc.pid
        served = cli_json("search", "pricing cache decision", "--all-projects")
    assert proc.returncode == 0
    assert not cli_json("status")["running"]
    in_process = cli_json("search", "pricing cache decision", "--all-projects")
    assert served and [r["id"] for r in served] == [r["id"] for r in in_process]
    assert [r["score"] for r in served] == [r["score"] for r in in_process]


def test_second_daemon_exits_with_a_clear_message(tmp_path):
    cli("init")
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        second = cli("daemon", check=False, timeout=60)
        assert second.returncode == 1
        assert "already running" in second.stderr and str(proc.pid) in second.stderr


def _llm_answer(request: dict) -> str:
    """A well-behaved extraction model: one context item per new message, a topic named after the batch."""
    user = request["messages"][-1]["content"]
    obj = json.loads(user[user.index("{") :])
    return json.dumps(
        {
            "topic_update": {"name": "pricing cache", "summary": "caching the pricing API"},
            "new_span": None,
            "items": [
                {
                    "type": "context",
                    "content": f"LLM: {m['content'][:60]}",
                    "confidence": 0.8,
                    "source_line": m["line"],
                    "entities": [{"name": "Redis", "type": "technology"}],
                }
                for m in obj["new_messages"]
            ],
            "relations": [],
            "skip_lines": [],
        }
    )


LYING_ANSWERS = {
    "no-items": {"something": "else"},
    "wrong-types": {"items": [{"type": "decision", "content": 42, "source_line": 1}, "text", None]},
    "other-lines": {
        "items": [
            {"type": "decision", "content": f"LLM: said of line {n}", "source_line": n}
            for n in (1, 50, -1, "2x")
        ]
    },
}


@pytest.mark.parametrize("answer", LYING_ANSWERS.values(), ids=LYING_ANSWERS.keys())
def test_a_re_extraction_answer_silent_about_a_line_keeps_its_offline_memories(
    claude_dir, monkeypatch, answer
):
    """After an outage the LLM answers garbage, wrong types or lines of no batch: a line it says
    nothing of (no conforming item, no skip reason) keeps the memories the offline extractor made."""
    from fake_openai import FakeOpenAI

    with FakeOpenAI(chat=json.dumps(answer)) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        srv.queue_chat({"status": 400, "error": "model not loaded"})  # the outage: one refused call
        first = write_transcript(transcript_path(claude_dir, "sess-a"), CONVERSATION[:4], cwd=PROJECT)
        cli("backfill", str(first), "--wait")
        query = "SELECT source_line, content FROM ideas WHERE file_id = (SELECT id FROM files WHERE path = ?)"
        offline = sorted(db_rows(query, (str(first),)))
        assert {line for line, _ in offline} >= {2, 3, 4}
        second = write_transcript(transcript_path(claude_dir, "sess-b"), CONVERSATION[4:6], cwd=PROJECT)
        cli("backfill", str(second), "--wait")  # the LLM answers again, and re-extracts sess-a
        assert len(srv.requests_to("/v1/chat/completions")) >= 3
    after = sorted(db_rows(query, (str(first),)))
    kept = 1 if answer is LYING_ANSWERS["other-lines"] else 0  # line 1 was answered there
    assert [r for r in after if r[0] > kept] == [r for r in offline if r[0] > kept]
    assert db_rows("SELECT count(*) FROM fallback_batches WHERE done_at IS NULL") == [(0,)]


def _thinking_first_reply(path: Path, text: str) -> Path:
    """A prompt, then a reply as Claude Code writes one with extended thinking: a thinking line
    (line 2), then its text's line (line 3), one `message.id`."""
    from helpers import record

    when = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
    prompt = record(
        "user", "Which queue should the billing events go through?", session=path.stem, cwd=PROJECT, when=when
    )
    reply = record("assistant", text, session=path.stem, cwd=PROJECT, when=when, msg_id="msg_think")
    thinking = json.loads(json.dumps(reply))
    thinking["message"]["content"] = [
        {"type": "thinking", "thinking": "Weighing the queues.", "signature": "x"}
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in (prompt, thinking, reply)))
    return path


def test_llm_items_of_a_reply_after_its_thinking_line_point_at_its_text_line(claude_dir, monkeypatch):
    """The LLM names a reply by its message's first line (the thinking line); its items land on the
    text's line, whether extracted at once or again after an outage (read back from the chunks)."""
    from fake_openai import FakeOpenAI

    text = "We decided to route billing events through RabbitMQ, since it is already deployed."
    query = (
        "SELECT source_line FROM ideas WHERE content LIKE 'LLM: %' "
        "AND file_id = (SELECT id FROM files WHERE path = ?)"
    )
    with FakeOpenAI(chat=_llm_answer) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        first = _thinking_first_reply(transcript_path(claude_dir, "sess-a"), text)
        cli("backfill", str(first), "--wait")
        lines = {n for (n,) in db_rows(query, (str(first),))}
        assert 3 in lines and 2 not in lines  # the text's line, not the thinking line

        srv.queue_chat({"status": 400, "error": "model not loaded"})  # an outage: offline memories
        second = _thinking_first_reply(
            transcript_path(claude_dir, "sess-b"), text.replace("RabbitMQ", "Kafka")
        )
        cli("backfill", str(second), "--wait")
        assert db_rows(query, (str(second),)) == []
        third = write_transcript(transcript_path(claude_dir, "sess-c"), CONVERSATION[:2], cwd=PROJECT)
        cli("backfill", str(third), "--wait")  # the LLM answers again, and re-extracts sess-b
    lines = {n for (n,) in db_rows(query, (str(second),))}
    assert 3 in lines and 2 not in lines


def test_llm_extraction_makes_one_call_per_batch_and_falls_back_offline(claude_dir, monkeypatch, store):
    from fake_openai import FakeOpenAI

    with FakeOpenAI(chat=_llm_answer) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "extractor-test")
        path = write_transcript(transcript_path(claude_dir), CONVERSATION[:9], cwd=PROJECT)
        cli("backfill", str(path), "--wait")
        calls = srv.requests_to("/chat/completions")
        assert len(calls) == 1  # nine messages, one batch, one call
        body = calls[0]["json"]
        assert body["model"] == "extractor-test" and body["messages"][0]["role"] == "system"
        user = body["messages"][1]["content"]
        sent = json.loads(user[user.index("{") :])
        assert set(sent) >= {"hierarchy", "recent_messages", "new_messages", "related_topics"}
        assert [m["line"] for m in sent["new_messages"]] == list(range(1, 10))
        assert sent["new_messages"][2]["content"].startswith("We decided to go with Redis")
        ideas = db_rows("SELECT content FROM ideas ORDER BY source_line")
        assert len(ideas) == 9 and all(c.startswith("LLM: ") for (c,) in ideas)
        row = db_rows(
            "SELECT extractor, model, messages, prompt_tokens > 0, ok FROM llm_calls WHERE extractor = 'llm'"
        )
        assert row == [("llm", "extractor-test", 9, 1, 1)]
        stats = cli_json("stats")
        assert stats["llm_today"]["calls"] == 1 and stats["llm_today"]["prompt_tokens"] > 0

        # An endpoint that refuses (non-transient) sends the batch through the offline extractor.
        srv.queue_chat({"status": 400, "error": "model not loaded"})
        write_transcript(
            path,
            CONVERSATION[9:] + [("user", "We also need to cache the currency rates.")],
            cwd=PROJECT,
            append=True,
        )
        cli("backfill", str(path), "--wait")
        assert len(srv.requests_to("/chat/completions")) == 2
        offline = db_rows("SELECT content FROM ideas WHERE source_line = 11")
        assert offline and not offline[0][0].startswith("LLM: ")
        assert cli_json("stats")["llm_today"]["fallbacks_to_offline"] == 1
        assert db_rows("SELECT count(*) FROM messages")[0][0] == 11


def test_every_fixture_transcript_indexes_offline_with_ideas_or_reasons(
    fixture_transcripts, indexed_fixture_transcripts, isolated_home
):
    """No endpoint: every real transcript indexes, every content line yields an idea or a recorded skip.
    The folder is backfilled once per run by `total-recall backfill --wait` (conftest), shared with
    test_topics."""
    home, folder = indexed_fixture_transcripts
    use_copy_of(home, isolated_home)
    assert local_rows("SELECT count(*) FROM work_queue WHERE state != 'done'") == [(0,)]
    indexed = {r[0] for r in db_rows("SELECT source_file FROM index_state")}
    assert indexed == {str(folder / src.name) for src in fixture_transcripts}
    for source_file, size in db_rows("SELECT source_file, byte_offset FROM index_state"):
        assert size == (folder / source_file.rsplit("/", 1)[1]).stat().st_size
    # An idea points at the physical line holding its words: for a merged response that is one of
    # the message's lines (its chunks record which), not always the first.
    unexplained = db_rows(
        "SELECT m.file_id, m.source_line FROM messages m WHERE m.skip_reason IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM idea_sources s WHERE s.file_id = m.file_id AND (s.source_line = "
        "m.source_line "
        "OR s.source_line IN (SELECT c.source_line FROM chunks c WHERE c.file_id = m.file_id "
        "AND c.message_line = m.source_line)))"
    )
    assert unexplained == []
    assert db_rows("SELECT count(*) FROM ideas")[0][0] > 50
    assert_ideas_point_at_their_words(folder)


WORDS = re.compile(r"[^\W\d_]+|\d+")
TOOL_DESCRIPTOR = re.compile(r"\[tool [^\]]*\]")  # "[tool Glob: **/mix.exs]": what ran, from the next line


def line_words(path, number: int) -> set[str]:
    """Every word a reader sees on one physical transcript line (text blocks, prompts, tool data)."""
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[number - 1])
    seen: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            seen.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict) and value.get("type") not in ("thinking", "redacted_thinking"):
            for v in value.values():
                walk(v)

    walk((record.get("message") or {}).get("content"))
    walk(record.get("toolUseResult"))
    walk((record.get("attachment") or {}).get("prompt"))  # a prompt typed while Claude worked
    return set(WORDS.findall(" ".join(seen).lower()))


def tool_names(path, number: int) -> set[str]:
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[number - 1])
    content = (record.get("message") or {}).get("content")
    return (
        {b.get("name") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"}
        if isinstance(content, list)
        else set()
    )


def assert_ideas_point_at_their_words(folder) -> None:
    """Every idea's source line holds (nearly all of) the idea's own words."""
    rows = db_rows("SELECT id, content, (SELECT path FROM files WHERE id = file_id), source_line FROM ideas")
    wrong = []
    for idea_id, content, source_file, line in rows:
        words = set(WORDS.findall(TOOL_DESCRIPTOR.sub(" ", content).lower()))
        path = folder / source_file.rsplit("/", 1)[1]
        if tool_names(path, line) & {"ExitPlanMode", "TodoWrite"}:
            continue  # a plan or todo list points at the call that approved or updated it
        have = line_words(path, line)
        if have and have <= APPROVAL_WORDS:
            # A user's yes to a proposal makes the decision there; its words are the proposal's,
            # on the lines before it (DESIGN.md I43).
            have = have.union(*(line_words(path, n) for n in range(max(1, line - 5), line)))
        if words and len(words & have) / len(words) < 0.8:
            wrong.append((idea_id, content[:300], source_file.rsplit("/", 1)[1], line, sorted(words - have)))
    assert wrong == []


def test_sigterm_stops_between_batches_and_the_rest_stays_queued(claude_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_MAX_BATCH_MESSAGES", "5")
    turns = [
        (
            "user" if i % 2 == 0 else "assistant",
            f"Note {i}: the {w} service keeps its state in the {w}_store table, replicated nightly.",
        )
        for i, w in enumerate(["billing", "search", "auth", "upload", "export", "mail"] * 40)
    ]
    path = write_transcript(transcript_path(claude_dir), turns, cwd=PROJECT)
    cli("init")
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        hook(
            {
                "session_id": "sess-0001",
                "transcript_path": str(path),
                "cwd": PROJECT,
                "hook_event_name": "SessionEnd",
            }
        )
        wait_for(
            lambda: (db_rows("SELECT line_number FROM index_state") or [(0,)])[0][0] >= 5,
            timeout=90,
            interval=0.02,
        )
    assert proc.returncode == 0
    line = db_rows("SELECT line_number FROM index_state")[0][0]
    assert 5 <= line < len(turns)  # stopped after a batch, long before the end
    assert local_rows("SELECT state FROM work_queue") == [("pending",)]  # the rest is still queued
    cli("daemon", "--once")
    assert db_rows("SELECT line_number FROM index_state")[0][0] == len(turns)
    assert db_rows("SELECT count(DISTINCT source_line) FROM messages")[0][0] == len(turns)


@pytest.mark.slow
def test_200_concurrent_hooks_while_the_daemon_writes_lose_nothing(claude_dir, tmp_path, monkeypatch):
    """Hooks fire while the daemon is busy writing a large backfill: every turn still gets indexed."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("TOTAL_RECALL_DAEMON_BATCH_WINDOW", "0.2")
    big = write_transcript(
        transcript_path(claude_dir, "big"),
        [
            (
                "user" if i % 2 == 0 else "assistant",
                f"Step {i}: the {w} worker writes its checkpoint to {w}_ckpt.",
            )
            for i, w in enumerate(["ingest", "resize", "notify", "audit"] * 150)
        ],
        cwd=PROJECT,
    )
    small = [
        write_transcript(
            transcript_path(claude_dir, f"s{i:03d}"),
            [("user", f"Ticket {i}: the flaky test is test_upload_{i} on the CI runner.")],
            cwd=PROJECT,
        )
        for i in range(200)
    ]
    cli("init")
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        hook(
            {
                "session_id": "big",
                "transcript_path": str(big),
                "cwd": PROJECT,
                "hook_event_name": "SessionEnd",
            }
        )
        wait_for(
            lambda: (db_rows("SELECT line_number FROM index_state") or [(0,)])[0][0] > 0,
            timeout=60,
            interval=0.02,
        )  # the daemon is now writing the backfill
        payloads = [stop_payload(p, p.stem) for p in small]
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(hook, payloads))
        assert [(r.returncode, r.stdout) for r in results] == [(0, "")] * 200
        wait_for(
            lambda: db_rows("SELECT count(*) FROM index_state WHERE byte_offset > 0")[0][0] == 201,
            timeout=300,
            interval=0.5,
        )
    assert proc.returncode == 0
    indexed = {r[0] for r in db_rows("SELECT path FROM files WHERE id IN (SELECT file_id FROM messages)")}
    assert indexed == {str(p) for p in small} | {str(big)}
    assert local_rows("SELECT count(*) FROM work_queue WHERE state != 'done'") == [(0,)]
    assert db_rows("PRAGMA integrity_check") == [("ok",)]


def test_batches_that_fell_back_offline_are_re_extracted_once_the_llm_answers(claude_dir, monkeypatch, store):
    from fake_openai import FakeOpenAI

    with FakeOpenAI(chat=_llm_answer) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "extractor-test")
        srv.queue_chat({"status": 400, "error": "model not loaded"})  # the outage: one refused call
        first = write_transcript(transcript_path(claude_dir, "sess-a"), CONVERSATION[:4], cwd=PROJECT)
        cli("backfill", str(first), "--wait")
        offline = db_rows(
            "SELECT content FROM ideas WHERE file_id = (SELECT id FROM files WHERE path = ?)", (str(first),)
        )
        assert offline and not any(c.startswith("LLM: ") for (c,) in offline)
        assert db_rows("SELECT count(*) FROM fallback_batches WHERE done_at IS NULL") == [(1,)]

        second = write_transcript(transcript_path(claude_dir, "sess-b"), CONVERSATION[4:6], cwd=PROJECT)
        cli("backfill", str(second), "--wait")  # the LLM answers again
        replaced = db_rows(
            "SELECT content, source_line FROM ideas WHERE file_id = (SELECT id FROM files WHERE "
            "path = ?) ORDER BY source_line",
            (str(first),),
        )
        assert [line for _, line in replaced] == [1, 2, 3, 4]
        assert all(c.startswith("LLM: ") for c, _ in replaced), replaced
        assert db_rows("SELECT count(*) FROM fallback_batches WHERE done_at IS NULL") == [(0,)]
        assert db_rows(
            "SELECT count(*) FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?)",
            (str(first),),
        ) == [(4,)]
