"""Memory that stays true: dedup, supersede, pin/forget/review, session-start context, digests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from conftest import REPO
from helpers import cli, cli_json, db_rows, db_write, fts_ids, write_transcript

pytestmark = pytest.mark.usefixtures("store")  # every test on SQLite and on PostgreSQL

PROJECT = "/home/dev/projects/shop"
DAY = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def session(claude_dir, name, turns, day_offset=0):
    path = claude_dir / "projects" / "-home-dev-projects-shop" / f"{name}.jsonl"
    write_transcript(path, turns, cwd=PROJECT, start=DAY + timedelta(days=day_offset))
    cli("backfill", str(path), "--wait")
    return path


def ideas_like(text):
    return db_rows(
        "SELECT id, content, mention_count, confidence, pinned FROM ideas WHERE content LIKE ?",
        (f"%{text}%",),
    )


def test_same_fact_in_three_sessions_is_one_idea_mentioned_three_times(tmp_path):
    claude = tmp_path / "claude"
    fact = "The staging database runs on port 5433."
    first = session(claude, "s1", [("user", fact), ("assistant", "Noted, I will use that port.")], 0)
    confidence_once = ideas_like("port 5433")[0][3]
    session(claude, "s2", [("user", "Reminder: the staging database runs on port 5433!")], 1)
    session(claude, "s3", [("user", fact)], 2)
    rows = ideas_like("port 5433")
    assert len(rows) == 1, rows
    idea_id, _, mentions, confidence, _ = rows[0]
    assert mentions == 3
    assert confidence > confidence_once
    sources = db_rows(
        "SELECT f.path FROM idea_sources s JOIN files f ON f.id = s.file_id WHERE s.idea_id = ? "
        "ORDER BY f.path",
        (idea_id,),
    )
    assert len(sources) == 3 and sources[0][0] == str(first)
    result = cli_json("search", "staging database port", "--project", "shop")
    hit = next(r for r in result if r["id"] == idea_id)
    assert hit["mention_count"] == 3 and len(hit["sources"]) == 3
    # Re-indexing the sessions does not count them again.
    cli("backfill", str(first.parent), "--wait")
    assert ideas_like("port 5433")[0][2] == 3


def test_a_relation_joins_the_ideas_that_say_it_not_the_first_and_last_of_their_lines(tmp_path):
    # Both messages hold several ideas: the executor used to take the last idea of the line the
    # relation starts on and the first of the line it ends on, whatever the extractor meant.
    claude = tmp_path / "claude"
    first = "We will keep the invoice PDFs in an S3 bucket. We decided to use MySQL for the orders database."
    session(claude, "s1", [("user", first)], 0)
    later = (
        "The nightly export job needs a retry policy. We switched from MySQL to Postgres for the orders "
        "database. Remember to rotate the staging credentials every month."
    )
    session(claude, "s2", [("user", later)], 3)
    old = ideas_like("use MySQL")[0][0]
    new = ideas_like("switched from MySQL to Postgres")[0][0]
    assert len(db_rows("SELECT id FROM ideas")) >= 4  # neither line is one idea
    assert db_rows("SELECT from_id, to_id FROM relations WHERE relation_type = 'supersedes'") == [(new, old)]
    assert ideas_like("S3 bucket")[0][0] not in {r[0] for r in db_rows("SELECT to_id FROM relations")}


def test_upgrading_removes_the_supersedes_links_the_offline_extractor_made_before(tmp_path, store):
    # Links made before I119/I120 were mostly wrong (a reply's "feel free to ask!" superseding the
    # user's request): the migration removes the offline extractor's `supersedes`, logged; links an
    # LLM made and the offline extractor's other relations stay.
    from helpers import memory_store
    from total_recall import config, db

    turns = [
        ("user", f"We decided to use {name} for the {what}.")
        for name, what in (
            ("MySQL", "orders database"),
            ("Redis", "session cache"),
            ("Caddy", "TLS proxy"),
            ("Kafka", "event bus"),
        )
    ]
    session(tmp_path / "claude", "s1", turns, 0)
    a, b, c, d = (ideas_like(name)[0][0] for name in ("MySQL", "Redis", "Caddy", "Kafka"))
    made = [
        (a, b, "supersedes", "extract:offline"),
        (c, d, "supersedes", "extract:llm"),
        (b, c, "answers", "extract:offline"),
    ]
    statements = []
    for n, (src, dst, kind, cause) in enumerate(made, 900):
        statements += [
            (
                "INSERT INTO relations (id, from_id, to_id, relation_type, created_at) "
                "VALUES (?, ?, ?, ?, 0)",
                (n, src, dst, kind),
            ),
            (
                "INSERT INTO memory_events (at, kind, object_id, action, old, new, cause) "
                "VALUES (0, 'relation', ?, 'insert', NULL, ?, ?)",
                (n, json.dumps({"from": src, "to": dst, "type": kind}), cause),
            ),
        ]
    db_write(*statements)
    with memory_store() as database, database.write():  # as a database the code before 0013 left
        if store == "postgres":
            database.set_meta("schema_version", 5)
        else:  # and without what later migrations added (0015, 0017: columns, which cannot be added twice)
            database.execute("DROP INDEX messages_uuid")
            database.execute("ALTER TABLE messages DROP COLUMN uuid")
            database.execute("ALTER TABLE index_state DROP COLUMN tail_hash")
            database.execute("PRAGMA user_version = 12")
    db.open_store(config.load()).close()  # what every process does when it starts
    assert sorted(db_rows("SELECT from_id, to_id, relation_type FROM relations WHERE id >= 900")) == sorted(
        [(c, d, "supersedes"), (b, c, "answers")]
    )
    removed = db_rows(
        "SELECT object_id, action, cause FROM memory_events WHERE object_id = 900 AND action = 'delete'"
    )
    assert removed == [(900, "delete", "migration:0006" if store == "postgres" else "migration:0013")]


def test_a_relation_within_one_batch_ends_on_the_idea_it_names(tmp_path):
    first = "We will keep the invoice PDFs in an S3 bucket. We decided to use MySQL for the orders database."
    later = "Change of plan: we switched from MySQL to Postgres for the orders database."
    session(tmp_path / "claude", "s1", [("user", first), ("assistant", "Noted."), ("user", later)], 0)
    old = ideas_like("use MySQL")[0][0]
    new = ideas_like("switched from MySQL to Postgres")[0][0]
    assert db_rows("SELECT from_id, to_id FROM relations WHERE relation_type = 'supersedes'") == [(new, old)]


def test_switch_from_x_to_y_supersedes_and_search_shows_y_first(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "We decided to use MySQL for the orders database.")], 0)
    session(claude, "s2", [("user", "We switched from MySQL to Postgres for the orders database.")], 3)
    old = ideas_like("use MySQL")[0][0]
    new = ideas_like("switched from MySQL to Postgres")[0][0]
    assert db_rows("SELECT from_id, to_id FROM relations WHERE relation_type = 'supersedes'") == [(new, old)]
    results = [
        r for r in cli_json("search", "which database for orders", "--project", "shop") if r["kind"] == "idea"
    ]
    ids = [r["id"] for r in results]
    assert ids.index(new) < ids.index(old)
    assert ids.index(old) == ids.index(new) + 1  # the history sits right under its successor
    old_hit = next(r for r in results if r["id"] == old)
    assert old_hit["superseded_by"] == [new]
    assert {"type": "supersedes", "direction": "in", "id": new}.items() <= {
        **next(x for x in old_hit["relations"] if x["type"] == "supersedes")
    }.items()
    text = cli("search", "which database for orders", "--project", "shop").stdout
    assert text.index("Postgres") < text.index("use MySQL")


def test_forget_removes_from_every_index_and_backfill_does_not_restore(tmp_path):
    claude = tmp_path / "claude"
    path = session(
        claude,
        "s1",
        [
            ("user", "The vault passphrase hint is the name of the first office cat."),
            ("user", "We decided to deploy on Fridays only before noon."),
        ],
    )
    idea_id = ideas_like("passphrase hint")[0][0]
    out = cli_json("forget", str(idea_id))
    assert out["forgotten"] == 1
    assert ideas_like("passphrase hint") == []
    assert fts_ids("ideas", "passphrase") == []
    assert db_rows("SELECT count(*) FROM idea_sources WHERE idea_id = ?", (idea_id,))[0][0] == 0
    events = db_rows(
        "SELECT action, old FROM memory_events WHERE object_id = ? AND kind = 'idea' ORDER BY id", (idea_id,)
    )
    # The event stays, the forgotten text does not (issue 12).
    assert events[-1][0] == "forget" and all("passphrase" not in (e[1] or "") for e in events)
    results = cli_json("search", "office cat passphrase", "--all-projects")
    assert not [r for r in results if r["kind"] == "idea" and r["id"] == idea_id]
    assert all("passphrase" not in (r["content"] or "") + (r.get("name") or "") for r in results)
    assert fts_ids("spans", "passphrase") == [] and fts_ids("chunks", "passphrase") == []
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%passphrase%'")[0][0] == 0
    # Re-index from scratch: the tombstone keeps it out.
    db_write("DELETE FROM index_state", "DELETE FROM messages")
    cli("backfill", str(path), "--wait")
    assert ideas_like("passphrase hint") == []
    assert ideas_like("deploy on Fridays")  # the rest is back


def test_a_sessions_title_is_shown_redacted_and_forgotten_with_what_it_may_name(tmp_path):
    """Claude Code titles a session for its /resume picker (the user's `/rename`, else its own): the
    topics show it, a secret in it is not stored, and forgetting a memory of the session takes its
    titles too (they may name what is forgotten), also when the transcript is read again."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl"
    said = [
        ("user", "The vault passphrase hint is the name of the first office cat."),
        ("assistant", "Noted."),
    ]
    write_transcript(path, said, cwd=PROJECT, start=DAY)
    key = "sk-proj-" + "Zx9Kq2Lm8Np4Rs6Tv1Wy3Ab5Cd7Ef0Gh"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(
            json.dumps({"type": "custom-title", "sessionId": "s1", "customTitle": "Office cat vault hint"})
            + "\n"
        )
        fh.write(
            json.dumps({"type": "ai-title", "sessionId": "s1", "aiTitle": f"Vault hint, key {key}"}) + "\n"
        )
    cli("backfill", str(path), "--wait")
    [topics] = cli_json("topics")
    assert (topics["session"], topics["title"]) == ("s1", "Office cat vault hint")  # the user's, though older
    assert "## session s1 — Office cat vault hint" in cli("topics").stdout
    assert [t["session"] for t in cli_json("topics", "office CAT")] == ["s1"]  # by a part of its title
    found = cli_json("search", "vault passphrase hint", "--project", "shop")
    assert found and {r["session_title"] for r in found} == {"Office cat vault hint"}
    assert (
        "_session s1 (Office cat vault hint) · "
        in cli("search", "vault passphrase hint", "--project", "shop").stdout
    )
    refused = cli("forget", "--session", "office cat", check=False)
    assert refused.returncode != 0 and "no indexed session matches" in refused.stderr  # forget takes ids
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{key}%",)) == [(0,)]
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%Vault hint, key [REDACTED%'") == [(1,)]

    cli_json("forget", str(ideas_like("passphrase hint")[0][0]))
    titles = "SELECT count(*) FROM messages WHERE lower(content) LIKE '%vault%' OR content LIKE '%cat%'"
    assert db_rows(titles) == [(0,)]
    assert [t["title"] for t in cli_json("topics")] == [None]
    db_write("DELETE FROM index_state", "DELETE FROM messages")
    cli("backfill", str(path), "--wait")
    assert db_rows(titles) == [(0,)]
    kept_out = "SELECT count(*) FROM messages WHERE source_line IN (3, 4) AND skip_reason = 'forgotten'"
    assert db_rows(kept_out) == [(2,)]  # the title lines, kept out by their tombstones


def test_the_pull_request_a_session_opened_names_it_and_is_found_by_its_number(tmp_path):
    """Claude Code 2.1.332 writes a `pr-link` record when a `gh pr create` of the session prints the
    pull request's address, and again, unchanged, with the session's metadata when it ends or resumes.
    It is a line of its own kind: never extracted, found by its words, and every result of the session
    names the pull request, once; a forget of the session takes it."""
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl"
    said = [
        ("user", "Open a pull request for the refund webhook retries."),
        ("assistant", "Opened it: the refund webhook retries back off exponentially now."),
    ]
    write_transcript(path, said, cwd=PROJECT, start=DAY)
    url = "https://github.com/acme/shop/pull/42"
    link = {"type": "pr-link", "sessionId": "s1", "prNumber": 42, "prUrl": url, "prRepository": "acme/shop"}

    def append_link(minute):
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({**link, "timestamp": f"2026-03-02T09:{minute:02d}:00.000Z"}) + "\n")

    append_link(5)
    append_link(6)  # the session ended: its metadata, the link among it, written again
    cli("backfill", str(path), "--wait")
    text = f"PR #42 (pull request) in acme/shop: {url}"
    assert db_rows("SELECT source_line, kind, skip_reason, content FROM messages WHERE kind = 'pr_link'") == [
        (3, "pr_link", "pr_link", text)
    ]
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%pull/42%'") == [(0,)]  # never extracted
    found = cli_json("search", "acme/shop pull request", "--project", "shop")
    assert ("message", "pr_link", 3) in [
        (r["kind"], r.get("message_kind"), r.get("source_line")) for r in found
    ]
    assert all(r["session_prs"] == [text] for r in found)
    shown = cli("search", "refund webhook retries", "--project", "shop").stdout
    assert f"_session s1 · PR #42 {url} · " in shown
    # The next session starts knowing it, and "where did we leave off" names it.
    from helpers import memory_store
    from total_recall import digest

    with memory_store() as database:
        start = digest.context_digest(database, PROJECT)
    assert f"## Last session (2026-03-02, PR #42 {url}) topics" in start
    asked = cli("search", "where did we leave off", "--project", "shop", "--json")
    assert f"searched the session: s1 (PR #42 {url})" in asked.stderr
    assert cli_json("topics")[0]["prs"] == [text]
    assert f"## session s1 · PR #42 {url}" in cli("topics").stdout
    # The session resumed and ended again: the link is written once more, and still named once.
    append_link(30)
    cli("backfill", str(path), "--wait")
    assert cli_json("search", "refund webhook retries", "--project", "shop")[0]["session_prs"] == [text]
    cli_json("forget", "--session", "s1")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%pull/42%'") == [(0,)]


def test_a_question_naming_a_pull_request_asks_the_session_that_opened_it(tmp_path):
    """ "What did we change in PR #42?": the session that opened pull request 42 (its PR link line) is
    searched, the words that named it left out; with nothing else asked, that session is recapped. A
    pull request no session of the scope opened leaves the query as it is (I168)."""
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-shop"
    opened = [
        ("user", "Make the refund webhook retry with exponential backoff."),
        ("assistant", "We decided the refund webhook retries five times, doubling the wait each time."),
    ]
    write_transcript(folder / "s1.jsonl", opened, cwd=PROJECT, start=DAY)
    link = {"prNumber": 42, "prUrl": "https://github.com/acme/shop/pull/42", "prRepository": "acme/shop"}
    with (folder / "s1.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "pr-link", "sessionId": "s1", **link}) + "\n")
    later = [
        ("user", "The refund webhook still times out on large orders."),
        ("assistant", "We decided to raise the refund webhook timeout to thirty seconds."),
    ]
    write_transcript(folder / "s2.jsonl", later, cwd=PROJECT, start=DAY + timedelta(days=1))
    cli("backfill", "--all", "--wait")

    asked = cli("search", "how does the refund webhook retry in PR #42", "--project", "shop", "--json")
    found = json.loads(asked.stdout)
    assert "searched the session that opened PR #42: s1" in asked.stderr
    assert found and {r["session"] for r in found} == {"s1"}
    assert any("doubling the wait" in r["content"] for r in found)
    recap = cli("search", "what did we do in PR 42?", "--project", "shop", "--json")
    assert recap.returncode == 0 and {r["session"] for r in json.loads(recap.stdout)} == {"s1"}
    assert any("doubling the wait" in r["content"] for r in json.loads(recap.stdout))
    other = cli("search", "refund webhook in PR #7", "--project", "shop", "--json")  # opened by no session
    assert "searched the session" not in other.stderr
    assert {r["session"] for r in json.loads(other.stdout)} == {"s1", "s2"}


def test_forget_scope_vector_rows_go_too(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "The build server is called hydra and lives in rack 4.")])
    session(claude, "s2", [("user", "The release train leaves every second Tuesday.")], 1)
    assert db_rows("SELECT count(*) FROM idea_embeddings")[0][0] >= 2
    cli_json("forget", "--session", "s1")
    remaining = [r[0] for r in db_rows("SELECT content FROM ideas")]
    assert remaining and all("hydra" not in c for c in remaining)
    ids = {r[0] for r in db_rows("SELECT id FROM ideas")}
    vec_ids = {r[0] for r in db_rows("SELECT idea_id FROM idea_embeddings")}
    assert vec_ids == ids
    assert db_rows("SELECT count(*) FROM messages WHERE session_id = 's1'")[0][0] == 0


def test_pinned_memory_change_waits_for_review(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "We decided to use MySQL for the orders database.")], 0)
    old = ideas_like("use MySQL")[0][0]
    assert cli_json("pin", str(old))["pinned"] is True
    session(claude, "s2", [("user", "We switched from MySQL to Postgres for the orders database.")], 3)
    new = ideas_like("switched from MySQL")[0][0]
    assert db_rows("SELECT count(*) FROM relations WHERE to_id = ?", (old,))[0][0] == 0
    pending = cli_json("review")
    assert [(p["target_id"], p["new_idea_id"], p["kind"]) for p in pending] == [(old, new, "supersedes")]
    assert ideas_like("use MySQL")[0][4] == 1  # still pinned, unchanged
    cli_json("review", "--apply", str(pending[0]["id"]))
    assert db_rows("SELECT from_id, to_id FROM relations WHERE relation_type = 'supersedes'") == [(new, old)]
    assert ideas_like("use MySQL")[0][4] == 0 and ideas_like("switched from MySQL")[0][4] == 1
    assert cli_json("review") == []


def test_edit_and_pin_are_logged(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "The API rate limit is 100 requests per minute.")])
    idea_id = ideas_like("rate limit")[0][0]
    cli_json("edit", str(idea_id), "The API rate limit is 120 requests per minute.")
    assert ideas_like("120 requests")[0][0] == idea_id
    assert fts_ids("ideas", "120") == [idea_id] and fts_ids("ideas", "100") == []
    old, new = db_rows(
        "SELECT old, new FROM memory_events WHERE action = 'edit' AND object_id = ?", (idea_id,)
    )[0]
    assert "100 requests" in json.loads(old)["content"] and "120 requests" in json.loads(new)["content"]
    cli_json("pin", str(idea_id))
    cli_json("unpin", str(idea_id))
    actions = [
        r[0] for r in db_rows("SELECT action FROM memory_events WHERE object_id = ? ORDER BY id", (idea_id,))
    ]
    assert actions[-3:] == ["edit", "pin", "unpin"]
    bad = cli("edit", "999999", "x", check=False)
    assert bad.returncode == 1 and "no memory with id 999999" in bad.stderr and "Traceback" not in bad.stderr


def test_an_edit_renames_the_topics_that_said_the_old_text(tmp_path):
    """A topic named or summarised from a memory the user then edits says the new text, in the
    topics and in the session-start digest; the edit's own log keeps the old (I214)."""
    from total_recall import config

    claude = tmp_path / "claude"
    session(
        claude, "s1", [("user", "We decided the vault passphrase hint is oysterbluff42 for the staging box.")]
    )
    idea_id = ideas_like("passphrase hint")[0][0]
    assert any("oysterbluff42" in f"{n} {s}" for n, s in db_rows("SELECT name, summary FROM spans"))
    cli_json("edit", str(idea_id), "We decided on a vault passphrase hint for the staging box.")
    assert not any("oysterbluff42" in f"{n} {s}" for n, s in db_rows("SELECT name, summary FROM spans"))
    digests = "".join(p.read_text() for p in config.paths().digests.glob("*.md"))
    assert "oysterbluff42" not in digests and "vault passphrase hint" in digests


def run_session_start(payload, env_extra=None):
    import os

    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run(
        [sys.executable, "-I", "-S", str(REPO / "hooks" / "session_start.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


def test_session_start_lists_an_earlier_open_question_within_budget(tmp_path):
    claude = tmp_path / "claude"
    session(
        claude,
        "s1",
        [
            ("user", "Should we shard the events table by tenant or by month?"),
            ("user", "We decided to keep the API versioned in the URL path."),
        ],
    )
    pinned = ideas_like("versioned in the URL")[0][0]
    cli("pin", str(pinned))
    session(claude, "s2", [("user", "TODO: write the migration guide for v2 clients.")], 1)
    payload = {"session_id": "s3", "cwd": PROJECT, "hook_event_name": "SessionStart", "source": "startup"}
    out = run_session_start(payload).stdout
    assert out.startswith("<total-recall-context>") and out.rstrip().endswith("</total-recall-context>")
    assert "shard the events table" in out  # the open question from an earlier session
    assert "versioned in the URL" in out and "migration guide" in out
    assert out.index("versioned in the URL") < out.index("shard the events table")  # pinned first
    small = run_session_start(payload, {"TOTAL_RECALL_CONTEXT_BUDGET_CHARS": "200"}).stdout
    body = small.split("<total-recall-context>\n", 1)[1].rsplit("</total-recall-context>", 1)[0]
    assert 0 < len(body) <= 200
    assert run_session_start(payload, {"TOTAL_RECALL_CONTEXT_ENABLED": "0"}).stdout == ""


def test_digest_recent_and_maintain(tmp_path):
    claude = tmp_path / "claude"
    session(
        claude,
        "s1",
        [
            ("user", "The checkout page crashes with a KeyError on empty carts."),
            ("assistant", "Fixed by defaulting the cart to an empty list in cart_view."),
            ("user", "We always use UTC timestamps in the database."),
        ],
    )
    text = cli("digest", "shop").stdout
    for heading in ("# shop", "## Conventions", "## Known problems and their fixes"):
        assert heading in text
    assert re.search(r"^\d+ memories from 1 session, ", text, re.M)  # not "1 sessions"
    assert "KeyError" in text and "cart_view" in text and f"{claude}" in text  # sources shown
    branch_digest = cli("digest", "shop", "--branch", "main").stdout
    assert "# shop @ main" in branch_digest
    days = cli_json("recent", "--days", "36500", "--all-projects")
    assert days and days[0]["name"] == "shop" and days[0]["ideas"]
    report = cli_json("maintain")
    assert report["integrity"] == "ok" and report["duplicates_merged"] == 0


def test_the_session_start_digest_names_the_last_sessions_title_and_shows_an_item_said_twice_once(tmp_path):
    """The last session is named by its day and title; a plan's task listed twice ("Task 1: X" and "X", "Epic:
    Y" and "Epic 0p7: Y") is one todo there, and a shorter item inside a longer one with more to say
    ("Add tests" and "Add tests for the parser") is two."""
    from helpers import memory_store
    from total_recall import digest

    path = session(tmp_path / "claude", "s1", [("user", "We decided to keep the orders in Postgres.")])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "ai-title", "sessionId": "s1", "aiTitle": "Orders storage"}) + "\n")
    cli("backfill", str(path), "--wait")
    with memory_store() as database:
        text = digest.context_digest(database, PROJECT)
    assert f"## Last session ({DAY:%Y-%m-%d}, Orders storage) topics" in text
    # A session whose lines carry no time (a trimmed or hand-made transcript) is named without a day,
    # not as "(, Orders storage)".
    untimed = tmp_path / "claude" / "projects" / "-home-dev-projects-depot" / "s0.jsonl"
    untimed.parent.mkdir(parents=True)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line.pop("timestamp", None)
        line["sessionId"], line["cwd"] = "s0", "/home/dev/projects/depot"
        line["uuid"] = f"{line.get('uuid')}-0"  # not a copy of s1's records (a fork's are skipped)
    untimed.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    cli("backfill", str(untimed), "--wait")
    with memory_store() as database:
        text = digest.context_digest(database, "/home/dev/projects/depot")
    assert "## Last session (Orders storage) topics" in text

    said = [
        "Task 1: Install the quality tools and configure Credo",
        "Install the quality tools and configure Credo",
        "Epic spotter-0p7: Setup Code Quality Tools (Credo, Dialyxir, mix_audit)",
        "Epic: Setup Code Quality Tools (Credo, Dialyxir, mix_audit)",
        "Add tests",
        "Add tests for the parser",
    ]
    kept = digest._distinct([{"content": c} for c in said], 6)
    assert [r["content"] for r in kept] == [said[0], said[2], said[4], said[5]]
    assert len(digest._distinct([{"content": c} for c in said], 2)) == 2


def test_near_duplicate_guard_merges_rewordings_not_different_facts():
    from total_recall.store import same_fact

    assert same_fact(
        "The staging database runs on port 5433.", "Reminder: the staging database runs on port 5433!"
    )
    assert same_fact("We decided to use Redis for caching.", "We decided to use Redis as the cache.")
    assert not same_fact(
        "We chose Meilisearch for the catalogue search.", "We chose Typesense for the catalogue search."
    )
    assert not same_fact(
        "The API rate limit is 100 requests per minute.", "The API rate limit is 120 requests per minute."
    )
    assert not same_fact("Call fetch_rows() in export.py.", "Call fetch_all() in export.py.")


def test_a_decision_restated_with_lead_ins_in_three_sessions_is_one_memory(tmp_path):
    claude = tmp_path / "claude"
    fact = "We decided to use PostgreSQL 16 for the orders database."
    session(claude, "s1", [("user", fact)], 0)
    session(claude, "s2", [("user", "Reminder: we decided to use PostgreSQL 16 for the orders database.")], 1)
    session(
        claude, "s3", [("user", "As decided, we decided to use PostgreSQL 16 for the orders database.")], 2
    )
    rows = db_rows("SELECT content, mention_count, intent FROM ideas WHERE content LIKE '%PostgreSQL 16%'")
    assert rows == [(fact, 3, "decision")]


def test_after_pin_the_very_next_session_start_shows_the_pinned_memory(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "The staging database listens on port 5433 behind the VPN.")])
    idea = ideas_like("port 5433")[0][0]
    payload = {"session_id": "s2", "cwd": PROJECT, "hook_event_name": "SessionStart", "source": "startup"}
    assert "## Pinned" not in run_session_start(payload).stdout
    cli("pin", str(idea))  # no indexing in between
    out = run_session_start(payload).stdout
    assert "## Pinned" in out and out.index("## Pinned") < out.index("port 5433")


def test_session_start_lists_current_decisions_with_date_and_source_not_superseded_ones(tmp_path):
    claude = tmp_path / "claude"
    session(claude, "s1", [("user", "We decided to use MySQL for the orders database.")], 0)
    session(claude, "s2", [("user", "We switched from MySQL to Postgres for the orders database.")], 3)
    payload = {"session_id": "s3", "cwd": PROJECT, "hook_event_name": "SessionStart", "source": "startup"}
    out = run_session_start(payload).stdout
    decisions = out.split("## Latest decisions", 1)[1].split("##", 1)[0]
    assert "switched from MySQL to Postgres" in decisions and "use MySQL" not in decisions
    assert "2026-03-05" in decisions and "s2.jsonl:1" in decisions  # its date and file:line


def _import_ideas(path, ideas):
    """Import ideas (content, entities) of this project through `total-recall import`."""
    records = [{"kind": "header", "format": "total-recall-export", "version": 1, "machine": "m"}]
    for n, (content, entities) in enumerate(ideas, 1):
        records.append(
            {
                "kind": "idea",
                "ref": n,
                "span": None,
                "content": content,
                "intent": "decision",
                "confidence": 0.8,
                "project": PROJECT,
                "sources": [{"file": "/t/s.jsonl", "line": n, "session_id": "s"}],
                "entities": [{"name": name, "type": "technology"} for name in entities],
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return cli_json("import", str(path))


def test_an_entity_is_one_whatever_the_case_it_is_named_in(tmp_path):
    """SQLite's entity names are COLLATE NOCASE; PostgreSQL's were unique by exact text, so "Redis"
    and "redis" were two entities there, and search (which looks names up lower-cased) found neither."""
    from helpers import memory_store
    from total_recall import lookup

    _import_ideas(
        tmp_path / "ideas.jsonl",
        [
            ("We decided to cache sessions in Redis.", ["Redis"]),
            ("We decided to run redis with appendonly persistence.", ["redis", "AOF"]),
        ],
    )
    assert db_rows("SELECT name, type FROM entities ORDER BY id") == [
        ("Redis", "technology"),
        ("AOF", "technology"),
    ]
    (redis,) = db_rows("SELECT id FROM entities WHERE name = 'Redis'")[0]
    assert db_rows("SELECT entity_id, count(*) FROM idea_entities GROUP BY entity_id ORDER BY entity_id")[
        0
    ] == (
        redis,
        2,
    )
    with memory_store() as database:
        assert lookup.rare_entities(database, ["redis"], 5) == [redis]
        aof = db_rows("SELECT id FROM entities WHERE name = 'AOF'")[0][0]
        assert set(lookup.rare_entities(database, ["REDIS", "aof"], 5)) == {redis, aof}


def test_merging_an_idea_moves_its_sources_and_relations_to_the_one_kept(tmp_path):
    """`maintain`'s duplicate merge (memories.merge_idea) on either store: PostgreSQL has no
    UPDATE OR IGNORE, so a relation both ideas hold is dropped with the merged idea, the rest move;
    so does the pin."""
    from helpers import memory_store
    from total_recall import memories

    _import_ideas(
        tmp_path / "ideas.jsonl",
        [
            ("We decided to cache sessions in Redis.", []),
            ("The nightly export runs at two in the morning.", []),
            ("We decided to expire sessions after a day.", []),
        ],
    )
    keep, dup, other = [r[0] for r in db_rows("SELECT id FROM ideas ORDER BY source_line")]
    db_write(
        *(
            ("INSERT INTO relations (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, 0)", row)
            for row in [(keep, other, "relates_to"), (dup, other, "relates_to"), (other, dup, "builds_on")]
        )
    )
    cli("pin", str(dup))
    with memory_store() as database, database.write():
        memories.merge_idea(database, keep, dup)
    assert db_rows("SELECT id, mention_count, pinned FROM ideas ORDER BY id") == [(keep, 2, 1), (other, 1, 0)]
    assert db_rows(
        "SELECT source_line FROM idea_sources WHERE idea_id = ? ORDER BY source_line", (keep,)
    ) == [
        (1,),
        (2,),
    ]
    assert db_rows("SELECT from_id, to_id, relation_type FROM relations ORDER BY from_id, to_id") == sorted(
        [(keep, other, "relates_to"), (other, keep, "builds_on")]
    )
