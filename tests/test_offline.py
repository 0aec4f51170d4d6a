"""The offline extractor: items, intents, confidence, entities, relations, topics, skips."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LOCOMO_DEV
from total_recall.extract.offline import FALLBACK_WORDS, MAX_ITEM_CHARS, OfflineExtractor, sentences, words_of
from total_recall.extract.protocol import build_input, validate_output


def conversation(*turns, topic=None, known=(), recent=(), first_line=10) -> dict:
    """A protocol input from (role, content) pairs; lines count up from first_line."""
    new = [
        {"role": role, "content": content, "timestamp": "2024-05-01T10:00:00Z", "line": first_line + i}
        for i, (role, content) in enumerate(turns)
    ]
    hierarchy = {"project": {"name": "total-recall", "summary": ""}, "topic": topic, "span": None}
    return build_input(hierarchy, list(recent), new, (), list(known))


def extract(obj: dict, embedder=None) -> dict:
    out = OfflineExtractor(embedder).extract(obj)
    lines = {m["line"] for m in obj["new_messages"]}
    validated = validate_output(out, lines, {k["id"] for k in obj["known_ideas"]})
    assert validated.dropped == 0, validated.problems
    assert validated.output == out  # already schema-conforming, nothing to repair
    return out


def only_item(text: str, role: str = "user") -> dict:
    items = extract(conversation((role, text)))["items"]
    assert len(items) == 1, items
    return items[0]


@pytest.fixture(scope="module")
def embedder():
    try:
        from total_recall.embed import LocalEmbedder

        return LocalEmbedder()
    except Exception as exc:  # noqa: BLE001 - any failure to load the model means "not available here"
        pytest.skip(f"local embedding model not available: {exc}")


# ---------------------------------------------------------------------------------------------
# Items and intents


def test_fact_stated_in_passing_becomes_an_item():
    out = extract(conversation(("user", "Ugh, long week. I moved to Lisbon in May, so the commute changed.")))
    lisbon = [i for i in out["items"] if "Lisbon" in i["content"]]
    assert len(lisbon) == 1
    assert lisbon[0]["source_line"] == 10
    assert lisbon[0]["type"] == "context"
    assert lisbon[0]["content"].endswith("I moved to Lisbon in May, so the commute changed.")


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("We decided to store vectors in sqlite-vec.", "decision"),
        ("Let's go with FastAPI for the local server.", "decision"),
        ("We'll use structlog for every module.", "decision"),
        ("Going with the int8 model for the embedder.", "decision"),
        ("I chose Postgres over MongoDB for the catalogue.", "decision"),
        ("The issue is that the daemon never releases its lock.", "problem"),
        ("Running the migration raises a TypeError on Python 3.10.", "problem"),
        ("The importer fails on empty transcripts.", "problem"),
        ("The tests fail on CI since the upgrade.", "problem"),
        ("The tests don't pass on CI.", "problem"),
        ("Can't connect to the database from the container.", "problem"),
        ("cant connect to the database", "problem"),
        ("Couldn't install the package behind the proxy.", "problem"),
        ("The deploy stopped working after the config change.", "problem"),
        ("Doesn't it support WAL mode", "question"),
        ("Decision: JWT in httpOnly cookies.", "decision"),
        ("Use pnpm instead of npm from now on.", "decision"),
        ("We should stick with SQLite for now.", "decision"),
        ("Let's not add Redis yet.", "decision"),
        ("I went with a debounce of 300 ms.", "decision"),
        ("I switched the cache from Redis to an in-process LRU.", "decision"),
        ("The app switches the theme to dark at night.", "context"),
        ("The fix: pin numpy below 2.", "solution"),
        ("Issue: the login page loops after logout.", "problem"),
        ("Let's not forget the changelog.", "todo"),
        ("Resolved by upgrading pydantic to 2.7.", "solution"),
        ("Changed the timeout to 30 s, so the upload no longer fails.", "solution"),
        ("Go ahead with the second approach.", "decision"),
        ("Let us keep the API versioned under /v2.", "decision"),
        ("The plan: migrate to Postgres next sprint.", "decision"),
        ("Search is broken after the upgrade.", "problem"),
        ("The retry loop doesn't work with streaming responses.", "problem"),
        ("It was fixed by pinning numpy below version two.", "solution"),
        ("The fix was to open the database in WAL mode.", "solution"),
        ("I solved the encoding problem with surrogateescape.", "solution"),
        ("The workaround is to restart the daemon after sleep.", "solution"),
        ("We need to add a migration test for the entities table.", "todo"),
        ("TODO: document the config keys in the README.", "todo"),
        ("We should cap the prompt at sixty thousand characters.", "todo"),
        ("Remember to bump the version before the release.", "todo"),
        ("The next step is wiring the hook into settings.json.", "todo"),
        ("Should the daemon retry on HTTP 429?", "question"),
        ("How do we detect a rewritten transcript", "question"),
        ("I wonder whether FTS5 ranks short documents too high.", "question"),
        ("So the key insight is that batching beats streaming here.", "conclusion"),
        ("Turns out the slowdown came from the N+1 query.", "conclusion"),
        ("Therefore the queue has to be drained before shutdown.", "conclusion"),
        ("In conclusion, the offline extractor is good enough for recall.", "conclusion"),
        ("The reason is that macOS throttles background processes.", "conclusion"),
        ("The tests are flaky on CI but pass locally.", "problem"),
        ("Getting a 500 from /api/orders when the cart is empty.", "problem"),
        ("The websocket disconnects every 30 seconds.", "problem"),
        ("Setting PYTHONPATH in the workflow fixes the import error on CI.", "solution"),
        ("I changed the retry to use exponential backoff, which stops the 429s.", "solution"),
        ("The tests pass now.", "solution"),
        ("After a minute it stops responding and the CPU sits at 100%.", "problem"),
        ("The worker runs fine but this stops working after an hour.", "problem"),
        ("The importer drops rows with a BOM.", "problem"),
        ("Remind me to rotate the staging keys next week.", "todo"),
        ("Let's circle back to the caching question after the demo.", "todo"),
        ("Action item: ask legal about the data retention policy.", "todo"),
        ("Still to do: update the README and bump the version.", "todo"),
        ("Eventually the CLI should support Windows paths.", "todo"),
        ("We haven't decided on the hosting provider.", "question"),
        ("Not sure yet whether we should use websockets or SSE.", "question"),
        # A change reported as made (an assistant's summary of what it did, or a user's).
        ("Switched the session store from Memcached to Redis, since Redis was already running.", "decision"),
        ("Replaced the hand-rolled retry loop in client.py with tenacity's @retry.", "decision"),
        ("Fixed the race in the uploader by taking the lock first.", "solution"),
        ("Moved on to the next file.", "context"),
        ("The currency rounding still looks wrong to me.", "problem"),
        ("We should stick to REST and revisit GraphQL in the spring.", "decision"),
        ("Don't bother with Windows support.", "decision"),
        ("ok lets do the background worker approach", "decision"),
        ("Let's go for option B.", "decision"),
        ("Let's take a closer look at the config loader.", "context"),
        ("My sister has two cats called Pixel and Byte.", "context"),
        ("Our commit types are feat:, fix: and chore: in the changelog.", "context"),  # named, not a label
        ("The tracker knows two prefixes (bug:, plan:) for its titles.", "context"),
    ],
)
def test_intent_from_cue_phrases(text, intent):
    item = only_item(text)
    assert item["type"] == intent
    assert item["content"] == text


def test_hedging_lowers_and_certainty_raises_confidence():
    plain = only_item("The cache layer uses Redis for sessions.")["confidence"]
    hedged = only_item("I think the cache layer probably uses Redis for sessions.")["confidence"]
    sure = only_item("The cache layer definitely uses Redis for sessions, confirmed in prod.")["confidence"]
    assert 0.3 <= hedged < plain < sure <= 0.95
    very_unsure = only_item("Maybe it might perhaps possibly be Redis, I guess, not sure.")["confidence"]
    assert very_unsure >= 0.3


def test_every_substantive_sentence_of_a_message_is_kept():
    text = (
        "Thanks! The indexer reads transcripts in batches of forty messages. "
        "Each batch gets one extraction call. Embeddings are computed afterwards in groups of a hundred."
    )
    contents = [i["content"] for i in extract(conversation(("assistant", text)))["items"]]
    # Adjacent plain statements of one message form one self-contained idea; the greeting goes.
    assert contents == [
        "The indexer reads transcripts in batches of forty messages. Each batch gets one extraction call. "
        "Embeddings are computed afterwards in groups of a hundred.",
    ]


def test_a_speaker_tag_opening_a_turn_is_not_part_of_its_ideas():
    """A chat written out as "Name: text" gives the ideas the same words without the tags give:
    who said it is the message's; the name addressed after the tag goes too. A label stays."""
    trip = "Hey Caroline, that road trip last weekend was insane!"
    again = "We should drive to the coast again in May."
    turns = [("user", trip), ("assistant", "It was!"), ("user", again), ("assistant", "Count me in.")]
    speakers = {"user": "Melanie", "assistant": "Caroline"}
    tagged = extract(conversation(*[(role, f"{speakers[role]}: {said}") for role, said in turns]))
    plain = extract(conversation(*turns))
    assert [i["content"] for i in tagged["items"]] == [i["content"] for i in plain["items"]]
    assert [i["content"] for i in tagged["items"]][0] == "That road trip last weekend was insane!"
    assert only_item("Error: the build fails at the linker step on arm64.")["content"].startswith("Error:")


def test_a_reply_that_says_how_it_fixed_a_reported_problem_is_a_solution():
    """The end-of-turn summary of a reply to a reported problem: "X was wrong; it now uses Y" says the
    fix, though it names the problem first; the changes it lists are decisions."""
    turns = conversation(
        ("user", "The checkout test fails every few runs, please fix it."),
        (
            "assistant",
            "Summary of the changes:\n\n"
            "- The flaky test_checkout_total was comparing floats exactly; it now uses pytest.approx.\n"
            "- Replaced the hand-rolled retry loop in client.py with tenacity's @retry.",
        ),
    )
    said = {i["content"]: i["type"] for i in extract(turns)["items"] if i["source_line"] == 11}
    assert said == {
        "Summary of the changes:": "context",
        "The flaky test_checkout_total was comparing floats exactly; it now uses pytest.approx.": "solution",
        "Replaced the hand-rolled retry loop in client.py with tenacity's @retry.": "decision",
    }


def test_a_solution_answers_the_problem_reported_just_before_it_not_any_earlier_one():
    """A fix given in reply to a reported problem answers it (and so gives it a fix: "unresolved
    problems" leaves it out); a fix for something else said later, unlike the earlier problem, does
    not answer that problem, which stays open."""
    replied = extract(
        conversation(
            ("user", "Also the CSV export crashes on empty rows."),
            ("assistant", "To fix the CSV export, skip empty rows before writing them."),
        )
    )
    assert {(r["from_line"], r["to_line"], r["type"]) for r in replied["relations"]} == {(11, 10, "answers")}
    later = extract(
        conversation(
            ("user", "The deploy fails with a TLS handshake error on the staging box."),
            ("assistant", "I'll come back to that after lunch."),
            ("user", "Also, how should we cache the dashboard stats?"),
            ("assistant", "Workaround: put a Redis cache in front of the stats query."),
        )
    )
    kinds = {i["source_line"]: i["type"] for i in later["items"]}
    assert kinds[10] == "problem" and kinds[13] == "solution"
    assert not [r for r in later["relations"] if r["type"] == "answers" and r["to_line"] == 10]


def test_a_line_leading_into_a_list_of_names_keeps_the_names():
    """ "Add three quality tools as dev dependencies:" alone does not say which: the heads of the list
    under it (bold names, or the words before a colon, dash or bracket) follow it in its memory, whose
    kind is still read from the line alone; every item stays a memory of its own. Sub-items, code and
    a list of whole sentences add nothing, and a line that leads into no list stays as it is."""
    turns = conversation(
        ("user", "Decide how we check code quality in this repo."),
        (
            "assistant",
            "We decided to add three quality tools as dev dependencies:\n"
            "- **Credo** for static code analysis\n"
            "  - strict mode later\n"
            "- **Dialyxir**: gradual type checking via Dialyzer\n"
            "- `mix_audit` (dependency vulnerability scanning)\n\n"
            'Here\'s the config I used for all of them:\n```elixir\ndefp deps do\n  [{:credo, "~> 1.7"},\n'
            '   {:dialyxir, "~> 1.4"}]\nend\n```\n'
            "The changes so far:\n"
            "- The flaky checkout test compared floats exactly and now uses approx.\n"
            "- Replaced the retry loop in client.py with tenacity.",
        ),
    )
    said = {i["content"]: i["type"] for i in extract(turns)["items"] if i["source_line"] == 11}
    assert said["We decided to add three quality tools as dev dependencies: Credo; Dialyxir; mix_audit"] == (
        "decision"
    )
    assert "Credo for static code analysis" in said
    assert "Here's the config I used for all of them:" in said  # code follows it, not a list
    assert "The changes so far:" in said  # a list of sentences: its items say it


def test_a_line_leading_into_a_command_keeps_the_command():
    """ "Initialize the migration repository:" says what to do, the one-line snippet under it what to
    run: they are one memory. Alone, the command was a fragment joined to the next step's line
    ("flask db init Generate the initial migration script:"). A long block adds nothing to the line
    before it."""
    turns = conversation(
        ("user", "How do I set up database migrations for the Flask app?"),
        (
            "assistant",
            "Use Flask-Migrate for the schema changes.\n\n"
            "1. **Initialize the migration repository**:\n   ```bash\n   flask db init\n   ```\n"
            "2. **Generate the initial migration script**:\n"
            '   ```bash\n   flask db migrate -m "init"\n   ```\n'
            "3. Apply it to the database.\n```bash\nflask db upgrade\n```\n"
            "Here's the model it reads:\n```python\nclass User(db.Model):\n    id = db.Column(db.Integer)\n"
            "    name = db.Column(db.String)\n```\n",
        ),
    )
    said = [i["content"] for i in extract(turns)["items"] if i["source_line"] == 11]
    assert "Initialize the migration repository: flask db init" in said
    assert 'Generate the initial migration script: flask db migrate -m "init"' in said
    assert not [s for s in said if s.startswith("flask db init")]
    assert "Apply it to the database. flask db upgrade" in said
    assert "Here's the model it reads:" in said and not [s for s in said if "class User" in s]


def test_a_message_cut_to_the_prompt_budget_gives_no_half_sentence_and_no_cut_mark():
    """A message longer than the protocol's budget per message reaches the extractor cut, with the
    protocol's mark ("…[truncated 773 chars]") at the end; its memories end at its last whole
    sentence, and no memory holds the mark (before: "…and I've estimat…[truncated 773 chars]")."""
    steps = "\n\n".join(
        f"Step {i} moves the {i}th batch of unpaid invoices from the ledger service to the archive bucket, "
        "then checks the totals before the nightly report runs."
        for i in range(32)
    )
    obj = conversation(("assistant", steps))
    assert obj["new_messages"][0]["content"].endswith("chars]")  # cut by the protocol, marked
    contents = [i["content"] for i in extract(obj)["items"]]
    assert contents and not [c for c in contents if "truncated" in c or "…" in c]
    assert all(c.endswith(".") for c in contents)


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("Plan: migrate the sessions table to Postgres next sprint.", "decision"),
        ("Decided: keep the monorepo.", "decision"),
        ("Workaround: pin numpy below 2 until the wheel ships.", "solution"),
        ("Resolved: the flaky test was a timezone bug in the fixture.", "solution"),
        ("Blocker: the staging database rejects every connection.", "problem"),
        ("Takeaway: the cache was never invalidated after a deploy.", "conclusion"),
    ],
)
def test_a_label_opening_a_message_is_its_intent_not_a_speaker(text, intent):
    """A "Word: " opening one message is a label the intent is read from, not a speaker: only a tag
    that opens turn after turn is taken for one (offline.recurring_speakers)."""
    item = only_item(text)
    assert (item["type"], item["content"]) == (intent, text)
    # A tag that opens two messages of the batch is a speaker's and leaves the idea.
    tagged = extract(
        conversation(("user", f"Marco: {text}"), ("user", "Marco: and the rest is for tomorrow."))
    )
    assert tagged["items"][0]["content"] == text


def test_typed_sentences_stay_separate_and_merged_ideas_stay_short():
    text = (
        "I'm lucky to have my friends. They have been there through everything. "
        "We decided to move the standup to 10am. Should we invite the design team too?"
    )
    items = extract(conversation(("user", text)))["items"]
    assert [(i["type"], i["content"]) for i in items] == [
        ("context", "I'm lucky to have my friends. They have been there through everything."),
        ("decision", "We decided to move the standup to 10am."),
        ("question", "Should we invite the design team too?"),
    ]
    long_text = " ".join(
        f"Fact number {n} is about the {w} subsystem of the service."
        for n, w in enumerate(["billing", "search", "auth", "upload", "export", "mail", "audit"])
    )
    for item in extract(conversation(("user", long_text)))["items"]:
        assert len(item["content"]) <= 320


def test_short_fragments_join_the_next_sentence():
    contents = [
        i["content"]
        for i in extract(conversation(("user", "Good news. The build passes on Windows now.")))["items"]
    ]
    assert contents == ["Good news. The build passes on Windows now."]


def test_markdown_and_code_are_cleaned():
    text = (
        "## Plan\n"
        "- **Store** vectors in [sqlite-vec](https://github.com/asg017/sqlite-vec) tables.\n"
        "- Keep `config.toml` as the only settings file.\n"
        "```python\nimport sqlite_vec\nconn.enable_load_extension(True)\nsqlite_vec.load(conn)\n```\n"
        "Install it with:\n```bash\npip install sqlite-vec\n```"
    )
    contents = [i["content"] for i in extract(conversation(("assistant", text)))["items"]]
    assert "Store vectors in sqlite-vec tables." in contents
    assert "Keep config.toml as the only settings file." in contents
    assert "Install it with: pip install sqlite-vec" in contents
    assert not any("enable_load_extension" in c or "##" in c or "**" in c for c in contents)


def test_long_sentences_are_split_at_clause_boundaries():
    clause = "step {} reads the transcript from the last committed offset and batches the new messages"
    text = "; ".join(clause.format(i) for i in range(12)) + "."
    items = extract(conversation(("assistant", text)))["items"]
    assert len(items) > 1
    assert all(len(i["content"]) <= MAX_ITEM_CHARS for i in items)
    assert sum(len(words_of(i["content"])) for i in items) == len(words_of(text))


def test_sentence_splitting_respects_abbreviations_and_file_names():
    assert sentences("Use e.g. config.py for this. Then run it.") == [
        "Use e.g. config.py for this.",
        "Then run it.",
    ]


# ---------------------------------------------------------------------------------------------
# Entities


def entity_map(text: str) -> dict[str, str]:
    return {e["name"]: e["type"] for e in only_item(text)["entities"]}


def test_file_path_entities():
    found = entity_map("Edit daemon/total_recall/db.py, ./setup.sh, ~/notes/todo.md and all *.ts files.")
    assert found["daemon/total_recall/db.py"] == "file"
    assert found["./setup.sh"] == "file"
    assert found["~/notes/todo.md"] == "file"
    assert found["*.ts"] == "file"


def test_code_identifier_entities():
    found = entity_map("Call split_for_budget from IndexWorker and pass os.path.join output to `load_model`.")
    assert {"split_for_budget", "IndexWorker", "os.path.join", "load_model"} <= set(found)


def test_a_redaction_mark_names_no_entity():
    """What redaction leaves ("[REDACTED:openai_key]", "[private]") names the kind of a secret, not
    something the conversation was about: it made entities openai_key, aws_secret_access_key, ..."""
    from total_recall.redact import redact

    text = redact(
        "Set OPENAI_API_KEY=sk-proj-Qw3rTy9UiOp2AsDf5GhJk7LzXcVb1NmQw3rTy9UiOp2AsDf5GhJk7 in config.py"
        " and keep <private>the pager rota</private> in `rota.md`"
    )
    assert "[REDACTED:" in text and "[private]" in text
    found = entity_map(text)
    assert "config.py" in found and "rota.md" in found
    assert not [
        name for name in found if "redacted" in name.lower() or name.endswith("_key") or "private" in name
    ]


def test_technology_entities_are_canonical_and_whole_word():
    found = entity_map("We run postgres and Redis on kubernetes with docker, plus onnx models in FastAPI.")
    assert {k: v for k, v in found.items() if v == "technology"} == {
        "PostgreSQL": "technology",
        "Redis": "technology",
        "Kubernetes": "technology",
        "Docker": "technology",
        "ONNX": "technology",
        "FastAPI": "technology",
    }
    assert "Go" not in entity_map("Go ahead and react to the review comments, then we go home.")
    assert "React" in entity_map("The frontend is written in React with hooks.")


def test_person_entities_are_conservative():
    found = entity_map("My friend Ana said the Lisbon office opens in May.")
    assert found["Ana"] == "person"
    assert found.get("Lisbon") != "person"
    assert "May" not in found
    assert "Yesterday" not in entity_map("Yesterday the tests passed on the first try.")


def test_project_entity_from_the_hierarchy():
    assert entity_map("total-recall now indexes transcripts in the background.")["total-recall"] == "project"


# ---------------------------------------------------------------------------------------------
# Relations


def links(out: dict) -> list[dict]:
    """The relations by their lines and types (what each test here is about)."""
    return [{k: v for k, v in r.items() if k not in ("from_content", "to_content")} for r in out["relations"]]


def test_question_answered_by_the_other_role():
    out = extract(
        conversation(
            ("user", "Which embedding model does the daemon use by default?"),
            ("assistant", "It uses the packaged MiniLM model through onnxruntime."),
        )
    )
    question = next(i for i in out["items"] if i["type"] == "question")
    assert question["answered"] is True
    assert {"from_line": 11, "to_idea_id": None, "to_line": 10, "type": "answers"} in links(out)
    answers = next(r for r in out["relations"] if r["type"] == "answers")
    assert answers["to_content"] == question["content"]  # the item it joins, not just its line
    assert answers["from_content"] == "It uses the packaged MiniLM model through onnxruntime."


def test_question_stays_open_when_the_asker_continues():
    out = extract(
        conversation(
            ("user", "Which embedding model does the daemon use by default?"),
            ("user", "Also I want the status file to show the queue depth."),
        )
    )
    question = next(i for i in out["items"] if i["type"] == "question")
    assert question["answered"] is False
    assert not [r for r in links(out) if r["type"] == "answers"]


def test_switching_supersedes_the_known_decision():
    known = [
        {"id": 41, "type": "todo", "content": "Write the README for the installer."},
        {"id": 42, "type": "decision", "content": "We use MySQL for the application database."},
    ]
    out = extract(conversation(("user", "We switched from MySQL to Postgres last week."), known=known))
    assert out["items"][0]["type"] == "decision"
    assert links(out) == [{"from_line": 10, "to_idea_id": 42, "to_line": None, "type": "supersedes"}]


def test_switching_supersedes_an_earlier_item_of_the_batch():
    out = extract(
        conversation(
            ("user", "Let's use MySQL for the application database."),
            ("assistant", "Sounds good."),
            ("user", "Actually we switched from MySQL to Postgres for the application database."),
        )
    )
    assert {"from_line": 12, "to_idea_id": None, "to_line": 10, "type": "supersedes"} in links(out)


def test_advice_and_restatements_supersede_nothing():
    out = extract(
        conversation(
            ("user", "The report query uses SELECT * on the transactions table."),
            ("assistant", "Instead of SELECT *, list only the columns the report needs."),
            ("user", "I'm trying to switch from SQLite to PostgreSQL for production."),
            ("assistant", "Switching from SQLite to PostgreSQL is a great step for concurrency."),
            ("user", "Should we store sessions in Redis rather than on the filesystem?"),
        )
    )
    assert not [r for r in out["relations"] if r["type"] == "supersedes"], out["relations"]


def test_a_switch_naming_the_old_choice_after_other_words_supersedes_it():
    known = [{"id": 42, "type": "decision", "content": "We use MySQL for the application database."}]
    out = extract(conversation(("user", "We no longer use the old MySQL server for orders."), known=known))
    assert links(out) == [{"from_line": 10, "to_idea_id": 42, "to_line": None, "type": "supersedes"}]


def test_solution_answers_the_problem():
    out = extract(
        conversation(
            ("user", "The daemon crashes with a database locked error under load."),
            ("assistant", "Fixed it by setting busy_timeout to thirty seconds."),
        )
    )
    assert [i["type"] for i in out["items"]] == ["problem", "solution"]
    assert {"from_line": 11, "to_idea_id": None, "to_line": 10, "type": "answers"} in links(out)


def test_builds_on_and_contradicts():
    out = extract(
        conversation(
            ("assistant", "The hook shim records the transcript path and the byte offset."),
            ("user", "Also it should record the session id for every event."),
            ("assistant", "The hook shim waits for the daemon to finish indexing."),
            ("user", "That's wrong, the hook shim never waits for the daemon."),
        )
    )
    assert {"from_line": 11, "to_idea_id": None, "to_line": 10, "type": "builds_on"} in links(out)
    contradicts = [r for r in links(out) if r["type"] == "contradicts"]
    assert contradicts == [{"from_line": 13, "to_idea_id": None, "to_line": 12, "type": "contradicts"}]


# ---------------------------------------------------------------------------------------------
# Topics and skips


def test_no_shift_keeps_the_current_topic():
    topic = {"name": "Storage engine", "summary": "Choosing the storage engine."}
    out = extract(conversation(("user", "SQLite with WAL handles our write load fine."), topic=topic))
    assert out["topic_update"] == {"name": "Storage engine", "summary": "Choosing the storage engine."}
    assert out["new_span"] is None


def test_without_a_topic_the_batch_is_named():
    out = extract(
        conversation(
            ("user", "The embedder loads the MiniLM model from the package assets."),
            ("assistant", "The MiniLM model is checked against its sha256 before loading."),
        )
    )
    assert "MiniLM" in out["topic_update"]["name"]
    assert out["topic_update"]["summary"]
    assert "start_line" not in out["topic_update"]


def test_explicit_transition_starts_a_new_topic():
    topic = {"name": "Storage engine", "summary": "Choosing the storage engine."}
    out = extract(
        conversation(
            ("user", "SQLite with WAL handles our write load fine."),
            ("user", "Let's move on to the installer: it must register the hooks in settings.json."),
            ("assistant", "The installer merges the hooks into settings.json without touching other keys."),
            topic=topic,
        )
    )
    update = out["topic_update"]
    assert update["start_line"] == 11
    assert update["name"] and update["name"] != "Storage engine"
    assert "installer" in (update["name"] + update["summary"]).lower()


def test_by_the_way_opens_a_sub_span():
    topic = {"name": "Storage engine", "summary": "Choosing the storage engine."}
    out = extract(
        conversation(
            ("user", "SQLite with WAL handles our write load fine."),
            ("user", "By the way, the CI runners moved to Ubuntu 24.04 yesterday."),
            topic=topic,
        )
    )
    assert out["topic_update"]["name"] == "Storage engine"
    assert out["new_span"]["start_line"] == 11 and out["new_span"]["name"]


def test_messages_without_substance_are_skipped_with_a_reason():
    out = extract(
        conversation(
            ("user", "The queue table is drained oldest first."),
            ("assistant", "Thanks!"),
            ("user", "   "),
            ("user", "ok cool, sounds good"),
        )
    )
    assert [i["source_line"] for i in out["items"]] == [10]
    assert out["skip_lines"] == [
        {"line": 11, "reason": "acknowledgement"},
        {"line": 12, "reason": "empty"},
        {"line": 13, "reason": "acknowledgement"},
    ]


def test_deterministic():
    obj = conversation(
        ("user", "We switched from MySQL to Postgres. Should we keep the old dumps?"),
        ("assistant", "Keep them for a month, then delete them. The import fails on enums though."),
        ("user", "By the way, Ana fixed the enum import by casting to text."),
        known=[{"id": 7, "type": "decision", "content": "Use MySQL."}],
    )
    first = json.dumps(OfflineExtractor().extract(obj), sort_keys=True)
    assert json.dumps(OfflineExtractor().extract(obj), sort_keys=True) == first
    assert json.dumps(OfflineExtractor().extract(json.loads(json.dumps(obj))), sort_keys=True) == first


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=300)), min_size=1, max_size=6)
)
def test_any_text_gives_valid_output(turns):
    extract(conversation(*turns))


# ---------------------------------------------------------------------------------------------
# With the local embedding model


def test_embedding_drop_marks_a_topic_shift(embedder):
    topic = {"name": "SQLite locking", "summary": ""}
    obj = conversation(
        ("user", "The SQLite database locks up when two writers commit at the same time."),
        ("assistant", "Enable WAL mode and set busy_timeout so concurrent writers wait instead of failing."),
        ("user", "WAL mode fixed the locking errors in the write path of the database."),
        ("assistant", "Good, keep the busy timeout at thirty seconds for the daemon connection."),
        ("user", "My grandmother's lasagna recipe needs fresh basil, ricotta and a slow tomato sauce."),
        (
            "assistant",
            "Simmer the tomato sauce for two hours and layer the ricotta between the pasta sheets.",
        ),
        topic=topic,
    )
    assert extract(obj)["topic_update"]["name"] == "SQLite locking"  # no embedder: no shift
    update = extract(obj, embedder)["topic_update"]
    assert update["start_line"] == 14
    assert {"lasagna", "ricotta", "tomato", "sauce"} & set(update["name"].lower().split())


def test_embedding_similarity_answers_a_known_question(embedder):
    known = [
        {"id": 5, "type": "question", "content": "Which port does the local web server listen on?"},
        {"id": 6, "type": "question", "content": "How long are archived transcripts kept?"},
    ]
    out = extract(
        conversation(("assistant", "The local web server listens on port 8765 by default."), known=known),
        embedder,
    )
    assert {"from_line": 10, "to_idea_id": 5, "to_line": None, "type": "answers"} in links(out)
    assert not [r for r in links(out) if r["to_idea_id"] == 6]


# ---------------------------------------------------------------------------------------------
# LoCoMo: real conversational turns


def locomo_sessions() -> list[list[dict]]:
    if not LOCOMO_DEV.is_file():
        pytest.skip("LoCoMo dev file not present")
    sessions = []
    for sample in json.loads(LOCOMO_DEV.read_text()):
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
            sessions.append(
                [
                    {
                        "role": "user" if turn["speaker"] == conv["speaker_a"] else "assistant",
                        "content": turn["text"],
                        "timestamp": None,
                        "line": i + 1,
                    }
                    for i, turn in enumerate(conv[key])
                ]
            )
    return sessions


def test_locomo_every_non_trivial_turn_yields_an_item():
    sessions = locomo_sessions()
    extractor = OfflineExtractor()
    turns = missing = items = 0
    started = time.perf_counter()
    for session in sessions:
        for start in range(0, len(session), 10):
            batch = session[start : start + 10]
            obj = build_input({"project": {"name": "locomo"}}, session[max(0, start - 4) : start], batch)
            out = extractor.extract(obj)
            assert validate_output(out, {m["line"] for m in batch}).dropped == 0
            covered = {i["source_line"] for i in out["items"]}
            non_trivial = [m for m in batch if len(words_of(m["content"])) >= FALLBACK_WORDS]
            missing += sum(m["line"] not in covered for m in non_trivial)
            turns += len(batch)
            items += len(out["items"])
    elapsed = time.perf_counter() - started
    print(f"\nLoCoMo: {turns} turns -> {items} items in {elapsed:.2f} s ({turns / elapsed:,.0f} turns/s)")
    assert turns > 500
    assert missing == 0


# ---------------------------------------------------------------------------------------------
# Speaker role, narration, tool lines, clauses (the rules measured by bench/intents.py)


def test_narration_and_tool_lines_are_not_ideas_but_touched_files_are_entities():
    out = extract(
        conversation(
            (
                "assistant",
                "Let me check the project structure.\n[tool Bash: mix phx.server]\n[tool Glob: mix.exs]",
            ),
            ("assistant", "Now let's build and test:\n[tool Bash: mix test]"),
            (
                "assistant",
                "The retry loop now caps the backoff at ten seconds.\n[tool Edit: daemon/retry.py]",
            ),
        )
    )
    assert [i["source_line"] for i in out["items"]] == [12]
    assert {"name": "daemon/retry.py", "type": "file"} in out["items"][0]["entities"]
    assert not any(i["content"].startswith("[tool") for i in out["items"])


@pytest.mark.parametrize(
    ("role", "text", "intent"),
    [
        ("user", "ok. let's use apple container instead of docker", "decision"),
        ("user", "I'll add those tests to cover the edge cases.", "todo"),
        ("assistant", "This is a crucial architectural decision.", "context"),
        ("user", "I want to make sure my error handling covers 404 and 500 responses.", "context"),
        ("user", "I'm trying to decide between React and Vue for the frontend.", "context"),
        ("user", "No, you don't need to redo all the migrations.", "context"),
        ("user", "Adding an index cut the query time from 450ms to 120ms.", "solution"),
        ("user", "I want to reduce the page load time from 3s to 1s.", "context"),
    ],
)
def test_role_negation_and_goals_decide_the_intent(role, text, intent):
    assert only_item(text, role)["type"] == intent


def test_a_run_on_sentence_yields_one_item_per_intent():
    out = extract(
        conversation(
            (
                "user",
                "I'm trying to build the settings page, but I chose vanilla JS for "
                "simplicity, can you help me wire up the form validation?",
            )
        )
    )
    assert [i["type"] for i in out["items"]] == ["decision", "question"]


def test_a_reply_to_a_reported_problem_that_proposes_a_fix_is_a_solution():
    out = extract(
        conversation(
            ("user", "I keep getting a TemplateNotFound error when I render the index page."),
            (
                "assistant",
                "Here's the corrected layout: move index.html into the templates folder next to app.py.",
            ),
        )
    )
    assert [i["type"] for i in out["items"]] == ["problem", "solution"]


def _reply_decisions(assistant: str, reply: str, *, live: bool) -> list[str]:
    said = {"line": 1, "role": "assistant", "content": assistant}
    answer = {"line": 2, "role": "user", "content": reply}
    batch = {"new_messages": [answer] if live else [said, answer], "recent_messages": [said] if live else []}
    out = OfflineExtractor().extract(batch)
    assert validate_output(out, {2} if live else {1, 2}).dropped == 0
    return [i["content"] for i in out["items"] if i["source_line"] == 2 and i["type"] == "decision"]


@pytest.mark.parametrize(
    ("assistant", "reply", "decision"),
    [
        (
            "The S3 mock's clock drifts; shall I freeze time with freezegun in the fixture?",
            "yes do that",
            "Freeze time with freezegun in the fixture.",
        ),
        (
            "I'd recommend extracting the retry loop into a `with_retries` decorator.",
            "sounds good",
            "Extracting the retry loop into a with_retries decorator.",
        ),
        (
            "I can also add a CI job that runs ruff on every PR if you want.",
            "lgtm",
            "Add a CI job that runs ruff on every PR.",
        ),
        (
            "I'll rename the module to utils_v2 and update the imports. Shall I proceed?",
            "👍",
            "Rename the module to utils_v2 and update the imports.",
        ),
        ("Tests are green: want me to open the PR against main?", "yep go ahed", "Open the PR against main."),
        (  # "okk" is "ok"; "will" and "all" are known words, not the reply's own
            "Want me to squash the fixups into one commit?",
            "okk that will do it all",
            "Squash the fixups into one commit.",
        ),
        (  # what "it" is comes with the act
            "The flaky retry came in with the connection-pool patch. Should I revert it?",
            "yes",
            "Revert it (The flaky retry came in with the connection-pool patch).",
        ),
        # a yes that decides nothing: a question of fact, alternatives, a hesitation, no proposal,
        # leave asked for nothing named
        ("Is the server running locally?", "yes", None),
        ("Should I pin boto3, or upgrade moto?", "ok", None),
        ("Shall I drop the users_backup table?", "yes but wait until the export ran", None),
        ("All tests pass and the branch is pushed.", "thanks", None),
        ("Everything is committed. Shall I proceed?", "sure", None),
        ("Want me to squash the fixups?", "do you think that's safe?", None),
        # a pick among alternatives is the option picked, by its words or its place
        (
            "Should I use zod or yup for the signup form validation?",
            "zod",
            "Use zod rather than yup for the signup form validation.",
        ),
        (
            "I can either bump the HTTP timeout to 30s or add retries with backoff. Which do you prefer?",
            "retries w backoff",
            "Add retries with backoff rather than bump the HTTP timeout to 30s.",
        ),
        (
            "We could store sessions in Redis, or just use signed cookies. Any preference?",
            "the second one",
            "Use signed cookies rather than store sessions in Redis.",
        ),
        ("Should I use zod or yup for the signup form validation?", "hmm, zod maybe", None),
        ("Is the server running in docker or on the host?", "docker", None),
        # a refusal naming another action is that action, rather than the offered one
        (
            "Want me to add caching to the `/search` endpoint?",
            "no, let's profile it first",
            "Let's profile it first, rather than add caching to the /search endpoint.",
        ),
        (
            "Want me to skip the failing e2e test so CI goes green?",
            "nah. fix the selector instead",
            "Fix the selector instead, rather than skip the failing e2e test so CI goes green.",
        ),
        ("Shall I run black across the whole repo?", "no, the blame history matters", None),
        ("Should I upgrade every dependency?", "nah, maybe later", None),
        ("Should I upgrade every dependency?", "no thanks", None),
    ],
)
def test_a_reply_that_settles_an_offer_is_that_decision_in_one_batch_or_the_next(assistant, reply, decision):
    """Claude Code's usual way to decide: the assistant offers one action (or two), the user says
    yes (or picks one, or names another). The reply's line gets a decision holding the action,
    whether the offer is in the same batch (a backfill) or only in the batch's recent context (live
    capture); pinned by bench/approvals.py's sets too (I104)."""
    for live in (False, True):
        assert _reply_decisions(assistant, reply, live=live) == ([decision] if decision else [])


@pytest.mark.parametrize(
    ("text", "chose"),
    [
        # a choice for the project, said to the assistant: named over what it replaces, as a switch,
        # a preference, scope, or a rule for what comes after this step
        ("use uv instead of poetry for this repo", True),
        ("ruff over flake8 from here", True),
        ("httpx not requests", True),
        ("switch the queue to rabbitmq", True),
        ("move the docs off readthedocs onto github pages", True),
        ("honestly I'd rather keep the parser in one module", True),
        ("we'll skip the caching layer for the first release", True),
        ("not doing dark mode in v1", True),
        ("sqlite it is, we don't need a server", True),
        ("we no longer support windows 7", True),
        ("pin every github action by commit sha going forward", True),
        ("you should never force-push to main", True),
        # a choice said as settled: a label, the team's stance, a replacement, a new default, a choice
        # that retires what it replaces, a prohibition, a change across the project, deferred work
        ("db naming convention: snake_case table names", True),
        ("we're only supporting chrome and firefox at launch", True),
        ("we won't support python 3.8 in the next release", True),
        ("biome replaces eslint and prettier", True),
        ("bun is the new default runtime", True),
        ("the package manager is pnpm. delete package-lock.json", True),
        ("queue: nats. remove the kafka compose file", True),
        ("ditch the custom retry helper, just use tenacity", True),
        ("no raw sql in the handlers, everything goes through the repository", True),
        ("swap moment for date-fns across the frontend", True),
        ("we're postponing the payments page until the pricing is settled", True),
        ("every endpoint must return json errors, and never leak stack traces", True),
        (
            "go with duckdb for the analytics tables, sqlite is far too slow there",
            True,
        ),  # a reason, not a problem
        ("keep the settings in ~/.config/app/settings.toml, not in the home folder", True),
        # a choice said as the project's state: ruled out, a setting beside what it is not, settled
        # said outright, a rule for every item, the team's tool, a move under way, a reversal
        ("offline mode: not happening for 2.0", True),
        ("sso is a v3 thing", True),
        ("uploads go straight to s3, not through the api server", True),
        ("the worker will be written in rust, not go", True),
        ("ok, meilisearch. let's lock that in", True),
        ("the decision is nats over rabbitmq", True),
        ("the team agreed in the retro to drop the php sdk", True),
        ("every migration needs a down step", True),
        ("don't ever call the billing api from the frontend", True),
        ("we're staying with webpack, the vite port is too much work", True),
        ("we're using temporal for the long-running jobs", True),
        ("the search index moves to opensearch next month", True),
        ("we're moving the reports job off cron onto airflow", True),
        ("scratch that, go back to the rest client", True),
        ("swap axios for ky across all the packages", True),
        ("fine, we're dropping the ie11 build", True),
        ("we're not rolling our own auth", True),
        # a task for now, a one-off, a state, a habit, a question, or how to answer
        ("the timeout happens on staging, not prod", False),
        ("that's the old endpoint, not v2", False),
        ("the error comes from the worker, not from redis", False),
        ("it's decided by the feature flag at runtime", False),
        ("we're using way too much memory in the worker", False),
        ("the decision is up to you", False),
        ("lock it in the vault before you commit", False),
        ("scratch that, use the other branch for this test", False),
        ("that's the standard library, not a dependency", False),
        ("show me the results as a table instead of a list", False),
        ("use the debugger to see what the handler gets", False),
        ("switch to the logs tab and copy the trace", False),
        ("use print statements instead of the logger for now", False),
        ("the page shows a spinner instead of the table", False),
        ("tests not passing after the merge", False),
        ("I'd rather you explain the plan first", False),
        ("I've never used celery before", False),
        ("should we use uv instead of poetry?", False),
        ("Always include the units when I ask about timings.", False),
        ("the deploy is done. delete the release branch", False),
        ("no that's the wrong file, open the other one", False),
        ("no errors in the log anymore", False),
        ("we're keeping an eye on the flaky test", False),
        ("rename fetchUser to loadUser across the codebase", False),
        ("pause the sync job until I'm back", False),
        ("I've always used black, and never liked yapf", False),
        ("Never been to one of those conferences.", False),
        ("It shows up everywhere in the dashboard now", False),
        # the fifth round (bench/choices_tune3.jsonl): an option given up, a constraint kept as a
        # choice over what it is not, a name quoted as code, a setting that goes somewhere and stops
        # another ...
        ("must stay compatible with python 3.8 - no walrus in the library code", True),
        ("drop the websocket idea, polling every 30s is fine", True),
        ("i18n is out for v1, english only", True),
        ("kafka topics are named domain.entity.event, use that for all the new ones", True),
        ("call it `ingest` not `loader` - the module, the subcommand, the docs", True),
        ("for this project we are using always tabs, not spaces", True),
        ("experiment tracking goes to MLflow, stop logging to wandb", True),
        ("the CLI config file is TOML. drop yaml support entirely", True),
        # ... and what only looks like one: an option, a git branch, an experiment. The forms a second
        # reader's probe (bench/choices_probe.jsonl) found to be said far more often as reports than
        # as choices were not made rules: a thing that stays somewhere, something that can wait or is
        # postponed, "as of" and "starting", two things each "for" something, a policy label, a
        # proposal said to make sense, "we settled"
        ("we could go with either Hetzner or OVH, depends on the quote", False),
        ("we might use redis for this later", False),
        ("I switched to the release branch and pulled", False),
        ("switching back to the main branch now", False),
        ("try serializing with msgpack instead of json and measure the payload", False),
        ("the pod stays in CrashLoopBackOff after the rollout", False),
        ("the build stays at 3 minutes even with caching", False),
        ("the migration can wait a minute, let me finish reading the logs first", False),
        ("the standup is postponed to 11 because of the all-hands", False),
        ("as of today there are 312 open issues on the tracker", False),
        ("starting next week I'm out for two weeks, can you write up the notes", False),
        ("coffee for me, tea for Dan, we're at the usual place", False),
        ("coding standards: the PDF link in the README is broken", False),
        ("the index you proposed makes sense to me, let's see what the query plan says first", False),
        ("we settled that bet, Dan owes me lunch", False),
        ("forget the idea I mentioned earlier, I misread the stack trace", False),
        ("we're not rewriting it today, just patch the bug", False),
        ("drop the migration and run it again from scratch", False),
        ("use the staging db for this test run, not prod", False),
        ("security policy: someone reported an XSS in the comments widget, can you look", False),
        ("naming convention: what do we use for the api, userId or user_id?", False),
        ("decision: not made yet, I'll talk to the team tomorrow", False),
        ("sorry for the delay, the fix for the parser is in", False),
    ],
)
def test_a_users_choice_for_the_project_is_a_decision_and_a_task_for_now_is_not(text, chose):
    """Most of a developer's decisions are said to the assistant as instructions; the same verbs
    also ask for one-off work. Measured on blind sets in bench/choices.py (BENCHMARKS.md §7)."""
    out = extract(conversation(("user", text)))
    assert any(i["type"] == "decision" for i in out["items"]) is chose
    said = extract(conversation(("assistant", text)))
    assert not any(i["type"] == "decision" for i in said["items"])  # from the assistant: advice


def test_a_decision_then_a_request_in_short_sentences_are_two_items():
    """Short sentences are joined into one item; one that decides and one that asks are each kept
    with their own intent instead of the whole group becoming a question (I106)."""
    out = extract(conversation(("user", "ok let's go with nats over kafka. can you wire it up?")))
    assert [(i["type"], i["content"]) for i in out["items"]] == [
        ("decision", "Ok let's go with nats over kafka."),
        ("question", "Can you wire it up?"),
    ]


PLAN_WITH_SECTIONS = """Here is the plan.

### Task 1: Add the export command
Depends on: Task 2

**Description:**
> Add an `export` subcommand that writes JSON lines.
>
> **Output files:**
> - `cli.py` — the new subcommand
> - `export.py` — new module
>
> **Steps:**
> 1. Write the serializer for ideas
> 2. Wire the subcommand into the parser
>
> **Edge cases:**
> - Empty databases print nothing
>
> **Definition of Done:**
> - The command round-trips with import
"""


def test_a_plans_steps_are_todos_and_its_files_edge_cases_and_fields_are_not():
    """Claude Code writes plans whose tasks carry sub-lists: the steps (and what the task is) are
    work left to do; the files it touches, its edge cases, its definition of done and a field such as
    "Depends on: Task 2" are not, and filled the digest's open todos."""
    out = extract(conversation(("assistant", PLAN_WITH_SECTIONS)))
    todos = [i["content"] for i in out["items"] if i["type"] == "todo"]
    assert todos == [
        "Description: Add an export subcommand that writes JSON lines.",
        "Write the serializer for ideas",
        "Wire the subcommand into the parser",
    ]


def test_a_heading_inside_a_quoted_section_is_a_heading_not_words_of_the_next_line():
    """Plans quote whole sections ("> ## Problem"); the heading's marks were kept and glued to the
    line after it ("## Problem Spotter has no ...")."""
    content = (
        "Proposed epic:\n\n> ## Problem\n> The sync job drops events when the queue is full.\n>\n"
        "> ## Rabbit holes\n> - Retrying forever hides the loss"
    )
    out = extract(conversation(("assistant", content)))
    texts = [i["content"] for i in out["items"]]
    assert any(t.endswith("The sync job drops events when the queue is full.") for t in texts)
    assert not any("#" in t or "Problem" in t or "Rabbit" in t for t in texts)


def test_a_compaction_summary_is_read_by_the_templates_own_section_titles():
    """extract/summary.py: only the template's titles open a section, so a numbered task with a label
    ("1. **Redis backend**: ...") is a task, not a section; a title with words after it or with no
    colon still opens one; "None" or "No next step" is no todo; a fix said alongside "blocking" is a
    solution, "UNRESOLVED" a problem; a <summary> quoted in a code span is not where the summary
    starts; a task in a script without spaces and a two-word task are kept; what is to do comes first."""
    from total_recall.extract import summary

    text = (
        "This session is being continued from a previous conversation.\n\nSummary:\n"
        "1. Primary Request and Intent:\n   Add rate limiting to the API.\n\n"
        "4. Errors and fixes:\n"
        "   1. **Clock skew in bucket refill**: still unresolved, refills drift by a second.\n"
        "   2. **Test hang**: Fixed by adding a timeout; previously this was blocking CI.\n"
        "   3. No other errors were encountered.\n\n"
        "## 6. Pending Tasks (carried over from the previous session)\n"
        "   1. **Redis backend**: Add a Redis backend for the token bucket\n"
        "   2. **Retry-After**: Return Retry-After headers on 429 responses\n"
        "   3. Add tests\n"
        "   4. 添加速率限制文档\n\n"
        "8. Current Work:\n   Writing the bucket refill, see `<summary>` tags in the template.\n\n"
        "9. Optional Next Step:\n   None - the user has not requested further work.\n"
    )
    found = [(i["type"], i["content"]) for i in summary.items(text, 5)]
    todos = [c for t, c in found if t == "todo"]
    assert todos == [
        "Redis backend: Add a Redis backend for the token bucket",
        "Retry-After: Return Retry-After headers on 429 responses",
        "Add tests",
        "添加速率限制文档",
    ]
    assert ("problem", "Clock skew in bucket refill: still unresolved, refills drift by a second.") in found
    assert ("solution", "Test hang: Fixed by adding a timeout; previously this was blocking CI.") in found
    assert not any("No other errors" in c or c.startswith("None") for _, c in found)
    assert [t for t, _ in found] == sorted((t for t, _ in found), key=summary.ORDER.get)  # todos first
    assert ("context", "Writing the bucket refill, see <summary> tags in the template.") in found
    assert summary.pending(text) == {summary.same(t) for t in todos}
    assert summary.pending("Summary:\n1. Primary Request: fix it\n") is None  # no Pending Tasks section
    assert summary.same("Add a currency column to the export (in progress)") == summary.same(
        "Add a currency column to the export."
    )
