"""Trust (issue 12): forget means gone, secrets are never stored or sent, only transcripts are read,
digests never cross projects, extractor output is bounded, archives are repaired, <private> parts,
pause and excluded projects. Real processes, real files, the fake OpenAI server over HTTP.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import unicodedata
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import REPO, SLOW_ON_POSTGRES
from fake_openai import FakeOpenAIProcess
from helpers import cli, cli_json, db_rows, db_write, env, hook, local_rows, record, write_transcript
from total_recall import config, projects, trust
from total_recall.extract import protocol
from total_recall.redact import redact, redact_batch
from trust_data import NEAR_MISSES, PEM_BODY, PROBED_SECRETS, SECRETS

SESSION_START = REPO / "hooks" / "session_start.py"
DAY = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def folder(tmp_path: Path, project: str) -> Path:
    return tmp_path / "claude" / "projects" / "".join(c if c.isalnum() else "-" for c in project)


def home_bytes() -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in config.paths().home.rglob("*") if p.is_file()]


def found_in_home(needle: str) -> list[str]:
    return [str(p) for p, data in home_bytes() if needle.encode() in data]


def session_start(cwd: str) -> str:
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SESSION_START)],
        capture_output=True,
        env=env(),
        input=json.dumps({"session_id": "x", "cwd": cwd, "hook_event_name": "SessionStart"}).encode(),
        timeout=30,
    )
    return done.stdout.decode()


def search_text(query: str) -> str:
    return json.dumps(cli_json("search", query, "--all-projects"))


def stored_without(path: Path, secrets: list[str], query: str) -> str:
    """Index the transcript; no secret is in a stored message, the home folder or the answer to
    `query` (search_here); the stored messages' text, for what must stay."""
    cli("backfill", str(path), "--wait")
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    found = search_here(query)
    for secret in secrets:
        assert secret not in stored and found_in_home(secret) == []
        assert secret not in found
    return stored


def search_here(query: str) -> str:
    """What `search --all-projects` answers when no daemon runs (server.in_process, the CLI's own
    path then), without a process per query; search_text covers the command."""
    from total_recall import server

    answer = server.in_process(config.load(), {"query": query, "all_projects": True, "cwd": os.getcwd()})
    return json.dumps(answer["results"])


def age(paths: list[Path], days: float = 40) -> None:
    old = time.time() - days * 86400
    for p in paths:
        os.utime(p, (old, old))


# === 1. forget means gone ========================================================================

KEEP_PROJECT = "/home/dev/projects/keeper"
MAIN_PROJECT = "/home/dev/projects/billing"
GONE_PROJECT = "/home/dev/projects/vendorx"


# SQLite only: "no byte behind" is read from the home folder's files (database, WAL, archives, logs).
def test_canaries_forgotten_by_session_idea_and_project_leave_no_byte_behind(tmp_path, fake):
    claude = tmp_path / "claude"
    (claude / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    s1 = write_transcript(
        folder(tmp_path, MAIN_PROJECT) / "sess-canary.jsonl",
        [
            ("user", "We decided the gateway codename is Cnrysession4242 for the billing rollout."),
            ("assistant", "Noted: the Cnrysession4242 gateway handles the billing rollout."),
        ],
        cwd=MAIN_PROJECT,
    )
    s2 = write_transcript(
        folder(tmp_path, MAIN_PROJECT) / "sess-two.jsonl",
        [
            ("user", "We decided the retry budget is Cnryidea7777 requests per minute."),
            ("user", "We decided to keep Postgres for the orders database."),
        ],
        cwd=MAIN_PROJECT,
        start=DAY,
    )
    s3 = write_transcript(
        folder(tmp_path, GONE_PROJECT) / "sess-vendor.jsonl",
        [("user", "We decided the vendor contract code is Cnryproject9999 for all invoices.")],
        cwd=GONE_PROJECT,
    )
    s4 = write_transcript(
        folder(tmp_path, KEEP_PROJECT) / "sess-keep.jsonl",
        [("user", "We decided to deploy the keeper service with Docker Compose.")],
        cwd=KEEP_PROJECT,
    )
    cli("backfill", "--all", "--wait")
    age([s1, s2, s3, s4])
    cli("maintain")  # archives every transcript (they are about to be swept by Claude Code)
    canaries = {"session": "Cnrysession4242", "idea": "Cnryidea7777", "project": "Cnryproject9999"}
    for needle in canaries.values():  # the test means something: each canary is stored in several places
        assert len(found_in_home(needle)) >= 2, (needle, found_in_home(needle))
    assert "Cnryidea7777" in session_start(MAIN_PROJECT)
    assert len(list(config.paths().archive.iterdir())) == 4

    preview = cli_json("forget", "--session", "sess-canary", "--dry-run")
    assert preview["dry_run"] and preview["forgotten"] >= 1 and preview["archives"]
    # what would go, by id and text, not only how much (the rest is counted past the first 50)
    assert len(preview["would_forget"]) == min(preview["forgotten"], 50) + (preview["forgotten"] > 50)
    assert all(line.startswith("#") and "(session sess-can)" in line for line in preview["would_forget"][:50])
    assert any("Cnrysession4242" in line for line in preview["would_forget"])
    assert found_in_home(canaries["session"])  # a dry run changes nothing
    went = cli_json("forget", "--session", "sess-canary")
    assert went["forgotten"] >= 1 and went["sessions_tombstoned"] == ["sess-canary"]
    [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%Cnryidea7777%'")
    cli_json("forget", str(idea_id))
    went = cli_json("forget", "--project", GONE_PROJECT)
    assert went["projects_tombstoned"] == [GONE_PROJECT]
    cli("maintain")

    # Later hooks and backfills never bring a forgotten session or project back.
    write_transcript(
        s1,
        [("user", "Also the Cnrysession4242 fallback uses port 7070.")],
        cwd=MAIN_PROJECT,
        append=True,
        start=DAY + timedelta(hours=3),
    )
    write_transcript(
        s3,
        [("user", "The Cnryproject9999 invoices go out monthly.")],
        cwd=GONE_PROJECT,
        append=True,
        start=DAY + timedelta(hours=3),
    )
    for path, session in ((s1, "sess-canary"), (s3, "sess-vendor")):
        assert (
            hook(
                {
                    "session_id": session,
                    "transcript_path": str(path),
                    "cwd": MAIN_PROJECT,
                    "hook_event_name": "SessionEnd",
                }
            ).returncode
            == 0
        )
    # A session of the forgotten project that was never indexed (said before the forget) stays out;
    # a session begun after the forget is remembered: forgetting is not excluding.
    s5 = write_transcript(
        folder(tmp_path, GONE_PROJECT) / "sess-vendor-old.jsonl",
        [("user", "We decided the Cnryproject9999 rebate applies twice.")],
        cwd=GONE_PROJECT,
        start=DAY,
    )
    s6 = write_transcript(
        folder(tmp_path, GONE_PROJECT) / "sess-vendor-new.jsonl",
        [("user", "We decided the new vendor portal uses single sign-on.")],
        cwd=GONE_PROJECT,
        start=datetime.now(timezone.utc) + timedelta(minutes=1),
    )
    cli("daemon", "--once")
    cli("backfill", "--all", "--wait")
    age([s1, s2, s3, s4, s5, s6])
    cli("maintain")

    for kind, needle in canaries.items():
        assert found_in_home(needle) == [], (kind, found_in_home(needle))
        assert needle not in search_here(needle.lower()), kind
        assert needle not in search_here(f"{needle} gateway retry budget vendor contract"), kind
        for project in (MAIN_PROJECT, GONE_PROJECT, KEEP_PROJECT):
            assert needle not in session_start(project)
    assert not [e for e in db_rows("SELECT name FROM entities") if "cnry" in e[0].lower()]
    # What was not forgotten is still found, and still archived.
    assert "keep Postgres" in search_here("Postgres orders database")
    assert "Docker Compose" in search_here("keeper service Docker Compose")
    assert "Postgres" in session_start(MAIN_PROJECT)
    assert "single sign-on" in search_here("vendor portal single sign-on")
    archived = sorted(p.name for p in config.paths().archive.iterdir())
    assert archived == sorted(trust.archive_name(str(p)) for p in (s2, s4, s5, s6))
    old_copy = gzip.decompress((config.paths().archive / trust.archive_name(str(s5))).read_bytes())
    assert old_copy == b"{}\n"  # its one line was said before the forget: withheld, line kept


def test_forget_project_by_a_short_name_shared_by_two_projects_is_refused(tmp_path, fake, store):
    for project in ("/home/u/one/api", "/home/u/two/api"):
        write_transcript(
            folder(tmp_path, project) / f"s-{project.split('/')[3]}.jsonl",
            [("user", f"We decided the {project.split('/')[3]} api uses gRPC.")],
            cwd=project,
        )
    cli("backfill", "--all", "--wait")
    before = db_rows("SELECT count(*) FROM ideas")
    done = cli("forget", "--project", "api", check=False)
    assert done.returncode == 1
    assert "/home/u/one/api" in done.stderr and "/home/u/two/api" in done.stderr
    assert db_rows("SELECT count(*) FROM ideas") == before
    preview = cli_json("forget", "--project", "/home/u/one/api", "--dry-run")
    assert preview["dry_run"] and preview["projects_tombstoned"] == ["/home/u/one/api"]
    assert db_rows("SELECT count(*) FROM ideas") == before
    went = cli_json("forget", "--project", "/home/u/one/api")
    assert went["forgotten"] >= 1
    assert {r[0] for r in db_rows("SELECT DISTINCT project FROM ideas")} == {"/home/u/two/api"}


def test_forget_rederives_llm_paraphrases_and_drops_event_text_and_orphan_entities(
    tmp_path, monkeypatch, store
):
    project = "/home/dev/projects/para"
    path = write_transcript(
        folder(tmp_path, project) / "sess-para.jsonl",
        [
            ("user", "The zebra codeword for the vault is Paracanary55."),
            ("user", "We decided to rotate the vault keys every quarter."),
        ],
        cwd=project,
    )
    answer = {
        "topic_update": {
            "name": "Vault and the Paracanary55 zebra word",
            "summary": "They talked about the zebra word (Paracanary55) and key rotation.",
        },
        "items": [
            {
                "type": "context",
                "content": "The vault codeword is Paracanary55.",
                "source_line": 1,
                "confidence": 0.9,
                "entities": [
                    {"name": "Paracanary55", "type": "concept"},
                    {"name": "vault", "type": "technology"},
                ],
            },
            {
                "type": "decision",
                "content": "Vault keys are rotated every quarter.",
                "source_line": 2,
                "confidence": 0.9,
                "entities": [{"name": "vault", "type": "technology"}],
            },
        ],
    }
    with FakeOpenAIProcess(tmp_path / "fake", {"chat": {"default": {"content": json.dumps(answer)}}}) as fake:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        cli("backfill", str(path), "--wait")
        assert db_rows("SELECT count(*) FROM spans WHERE summary LIKE '%Paracanary55%'")[0][0] == 1
        [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%Paracanary55%'")
        cli_json("forget", str(idea_id))
        assert "Paracanary55" not in search_text("Paracanary55 zebra word")
        assert found_in_home("Paracanary55") == []
        spans = db_rows("SELECT name, summary FROM spans WHERE depth > 0")
        assert spans and all("rotated every quarter" in s[1] for s in spans)
        assert db_rows("SELECT name FROM entities ORDER BY name") == [("vault",)]
        assert db_rows(
            "SELECT count(*) FROM memory_events WHERE object_id = ? AND action = 'forget'", (idea_id,)
        ) == [(1,)]
        assert "rotated every quarter" in search_text("vault key rotation")


def test_a_topic_renamed_after_a_forget_is_named_by_the_conversation_not_by_a_later_note(tmp_path, store):
    """Forgetting a memory renames its topic from the memories left (extractive): a note added to
    the session later (confidence 1.0) outranked them all, and a topic about the API server was
    renamed "Remember to buy milk"."""
    project = "/home/dev/projects/milk"
    path = write_transcript(
        folder(tmp_path, project) / "sess-milk.jsonl",
        [
            ("user", "We decided to serve the API with Caddy behind the load balancer."),
            ("user", "The Caddy config reloads without dropping connections."),
        ],
        cwd=project,
    )
    cli("backfill", str(path), "--wait")
    note = cli_json("note", "Remember to buy milk", "--session", "sess-milk")
    [(span_id,)] = db_rows("SELECT span_id FROM ideas WHERE id = ?", (note["id"],))
    assert span_id is not None  # the note is in the session's topic
    [(first,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%load balancer%'")
    cli_json("forget", str(first))
    [(name, summary)] = db_rows("SELECT name, summary FROM spans WHERE id = ?", (span_id,))
    assert "milk" not in name and "Caddy config reloads" in name, name


# === 2. secrets never stored or sent ==============================================================


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_each_of_the_26_secret_kinds_is_redacted(kind, text, secret):
    assert len(SECRETS) == 26
    out = redact(text)
    assert secret not in out and "[REDACTED:" in out


@pytest.mark.parametrize(("kind", "text", "secret"), PROBED_SECRETS, ids=[s[0] for s in PROBED_SECRETS])
def test_the_forms_a_privacy_probe_found_stored_are_redacted(kind, text, secret):
    """A name and its value with a space between, a value on the line after "is", a login's
    user:password pair, a PIN; their look-alikes are in NEAR_MISSES (I207)."""
    out = redact(text)
    assert secret not in out and "[REDACTED:" in out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_survive_redaction(text):
    assert len(NEAR_MISSES) >= 30
    assert redact(text) == text


def test_a_secret_found_once_is_redacted_where_it_recurs_in_the_batch():
    first, later = redact_batch(["DB_PASS=Kx7mQ2vZp9", "then I logged in with Kx7mQ2vZp9 on staging"])
    assert "Kx7mQ2vZp9" not in first + later
    assert later.startswith("then I logged in with [REDACTED:")


def test_entity_names_that_hold_secrets_are_dropped():
    raw = {
        "items": [
            {
                "type": "context",
                "content": "Stripe is configured.",
                "source_line": 1,
                "entities": [
                    {"name": "sk_live_51HqWeRtYuIoPaSdFgHjKlZx", "type": "concept"},
                    {"name": "[REDACTED:password]"},
                    {"name": "Stripe", "type": "technology"},
                ],
            }
        ]
    }
    out = protocol.validate_output(raw, {1}).output
    assert [e["name"] for e in out["items"][0]["entities"]] == ["Stripe"]


def test_redaction_stays_fast():
    text = ("ordinary prose about the deploy at path/to/file.py:42 with id 3f9a1c2e " * 20000)[:1_000_000]
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 2.0  # measured ~0.2 s per MB here; per message it is microseconds


def secrets_transcript(path: Path, project: str) -> Path:
    """The 26 secrets in user text, a .env tool result, assistant prose and a service-account key."""
    session, when = path.stem, DAY
    lines = []
    user_text = " ".join(text for kind, text, _ in SECRETS[:10])
    lines.append(record("user", f"Here is my setup: {user_text}", session=session, cwd=project, when=when))
    env_file = "\n".join(
        text for kind, text, _ in SECRETS if kind in ("env_pass", "env_secret", "export_token")
    )
    env_file += "\nSTRIPE_SECRET=" + SECRETS[10][2] + "\nNPM_TOKEN=" + SECRETS[12][2]
    tool_id = f"toolu_{uuid.uuid4().hex[:12]}"
    use = record("assistant", "", session=session, cwd=project, when=when + timedelta(seconds=5))
    use["message"]["content"] = [
        {
            "type": "tool_use",
            "id": tool_id,
            "name": "Bash",
            "input": {"command": "cat .env && " + SECRETS[18][1]},
        }
    ]
    lines.append(use)
    result = record("user", "", session=session, cwd=project, when=when + timedelta(seconds=6))
    result["message"]["content"] = [{"type": "tool_result", "tool_use_id": tool_id, "content": env_file}]
    lines.append(result)
    prose = " ".join(text for kind, text, _ in SECRETS[10:25])
    lines.append(
        record(
            "assistant",
            f"I configured everything: {prose} Then I logged in with Kx7mQ2vZp9 again.",
            session=session,
            cwd=project,
            when=when + timedelta(seconds=9),
        )
    )
    lines.append(
        record(
            "user",
            "The service account file: " + SECRETS[25][1],
            session=session,
            cwd=project,
            when=when + timedelta(seconds=12),
        )
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def leaked(data: bytes) -> list[str]:
    return [s for _, _, s in SECRETS if s.encode() in data] + (["pem"] if PEM_BODY.encode() in data else [])


@pytest.mark.parametrize("extractor", ["offline", "llm"])
def test_26_secret_kinds_reach_neither_the_home_folder_nor_the_endpoint(tmp_path, monkeypatch, extractor):
    project = "/home/dev/projects/secrets"
    path = secrets_transcript(folder(tmp_path, project) / "sess-secrets.jsonl", project)
    assert len(leaked(path.read_bytes())) == 27  # every needle is really in the transcript
    answer = {
        "items": [
            {
                "type": "decision",
                "content": "The setup uses Stripe and Postgres.",
                "source_line": 1,
                "entities": [{"name": "Stripe", "type": "technology"}],
            }
        ]
    }
    with FakeOpenAIProcess(tmp_path / "fake", {"chat": {"default": {"content": json.dumps(answer)}}}) as fake:
        if extractor == "llm":
            monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        cli("backfill", str(path), "--wait")
        cli_json("search", "Stripe Postgres setup", "--all-projects")
        (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
        age([path])
        # maintain runs while the endpoint is up: its embedding pass is checked too, and it does
        # not spend its retries on a closed port.
        assert cli_json("maintain")["archived"]  # the archive copy is redacted too
        requests = fake.requests()
    if extractor == "llm":
        assert any(r["path"].endswith("/chat/completions") for r in requests)
    assert db_rows("SELECT count(*) FROM messages")[0][0] == 5
    assert not leaked(json.dumps(requests).encode()), leaked(json.dumps(requests).encode())
    for file, data in home_bytes():
        assert not leaked(data), (file, leaked(data))


def test_a_secret_in_a_search_query_is_not_sent_to_the_embedding_endpoint(tmp_path, fake):
    """A search embeds its query (and a HyDE passage) at the embedding endpoint: the query is
    redacted first, as every text sent anywhere is; its words still find what was said."""
    token = "ghp_QueryT0kenAbCdEfGh1234567890XyZwVuTs"
    path = write_transcript(
        folder(tmp_path, "/home/dev/projects/query") / "sess-query.jsonl",
        [("user", "We decided the Zanzibar CI token lives in the vault.")],
        cwd="/home/dev/projects/query",
    )
    cli("backfill", str(path), "--wait")
    before = len(fake.requests())
    found = cli_json("search", f"which Zanzibar repo uses token {token}", "--all-projects")
    embedded = [r for r in fake.requests()[before:] if r["path"].endswith("/embeddings")]
    assert embedded, "the query was embedded"
    assert all(token not in r["body"] for r in embedded)
    assert any("[REDACTED:github_token]" in r["body"] for r in embedded)
    assert any("Zanzibar" in r["content"] for r in found)


def test_a_secret_typed_into_an_edit_is_neither_stored_nor_sent_to_the_embedding_endpoint(tmp_path, fake):
    """`edit` (the CLI and the web view) replaces a memory's text and embeds it at once: the new
    text is redacted first, as a note is, so a token typed there reaches no table and no endpoint."""
    token = "ghp_EditT0kenAbCdEfGh1234567890XyZwVuTsR"
    path = write_transcript(
        folder(tmp_path, "/home/dev/projects/edit") / "sess-edit.jsonl",
        [("user", "We decided the Zanzibar deploys run from the release branch.")],
        cwd="/home/dev/projects/edit",
    )
    cli("backfill", str(path), "--wait")
    idea = db_rows("SELECT id FROM ideas WHERE content LIKE '%Zanzibar%'")[0][0]
    before = len(fake.requests())
    edited = json.loads(
        cli("edit", str(idea), f"Zanzibar deploys push with the token {token}", "--json").stdout
    )
    embedded = [r for r in fake.requests()[before:] if r["path"].endswith("/embeddings")]
    assert edited["embedded"] and embedded, "the new text was embedded at once"
    assert all(token not in r["body"] for r in embedded)
    assert any("[REDACTED:github_token]" in r["body"] for r in embedded)
    assert db_rows("SELECT content FROM ideas WHERE id = ?", (idea,)) == [
        ("Zanzibar deploys push with the token [REDACTED:github_token]",)
    ]
    assert found_in_home(token) == []


def test_a_secret_in_a_records_metadata_is_not_stored(tmp_path):
    """A record carries strings beside its text (sessionId, cwd, gitBranch, uuid) that are stored
    too. Claude Code never writes a secret there; a hand-made or hostile file may, and it is not
    kept: the session falls back to the file's, the cwd and branch keep their redacted form, an id
    is dropped. A time that is not ISO-8601 is no time."""
    token = "sk-ant-api03-" + "Qx7" * 14
    project = f"/home/dev/projects/{token}"
    path = folder(tmp_path, "/home/dev/projects/meta") / "sess-meta.jsonl"
    first = record("user", "We decided to keep the ledger in Postgres.", session=token, cwd=project, when=DAY)
    first.update(gitBranch=f"fix/{token}", uuid=token)
    second = record("assistant", "Agreed, Postgres it is.", session="sess-meta", cwd=project, when=DAY)
    second.update(gitBranch="main", timestamp=token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    assert token.encode() in path.read_bytes()
    cli("backfill", str(path), "--wait")
    assert {r[0] for r in db_rows("SELECT session_id FROM messages")} == {"sess-meta"}
    assert {r[0] for r in db_rows("SELECT git_branch FROM messages")} == {
        "fix/[REDACTED:anthropic_key]",
        "main",
    }
    assert db_rows("SELECT count(*) FROM messages WHERE timestamp IS NULL")[0][0] == 1
    assert found_in_home(token) == []


def tool_call_and_result(session: str, project: str, when: datetime, command: str, output: str) -> list[dict]:
    """A Bash call (an assistant record) and its output (a user record), as Claude Code writes them."""
    tool_id = f"toolu_{uuid.uuid4().hex[:12]}"
    use = record("assistant", "", session=session, cwd=project, when=when)
    use["message"]["content"] = [
        {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
    ]
    result = record("user", "", session=session, cwd=project, when=when + timedelta(seconds=1))
    result["message"]["content"] = [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]
    return [use, result]


def write_records(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def test_a_secret_crossing_the_cut_of_a_tool_call_or_its_output_is_not_kept_in_part(tmp_path):
    """A tool call is kept as a 120-character descriptor and its output as its first 500 characters.
    A token that crosses either cut is hidden whole: its first half alone ("Bearer Bz9Yx8Wv7Ut…",
    "ghp_CutAtF1v…") is too short for any pattern, so it must not be what is redacted."""
    project, session = "/home/dev/projects/cuts", "sess-cuts"
    bearer = "Bz9Yx8Wv7Ut6Sr5Qp4On3Ml2Kj1Ih0GfEdCbA"
    github = "ghp_CutAtF1veHundredAbCdEf1234567890QwE"
    command = "curl -sS -X POST https://api.example.com/v1/zanzibar/exports/run/now -H "
    command += f"'Authorization: Bearer {bearer}'"
    assert command.index(bearer) < 120 - len("[tool Bash: ") < command.index(bearer) + len(bearer)
    output = "x" * 480 + " token " + github + " end"
    assert output.index(github) < 500 < output.index(github) + len(github)
    lines = [
        record("user", "We decided to run the Zanzibar export now.", session=session, cwd=project, when=DAY)
    ]
    lines += tool_call_and_result(session, project, DAY + timedelta(seconds=5), command, "ok")
    lines += tool_call_and_result(session, project, DAY + timedelta(seconds=9), "cat build.log", output)
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    cli("backfill", str(path), "--wait")
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    assert "Bearer [REDACTED:bearer_token]…]" in stored and " token [REDACTED:github_token]…" in stored
    for half in (bearer[:8], github[:9]):
        assert half not in stored and found_in_home(half) == []
        assert half not in search_here("zanzibar exports run token build")


def test_the_output_of_a_command_that_prints_a_secret_is_neither_stored_nor_found(tmp_path):
    """`kubectl get secret … | base64 -d`, `gh auth token`, `echo $DB_PASSWORD`: the output is the
    value alone, with no name before it to give it away. Claude Code writes the call and its output
    on two lines; the output of such a call is hidden, and so is the value where it recurs in the read.
    The output of an ordinary command of one word stays."""
    project, session = "/home/dev/projects/vaulted", "sess-vaulted"
    password, token = "Xq7vLr2pWm9t", "gho_notaRealToken4UeQ8vZkPm2WcTt"
    lines = [
        record(
            "user", "Read the staging db password from the cluster.", session=session, cwd=project, when=DAY
        )
    ]
    calls = [
        ("kubectl get secret staging-db -o jsonpath='{.data.password}' | base64 -d", password + "\n"),
        ("gh auth token", token),
        ("git branch --show-current", "feature-vault-sync"),
    ]
    for n, (command, output) in enumerate(calls):
        lines += tool_call_and_result(session, project, DAY + timedelta(seconds=5 + 4 * n), command, output)
    said = f"The staging password is set; I'll use {password} only through the secret mount."
    lines.append(record("assistant", said, session=session, cwd=project, when=DAY + timedelta(seconds=30)))
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    cli("backfill", str(path), "--wait")
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    assert stored.count("[REDACTED:command_output]") == 2 and "feature-vault-sync" in stored
    for secret in (password, token):
        assert secret not in stored and found_in_home(secret) == []
        assert secret not in search_here("staging db password cluster token secret mount")


def test_secrets_given_as_string_arguments_or_by_layout_alone_are_neither_stored_nor_found(tmp_path):
    """Code an assistant writes passes a secret as a call's argument after its quoted name, to a
    setter or into a subscript, and a tool output can hold a .pgpass line or an Oracle connect
    string: none has a name followed by "=" or ":" before the value. Each is hidden in what is
    stored, in the home folder and in what a search returns; the names and the rest stay."""
    project, session = "/home/dev/projects/wired", "sess-wired"
    secrets = ["Xk9#mQ2vpL7t", "Vb4nWq8zRt2y", "Hm3kPz7xQw5r", "Jt6vLc9mNq2b", "Pg5sQl8wRt3z", "Or4cLe7tYq9x"]
    code = (
        "Here is the wiring:\n```php\ndefine('DB_PASSWORD', '" + secrets[0] + "');\n```\n"
        '```python\nos.environ["STRIPE_SECRET"] = "' + secrets[1] + '"\n'
        'keyring.set_password("system", "deploy", "' + secrets[2] + '")\n```\n'
        '```java\nds.setPassword("' + secrets[3] + '");\n```'
    )
    lines = [
        record("user", "Wire the zanzibar billing database.", session=session, cwd=project, when=DAY),
        record("assistant", code, session=session, cwd=project, when=DAY + timedelta(seconds=5)),
    ]
    output = f"db.internal:5432:billing:deploy:{secrets[4]}\nsqlplus -s app/{secrets[5]}@db:1521/BILL\n"
    lines += tool_call_and_result(
        session, project, DAY + timedelta(seconds=9), "cat ~/.pgpass notes.txt", output
    )
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    cli("backfill", str(path), "--wait")
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    assert (
        "DB_PASSWORD" in stored and "setPassword" in stored and "db.internal:5432:billing:deploy:" in stored
    )
    found = search_here("zanzibar billing database password wiring pgpass")
    for secret in secrets:
        assert secret not in stored and found_in_home(secret) == []
        assert secret not in found


def test_secrets_given_to_commands_that_store_them_are_neither_stored_nor_found(tmp_path):
    """A session setting up deployment gives secrets to the commands that store them (a repository's
    secret, a Worker's, Redis' password) and to a hashing call in a seed script: none of them follows
    a secret's name and "=" or ":". Each is hidden in what is stored, in the home folder and in what a
    search returns; the commands, and the names they store the secrets under, stay."""
    project, session = "/home/dev/projects/deploy", "sess-deploy"
    secrets = ["Gh7sEcrVt2Lm9x", "Wr4nGlrQx8Zt3v", "Rd5sPwKq9Lm2xT", "Bc6rYpTq3Wn8vZ"]
    lines = [
        record("user", "Set up the quokka deployment secrets.", session=session, cwd=project, when=DAY),
        record(
            "assistant",
            "Seed script:\n```python\nadmin_hash = bcrypt.hashpw(b'"
            + secrets[3]
            + "', bcrypt.gensalt())\n```",
            session=session,
            cwd=project,
            when=DAY + timedelta(seconds=3),
        ),
    ]
    commands = [
        f"gh secret set QUOKKA_TOKEN --body {secrets[0]} --repo acme/quokka",
        f"echo -n '{secrets[1]}' | npx wrangler secret put QUOKKA_KEY",
        f"redis-cli -h cache CONFIG SET requirepass {secrets[2]}",
    ]
    for n, command in enumerate(commands):
        lines += tool_call_and_result(session, project, DAY + timedelta(seconds=10 + 5 * n), command, "OK")
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    stored = stored_without(path, secrets, "quokka deployment secrets token key requirepass hashpw")
    assert "gh secret set QUOKKA_TOKEN --body" in stored and "wrangler secret put QUOKKA_KEY" in stored
    assert "CONFIG SET requirepass" in stored and "bcrypt.hashpw" in stored


def test_a_tables_password_column_is_neither_stored_nor_found(tmp_path):
    """The user pastes the staging accounts as a Markdown table, and a command prints a CSV export of
    them: each row's password is hidden in what is stored, in the home folder and in what a search
    returns; the users, the roles and the headers stay."""
    project, session = "/home/dev/projects/staging", "sess-accounts"
    secrets = ["Hx7tPlm2Qw9z", "Vb3nKr8sLt5y", "Ws6mJq2xPd4r"]
    table = (
        "The staging accounts:\n\n| user | password | role |\n|---|---|---|\n"
        f"| wombat-admin | {secrets[0]} | owner |\n| wombat-dev | {secrets[1]} | dev |"
    )
    lines = [record("user", table, session=session, cwd=project, when=DAY)]
    export = f"username,password,role\nwombat-ops,{secrets[2]},ops\n"
    lines += tool_call_and_result(session, project, DAY + timedelta(seconds=5), "cat accounts.csv", export)
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    stored = stored_without(path, secrets, "wombat staging accounts password role")
    assert "| wombat-admin | [REDACTED:password] | owner |" in stored
    assert "username,password,role" in stored and "wombat-ops,[REDACTED:password],ops" in stored


def test_a_secret_given_as_a_default_or_a_fallback_is_neither_stored_nor_found(tmp_path):
    """Claude writes a settings class whose fields default to real values and a script that falls back
    to one when the environment has none: each literal is hidden in what is stored, in the home folder
    and in what a search returns; the fields, the calls and the variables' names stay."""
    project, session = "/home/dev/projects/settings", "sess-defaults"
    secrets = ["Hx7tPlm2Qw9z", "Tk8sPq2Lm4Zx", "Vb3nKr8sLt5y"]
    code = (
        "```python\nclass Settings(BaseSettings):\n"
        f'    db_password: str = Field(default="{secrets[0]}")\n'
        f'    wombat_token: SecretStr = Field("{secrets[1]}", description="the token")\n```\n'
        f'```js\nconst password = process.env.WOMBAT_PASSWORD || "{secrets[2]}";\n```'
    )
    lines = [
        record("user", "Write the wombat settings.", session=session, cwd=project, when=DAY),
        record("assistant", code, session=session, cwd=project, when=DAY + timedelta(seconds=5)),
    ]
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    stored = stored_without(path, secrets, "wombat settings password token field default")
    assert 'db_password: str = Field(default="[REDACTED:password]")' in stored
    assert "process.env.WOMBAT_PASSWORD ||" in stored


def test_a_password_said_in_another_language_is_neither_stored_nor_found(tmp_path):
    """Users write to Claude Code in their own language: a password given in German, Spanish or
    Chinese prose is hidden in what is stored, in the home folder and in what a search returns."""
    project, session = "/home/dev/projects/i18n", "sess-i18n"
    secrets = ["Hx7tPlm2Qw9z", "Gato$2024x", "Kq8sPlm3Wz2y"]
    said = [
        f"Das Passwort ist {secrets[0]} für die Wombat-Datenbank.",
        f"la contraseña es {secrets[1]} para el servidor wombat",
        f"wombat 数据库的密码是{secrets[2]}。",
    ]
    lines = [
        record("user", text, session=session, cwd=project, when=DAY + timedelta(seconds=5 * n))
        for n, text in enumerate(said)
    ]
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    stored = stored_without(path, secrets, "wombat passwort contraseña 密码")
    assert "Das Passwort ist [REDACTED:password] für die Wombat-Datenbank." in stored


def test_headers_in_a_har_file_or_a_postman_collection_are_neither_stored_nor_found(tmp_path):
    """Debugging a login, the user pastes a Postman request and Claude reads the browser's HAR file: the
    bearer token, the Basic credentials and the session cookie are hidden in what is stored, in the
    home folder and in what a search returns; the header names and the other cookies stay."""
    project, session = "/home/dev/projects/login", "sess-har"
    secrets = ["Qw7Rt5Zk3Lm9", "cXVva2thOlMzY3IzdA==", "Kp4sWm8Zt2Lr6Vq"]
    postman = (
        "The quokka login fails from Postman:\n"
        f'"header": [{{"key": "Authorization", "value": "Bearer {secrets[0]}", "type": "text"}}]'
    )
    har = (
        '{"request": {"method": "POST", "url": "https://quokka.example/login", "headers": ['
        f'{{"name": "Authorization", "value": "Basic {secrets[1]}"}}, '
        f'{{"name": "Cookie", "value": "qsid={secrets[2]}; theme=dark"}}]}}}}'
    )
    lines = [record("user", postman, session=session, cwd=project, when=DAY)]
    lines += tool_call_and_result(session, project, DAY + timedelta(seconds=5), "cat login.har", har)
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    stored = stored_without(path, secrets, "quokka login authorization cookie postman")
    assert '"key": "Authorization", "value": "Bearer [REDACTED:' in stored
    assert '"value": "qsid=[REDACTED:cookie]; theme=dark"' in stored


def test_a_secret_output_is_hidden_when_its_call_was_in_an_earlier_read(tmp_path):
    """The daemon reads a transcript in pieces: a read can end after a call and the next begin with
    its output. The output still knows its command (the reader looks before its start)."""
    project, session = "/home/dev/projects/split", "sess-split"
    password = "Zr8mKq3vTn6w"
    start = record(
        "user", "Print the prod db password from the cluster.", session=session, cwd=project, when=DAY
    )
    command = "kubectl get secret prod-db -o jsonpath='{.data.password}' | base64 -d"
    call, output = tool_call_and_result(session, project, DAY + timedelta(seconds=5), command, password)
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", [start, call])
    cli("backfill", str(path), "--wait")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(output) + "\n")
    cli("backfill", str(path), "--wait")
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    assert "[REDACTED:command_output]" in stored
    assert password not in stored and found_in_home(password) == []


def test_the_archive_copy_hides_secrets_inside_the_strings_of_each_line(tmp_path, fake):
    """A transcript line is JSON: inside its strings a newline is written `\\n` and a quote `\\"`,
    so a secret at the start of a line of a tool's output or a file's content, or a JSON key of a
    pretty-printed config, is only a secret once the string is read. The archive copy hides them
    all, and a value found in one line where it recurs in another; a line that is not JSON (a crash
    mid-write) keeps no secret either."""
    project, session = "/home/dev/projects/archive", "sess-archive"
    secrets = {
        "json_password": "ArchJs0nPw1x",
        "output_line": "ghp_ArchNewl1neT0kenAbCdEf1234567890QwE",
        "file_content": "ArchWr1teP4ss",
        "thinking": "AKIAARCHTH1NK1NGKEY7",
        "not_json": "N0tJs0nPw88",
    }
    lines = [
        record("user", "We decided to archive the Zanzibar config.", session=session, cwd=project, when=DAY)
    ]
    thinking = record("assistant", "", session=session, cwd=project, when=DAY + timedelta(seconds=2))
    thinking["message"]["content"] = [
        {"type": "thinking", "thinking": f"Old key from the notes:\n{secrets['thinking']}\nDo not echo it."}
    ]
    lines.append(thinking)
    config_json = json.dumps({"name": "zanzibar", "password": secrets["json_password"]}, indent=2)
    lines += tool_call_and_result(
        session, project, DAY + timedelta(seconds=4), "cat config.json", config_json
    )
    output = f"token follows\n{secrets['output_line']}\ndone"
    lines += tool_call_and_result(session, project, DAY + timedelta(seconds=6), "gh auth token", output)
    write = record("assistant", "", session=session, cwd=project, when=DAY + timedelta(seconds=8))
    content = f"APP=1\nDB_PASS={secrets['file_content']}\n"
    write["message"]["content"] = [
        {
            "type": "tool_use",
            "id": "toolu_w1",
            "name": "Write",
            "input": {"file_path": ".env", "content": content},
        }
    ]
    lines.append(write)
    lines.append(
        record(
            "user",
            f"The old one was {secrets['json_password']} by the way.",
            session=session,
            cwd=project,
            when=DAY,
        )
    )
    path = write_records(folder(tmp_path, project) / f"{session}.jsonl", lines)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(
            '{"type": "user", "message": {"content": "cut off\\nDB_PASSWORD=' + secrets["not_json"] + "\n"
        )
    raw = path.read_bytes()
    assert all(s.encode() in raw for s in secrets.values())
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    cli("backfill", str(path), "--wait")
    age([path])
    assert cli_json("maintain")["archived"]
    [archive] = list(config.paths().archive.iterdir())
    copy = gzip.decompress(archive.read_bytes()).decode()
    assert [name for name, value in secrets.items() if value in copy] == []
    kept = copy.split("\n")
    assert len(kept) == len(raw.decode().split("\n"))  # line numbers stay those of the transcript
    assert all(json.loads(line) for line in kept[: len(lines)])
    assert "[REDACTED:" in kept[-2] and kept[-2].startswith('{"type": "user"')
    assert json.loads(kept[0]) == lines[0]  # a line without a secret is kept as it was


# === 3. only transcripts are read ==================================================================


def test_hook_payloads_naming_files_outside_the_projects_folder_are_never_read(tmp_path, fake):
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    project = "/home/dev/projects/real"
    real = write_transcript(
        folder(tmp_path, project) / "sess-real.jsonl",
        [("user", "We decided to ship the real feature on Monday.")],
        cwd=project,
    )
    outside = write_transcript(
        tmp_path / "elsewhere" / "stolen.jsonl",
        [("user", "We decided the Outsidecanary31 stays out of memory.")],
        cwd=project,
    )
    link = folder(tmp_path, project) / "link-session.jsonl"
    link.symlink_to(outside)
    escape = str(folder(tmp_path, project)) + "/../../../elsewhere/stolen.jsonl"
    cli("init")
    for path in (
        "/etc/passwd",
        "/etc/shadow",
        "/proc/self/environ",
        str(outside),
        escape,
        str(link),
        str(folder(tmp_path, project) / "notes.txt"),
        str(real),
    ):
        assert (
            hook(
                {"session_id": "s", "transcript_path": path, "cwd": project, "hook_event_name": "Stop"}
            ).returncode
            == 0
        )
    # A row that reached the queue some other way (an old spool, an older hook) is re-checked.
    with open(config.paths().spool, "a") as fh:
        fh.write(
            json.dumps({"transcript_path": str(outside), "event": "Stop", "enqueued_at": time.time()}) + "\n"
        )
    cli("daemon", "--once")
    age([real, outside])
    cli("maintain")
    assert db_rows("SELECT source_file FROM index_state") == [(str(real),)]
    assert {r[0] for r in db_rows("SELECT path FROM files WHERE id IN (SELECT file_id FROM messages)")} == {
        str(real)
    }
    assert local_rows("SELECT transcript_path, last_error FROM work_queue ORDER BY id") == [
        (str(real), None),
        (str(outside), "refused: outside the Claude projects folder (and [privacy] extra_roots)"),
    ]
    assert found_in_home("Outsidecanary31") == []
    assert [p.name for p in config.paths().archive.iterdir()] == [trust.archive_name(str(real))]
    refused = (config.paths().home / "refused.log").read_text()
    assert refused.count("outside the Claude projects folder") == 2  # the file and the symlink to it
    assert refused.count("not a .jsonl file") == 4 and refused.count("path contains '..'") == 1
    assert cli("backfill", str(outside), check=False).returncode == 1


def test_backfilling_a_folder_says_which_of_its_transcripts_may_not_be_read(tmp_path, fake):
    """A folder outside the projects folder is refused with the reason (not "transcripts: 0" and exit
    0, as if it held none); a folder that holds a link out of it queues the rest and counts the link."""
    project = "/home/dev/projects/mixed"
    elsewhere = tmp_path / "elsewhere"
    outside = [
        write_transcript(elsewhere / f"copy-{i}.jsonl", [("user", f"Outsidecanary5{i} said.")], cwd=project)
        for i in range(2)
    ]
    real = write_transcript(
        folder(tmp_path, project) / "sess-real.jsonl", [("user", "We decided to ship.")], cwd=project
    )
    (folder(tmp_path, project) / "link-session.jsonl").symlink_to(outside[0])
    cli("init")

    done = cli("backfill", str(elsewhere), "--wait", check=False)
    assert done.returncode == 1
    assert "none of its 2 transcripts may be read: outside the Claude projects folder" in done.stderr
    assert local_rows("SELECT count(*) FROM work_queue") == [(0,)]

    result = cli_json("backfill", str(folder(tmp_path, project)), "--wait")
    assert (result["transcripts"], result["queued"], result["refused"]) == (1, 1, 1)
    assert local_rows("SELECT transcript_path FROM work_queue") == [(str(real),)]
    assert found_in_home("Outsidecanary50") == [] and found_in_home("Outsidecanary51") == []
    # A folder whose one transcript is a link out of it: the link is named, not the folder.
    lonely = folder(tmp_path, "/home/dev/projects/lonely")
    lonely.mkdir(parents=True)
    (lonely / "link-only.jsonl").symlink_to(outside[1])
    done = cli("backfill", str(lonely), "--wait", check=False)
    assert done.returncode == 1
    assert (
        f"its one transcript {lonely / 'link-only.jsonl'} is outside the Claude projects folder"
        in done.stderr
    )


def test_a_symlink_swapped_while_its_transcript_is_read_never_gets_the_other_file_read(tmp_path, monkeypatch):
    """The indexer reads a long transcript in slices (indexer.READ_CHUNK_BYTES) and embeds each
    slice's batches before it reads on. A symlink that passed the path rule is swapped to an outside
    file meanwhile (when the first slice's words reach the embedding server): the file it opened
    is the one read to the end, and nothing of the outside file is read."""
    from fake_openai import FakeOpenAI
    from total_recall import db, indexer

    project = "/home/dev/projects/swap"
    when = DAY
    opening = json.dumps(
        record("user", "We decided Insidecanary42 ships first.", session="s", cwd=project, when=when)
    )
    filler = json.dumps({"type": "progress", "sessionId": "s", "data": "x" * 60_000})
    body = opening + "\n" + (filler + "\n") * (indexer.READ_CHUNK_BYTES // 60_000 + 10)
    tail = "We decided Insidetail43 ships last."
    inside = folder(tmp_path, project) / "target.jsonl"
    inside.parent.mkdir(parents=True)
    inside.write_text(body + json.dumps(record("user", tail, session="s", cwd=project, when=when)) + "\n")
    outside = tmp_path / "elsewhere" / "secret.jsonl"  # the same first bytes, then another line
    outside.parent.mkdir()
    secret = "We decided the Outsidecanary44 password rotates weekly."
    outside.write_text(body + json.dumps(record("user", secret, session="s", cwd=project, when=when)) + "\n")
    link = folder(tmp_path, project) / "link.jsonl"
    link.symlink_to(inside)
    swapped = []

    def swap_then_embed(request: dict) -> dict:
        if not swapped and "Insidecanary42" in json.dumps(request.get("input")):
            turned = link.with_name("link.tmp")
            turned.symlink_to(outside)
            os.replace(turned, link)
            swapped.append(True)
        return {}

    with FakeOpenAI() as srv:
        srv.set_embeddings(swap_then_embed)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        cli("init")
        database = db.connect()
        try:
            report = indexer.Indexer(database, config.load()).process(str(link))
        finally:
            database.close()
    assert swapped, "the link was not swapped between two slices"
    said = " ".join(r[0] for r in db_rows("SELECT content FROM messages"))
    assert "Insidecanary42" in said and "Insidetail43" in said
    assert "Outsidecanary44" not in said and found_in_home("Outsidecanary44") == []
    assert report.refused is None and report.lines == 2 + indexer.READ_CHUNK_BYTES // 60_000 + 10


def test_extra_roots_are_read_only_when_configured(tmp_path, fake, monkeypatch):
    other = write_transcript(
        tmp_path / "mirror" / "p" / "sess-mirror.jsonl",
        [("user", "We decided the mirror root holds archived sessions.")],
        cwd="/x",
    )
    cli("init")
    assert hook({"transcript_path": str(other), "hook_event_name": "Stop"}).returncode == 0
    monkeypatch.setenv("TOTAL_RECALL_PRIVACY_EXTRA_ROOTS", str(tmp_path / "mirror"))
    assert hook({"transcript_path": str(other), "hook_event_name": "Stop"}).returncode == 0
    cli("daemon", "--once")
    assert local_rows("SELECT transcript_path FROM work_queue") == [(str(other),)]
    assert db_rows("SELECT source_file FROM index_state") == [(str(other),)]


def test_an_empty_or_relative_extra_root_is_ignored_and_said(tmp_path, fake, monkeypatch):
    """`[privacy] extra_roots = ["", "mirror"]` would allow the working directory of whichever
    process reads it (`Path("")` is "."): the hook and the daemon ignore both entries, the daemon
    logs them and `doctor` names them, and a transcript under that directory is not read."""
    cli("init")
    config.paths().config.write_text('[privacy]\nextra_roots = ["", "mirror"]\n')
    work = tmp_path / "work"
    stray = write_transcript(work / "mirror" / "sess-stray.jsonl", [("user", "We decided Straycanary61.")])
    monkeypatch.chdir(work)  # the hook's and the daemon's working directory
    assert hook({"transcript_path": str(stray), "hook_event_name": "Stop"}).returncode == 0
    assert "outside the Claude projects folder" in (config.paths().home / "refused.log").read_text()
    with open(config.paths().spool, "a") as fh:  # a row that reached the queue some other way
        fh.write(
            json.dumps({"transcript_path": str(stray), "event": "Stop", "enqueued_at": time.time()}) + "\n"
        )
    drained = cli("daemon", "--once")
    assert "extra_roots_ignored" in drained.stderr
    assert local_rows("SELECT last_error FROM work_queue") == [
        ("refused: outside the Claude projects folder (and [privacy] extra_roots)",)
    ]
    assert db_rows("SELECT count(*) FROM index_state") == [(0,)] and found_in_home("Straycanary61") == []
    privacy = cli_json("doctor", "--fast")["privacy"]
    assert privacy["extra_roots_ignored"] == ["", "mirror"] and "absolute" in privacy["fix"]
    assert privacy["transcript_roots"] == [os.path.realpath(tmp_path / "claude" / "projects")]


# === 4. smaller holes ==============================================================================


def test_digest_keys_never_collide_and_the_hook_agrees(tmp_path, fake):
    import importlib.util

    spec = importlib.util.spec_from_file_location("session_start_hook", SESSION_START)
    hook_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook_module)
    nfc = "/home/u/caf\u00e9"
    for path in ("/home/u/client-a", "/home/u/client_a", nfc, "/home/u/x y/", "/home/u/" + "z" * 300):
        assert hook_module.digest_key(path) == projects.digest_key(path)
    assert projects.digest_key("/home/u/client-a") != projects.digest_key("/home/u/client_a")
    assert hook_module.digest_key(unicodedata.normalize("NFD", nfc)) == projects.digest_key(nfc)
    assert hook_module.digest_key("/home/u/x y/") == projects.digest_key("/home/u/x y")
    for project, fact in (
        ("/home/u/client-a", "Client A bills in euros."),
        ("/home/u/client_a", "Client underscore A bills in yen."),
    ):
        write_transcript(
            folder(tmp_path, project) / f"s{len(fact)}.jsonl", [("user", f"We decided: {fact}")], cwd=project
        )
    cli("backfill", "--all", "--wait")
    a, b = session_start("/home/u/client-a"), session_start("/home/u/client_a/")
    assert "euros" in a and "yen" not in a
    assert "yen" in b and "euros" not in b
    # A digest named by the old key scheme is never read again, and maintain deletes it.
    stale = config.paths().digests / "-home-u-client-a.md"
    stale.write_text("- Client A bills in euros.\n")
    report = cli_json("maintain")
    assert stale.name in report["digests_removed"] and not stale.exists()
    assert "euros" in session_start("/home/u/client-a")


def test_extractor_output_is_capped_and_the_cut_is_counted():
    raw = {
        "items": [
            {
                "type": "context",
                "content": f"fact {i} " + "x" * 5000,
                "source_line": 1 + i % 3,
                "entities": [{"name": f"e{i}-{j}", "type": "concept"} for j in range(20)],
            }
            for i in range(3000)
        ],
        "relations": [{"from_line": 1, "to_line": 2, "type": "relates_to"}] * 10,
    }
    result = protocol.validate_output(raw, {1, 2, 3})
    items = result.output["items"]
    assert len(items) == 3 * protocol.MAX_ITEMS_PER_MESSAGE
    assert all(len(i["entities"]) <= protocol.MAX_ENTITIES_PER_ITEM for i in items)
    assert all(len(i["content"]) <= protocol.MAX_TEXT_CHARS for i in items)
    assert result.cut >= 3000 - len(items)


def test_a_broken_archive_is_repaired_by_maintain(tmp_path, fake):
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    path = write_transcript(
        folder(tmp_path, "/home/dev/p") / "sess-a.jsonl",
        [("user", "We decided to keep archives valid.")],
        cwd="/home/dev/p",
    )
    cli("backfill", str(path), "--wait")
    age([path])
    cli("maintain")
    [archive] = list(config.paths().archive.iterdir())
    archive.write_bytes(archive.read_bytes()[:20])  # what a crash mid-write used to leave
    (config.paths().archive / ".leftover.tmp").write_bytes(b"x")
    report = cli_json("maintain")
    assert trust.archive_name(str(path)) in report["archives_repaired"]
    assert [p.name for p in config.paths().archive.iterdir()] == [archive.name]
    assert gzip.decompress(archive.read_bytes()) == path.read_bytes()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA bounds the heap on Linux")
def test_archiving_a_runaway_transcript_streams_it_within_a_memory_bound(tmp_path, fake):
    """`maintain` copies a transcript Claude Code will soon delete slice by slice: a runaway file
    (a 1 GB hole with no line end after its first line) is archived under a 400 MB data limit, the
    endless line as `{}`, instead of being read whole into memory (several times its size)."""
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    path = write_transcript(
        folder(tmp_path, "/home/dev/p") / "sess-runaway.jsonl",
        [("user", "We decided to keep runaway transcripts out of memory.")],
        cwd="/home/dev/p",
    )
    cli("backfill", str(path), "--wait")
    first = path.read_bytes()
    os.truncate(path, 1 << 30)
    age([path])
    import resource

    limit = 400 << 20
    done = subprocess.run(
        [sys.executable, "-m", "total_recall", "maintain"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=600,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA, (limit, limit)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [archive] = config.paths().archive.iterdir()
    assert gzip.decompress(archive.read_bytes()) == first + b"{}"


def test_an_archive_streamed_in_slices_keeps_every_line_where_it_was(tmp_path, fake):
    """A transcript longer than one archive slice (maintain.ARCHIVE_SLICE_BYTES) is copied line for
    line: a line forgotten after the first slice is `{}` at its own number, every other line is as
    it was."""
    from total_recall import maintain

    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    project = "/home/dev/p"
    path = write_transcript(
        folder(tmp_path, project) / "sess-long.jsonl",
        [("user", "We decided the long session starts here.")],
        cwd=project,
    )
    filler = json.dumps({"type": "progress", "sessionId": "sess-long", "data": "x" * 60_000}) + "\n"
    with path.open("a") as fh:
        fh.write(filler * (maintain.ARCHIVE_SLICE_BYTES // len(filler) + 20))
    write_transcript(
        path,
        [
            ("user", "We decided the Slicecanary51 key rotates daily."),
            ("user", "We decided to keep Keepline52."),
        ],
        cwd=project,
        append=True,
        start=DAY + timedelta(hours=1),
    )
    cli("backfill", str(path), "--wait")
    [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%Slicecanary51%'")
    cli_json("forget", str(idea_id))
    age([path])
    cli("maintain")
    [archive] = config.paths().archive.iterdir()
    kept, original = gzip.decompress(archive.read_bytes()).split(b"\n"), path.read_bytes().split(b"\n")
    gone = next(i for i, line in enumerate(original) if b"Slicecanary51" in line)
    assert len(b"\n".join(original[:gone])) > maintain.ARCHIVE_SLICE_BYTES  # past the first slice
    assert kept[gone] == b"{}" and b"Slicecanary51" not in b"".join(kept)
    assert kept[:gone] + kept[gone + 1 :] == original[:gone] + original[gone + 1 :]


def test_files_are_private_whatever_the_umask(tmp_path, fake):
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    path = write_transcript(
        folder(tmp_path, "/home/dev/p") / "sess-u.jsonl",
        [("user", "We decided umask never matters.")],
        cwd="/home/dev/p",
    )

    def run(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "total_recall", *args],
            env=env(),
            capture_output=True,
            preexec_fn=lambda: os.umask(0),
            timeout=180,
        )
        assert done.returncode == 0, done.stderr

    run("init")
    run("backfill", str(path), "--wait")
    age([path])
    run("maintain")
    assert config.paths().archive.is_dir() and config.paths().digests.is_dir()
    for p in config.paths().home.rglob("*"):
        mode = p.stat().st_mode & 0o777
        assert mode == (0o700 if p.is_dir() else 0o600), (p, oct(mode))


# === 5. keeping things out of memory ===============================================================


def test_private_parts_are_never_stored_embedded_logged_or_sent(tmp_path, monkeypatch):
    project = "/home/dev/projects/priv"
    session, when = "sess-private", DAY
    use_id = "toolu_private1"
    lines = [
        record(
            "user",
            "Deploy notes <private>Privcanary1 is my home address</private> for the team.",
            session=session,
            cwd=project,
            when=when,
        ),
        record(
            "assistant",
            "Understood; I will not repeat <PRIVATE>Privcanary2</PRIVATE> anywhere.",
            session=session,
            cwd=project,
            when=when + timedelta(seconds=1),
        ),
    ]
    use = record("assistant", "", session=session, cwd=project, when=when + timedelta(seconds=2))
    use["message"]["content"] = [
        {
            "type": "tool_use",
            "id": use_id,
            "name": "Bash",
            "input": {"command": "echo <private>Privcanary3</private>"},
        }
    ]
    result = record("user", "", session=session, cwd=project, when=when + timedelta(seconds=3))
    result["message"]["content"] = [
        {"type": "tool_result", "tool_use_id": use_id, "content": "ok <private>Privcanary4</private> done"}
    ]
    lines += [
        use,
        result,
        record(
            "user",
            "We decided to deploy at noon. <private>Privcanary5 unclosed",
            session=session,
            cwd=project,
            when=when + timedelta(seconds=4),
        ),
    ]
    path = folder(tmp_path, project) / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    # A model that echoes the tag into its summary is cut there too: it never saw the content.
    answer = {
        "topic_update": {"name": "Deploy", "summary": "Deploy notes for the team."},
        "items": [{"type": "decision", "content": "The deploy is at noon.", "source_line": 5}],
    }
    with FakeOpenAIProcess(tmp_path / "fake", {"chat": {"default": {"content": json.dumps(answer)}}}) as fake:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        cli("init")
        assert (
            hook(
                {
                    "session_id": session,
                    "transcript_path": str(path),
                    "cwd": project,
                    "hook_event_name": "SessionEnd",
                }
            ).returncode
            == 0
        )
        daemon = subprocess.run(
            [sys.executable, "-m", "total_recall", "daemon", "--once", "--log-level", "debug"],
            env=env(),
            capture_output=True,
            timeout=180,
        )
        (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
        age([path])
        # maintain runs while the endpoint is up: what it sends is checked too, and it does not
        # spend its retries on a closed port.
        assert cli_json("maintain")["archived"]  # the archive copy has no private part either
        requests = json.dumps(fake.requests())
    assert "chat/completions" in requests and "Deploy notes" in requests
    assert db_rows("SELECT count(*) FROM messages")[0][0] == 5
    for i in range(1, 6):
        needle = f"Privcanary{i}"
        assert needle not in requests, needle
        assert found_in_home(needle) == [], needle
        assert needle.encode() not in daemon.stdout + daemon.stderr, needle


def stamped(path: Path, project: str, turns: list[tuple[str, str, datetime]], append: bool = False) -> None:
    with path.open("a" if append else "w") as fh:
        for role, text, when in turns:
            fh.write(json.dumps(record(role, text, session=path.stem, cwd=project, when=when)) + "\n")


@pytest.mark.parametrize("store", SLOW_ON_POSTGRES, indirect=True)  # PostgreSQL run: 1.8 s
def test_what_is_said_while_paused_is_never_indexed_even_by_a_later_backfill(tmp_path, fake, store):
    project = "/home/dev/projects/pause"
    path = folder(tmp_path, project) / "sess-pause.jsonl"
    path.parent.mkdir(parents=True)
    now = datetime.now(timezone.utc)
    stamped(path, project, [("user", "We decided to log before pausing.", now - timedelta(minutes=5))])
    cli("init")
    assert cli_json("pause", "--for", "2h")["paused"] is True
    stamped(
        path,
        project,
        [
            ("user", "We decided the Pausecanary1 plan is secret.", now + timedelta(minutes=1)),
            ("user", "We decided the Pausecanary2 budget too.", now + timedelta(minutes=2)),
            ("user", "We decided to log after the pause ended.", now + timedelta(hours=3)),
        ],
        append=True,
    )
    assert (
        hook(
            {
                "session_id": "sess-pause",
                "transcript_path": str(path),
                "cwd": project,
                "hook_event_name": "SessionEnd",
            }
        ).returncode
        == 0
    )
    cli("daemon", "--once")
    reasons = [r[0] for r in db_rows("SELECT skip_reason FROM messages ORDER BY source_line")]
    assert reasons[1:3] == ["paused", "paused"]
    # A backfill from scratch reads the file again: the paused lines stay out.

    db_write("DELETE FROM index_state", "DELETE FROM messages")
    cli("backfill", str(path), "--wait")
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    age([path])
    assert cli_json("maintain")["archived"]  # archived without the paused lines
    assert found_in_home("Pausecanary1") == [] and found_in_home("Pausecanary2") == []
    text = search_text("log pausing pause ended")
    assert "before pausing" in text and "after the pause ended" in text


def test_a_response_begun_before_a_pause_keeps_none_of_what_it_said_during_it(tmp_path):
    """Claude Code writes a response over several lines: its thinking before the pause, its words
    after it began. The words said while paused are withheld though the response's first line is
    older, on the first read and on a read from scratch later (I212)."""
    project = "/home/dev/projects/pause"
    path = folder(tmp_path, project) / "sess-split.jsonl"
    path.parent.mkdir(parents=True)
    now = datetime.now(timezone.utc)
    said = {"session": path.stem, "cwd": project}
    thinking = record("assistant", "", when=now - timedelta(minutes=5), msg_id="msg_split", **said)
    thinking["message"]["content"] = [{"type": "thinking", "thinking": "weigh it"}]
    words = record(
        "assistant",
        "We decided the Splitcanary7 merger closes Friday.",
        when=now + timedelta(minutes=1),
        msg_id="msg_split",
        **said,
    )
    stamped(path, project, [("user", "What did we decide about the merger?", now - timedelta(minutes=6))])
    cli("init")
    cli_json("pause", "--for", "2h")
    with path.open("a") as fh:
        fh.write(json.dumps(thinking) + "\n" + json.dumps(words) + "\n")
    cli("backfill", str(path), "--wait")
    assert found_in_home("Splitcanary7") == []
    db_write("DELETE FROM index_state", "DELETE FROM messages")
    cli("backfill", str(path), "--wait")
    assert found_in_home("Splitcanary7") == []
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%merger%'") == [(1,)]  # the question


def test_a_fork_of_a_forgotten_session_does_not_bring_back_its_title(tmp_path):
    """A session's title has no uuid and no time: in a fork of a forgotten session it is forgotten too
    (known by its words), also when the fork goes on with lines of its own (I212)."""
    project = "/home/dev/projects/titled"
    first = folder(tmp_path, project) / "11111111-0000-4000-8000-000000000001.jsonl"
    first.parent.mkdir(parents=True)
    now = datetime.now(timezone.utc) - timedelta(days=1)
    stamped(
        first, project, [("user", "We decided the Titlecanary3 plan.", now), ("assistant", "Noted.", now)]
    )
    with first.open("a") as fh:
        fh.write(
            json.dumps(
                {"type": "custom-title", "customTitle": "Titlecanary3 secret plans", "sessionId": first.stem}
            )
            + "\n"
        )
    cli("backfill", str(first), "--wait")
    cli_json("forget", "--session", first.stem)
    fork = first.with_name("22222222-0000-4000-8000-000000000002.jsonl")
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    fork.write_text("".join(json.dumps(r | {"sessionId": fork.stem}) + "\n" for r in lines))
    stamped(fork, project, [("user", "And now something new about the garden.", now)], append=True)
    cli("backfill", str(fork), "--wait")
    assert found_in_home("Titlecanary3") == []
    assert db_rows("SELECT skip_reason FROM messages ORDER BY source_line")[:3] == [
        ("forgotten",),
        ("forgotten",),
        ("forgotten",),
    ]
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%garden%'") == [(1,)]  # its own line


def test_resume_ends_the_pause(tmp_path, fake, store):
    cli("init")
    cli("pause")
    time.sleep(0.05)
    assert cli_json("resume") == {"paused": False, "ended_ranges": 1}
    [(start, end)] = db_rows("SELECT started_at, ended_at FROM paused_ranges")
    assert start < end <= time.time()
    assert cli("pause", "--for", "soon", check=False).returncode == 1


def test_excluded_projects_are_never_read(tmp_path, fake, store):
    cli("init")
    config.paths().config.write_text('[privacy]\nexclude_projects = ["/home/dev/clients/*"]\n')
    secret = write_transcript(
        folder(tmp_path, "/home/dev/clients/acme") / "sess-acme.jsonl",
        [("user", "We decided the Excludedcanary1 deal is confidential.")],
        cwd="/home/dev/clients/acme",
    )
    mine = write_transcript(
        folder(tmp_path, "/home/dev/mine") / "sess-mine.jsonl",
        [("user", "We decided to write more tests.")],
        cwd="/home/dev/mine",
    )
    for path, cwd in ((secret, "/home/dev/clients/acme"), (mine, "/home/dev/mine")):
        assert (
            hook(
                {
                    "session_id": path.stem,
                    "transcript_path": str(path),
                    "cwd": cwd,
                    "hook_event_name": "SessionEnd",
                }
            ).returncode
            == 0
        )
    cli("daemon", "--once")
    cli("backfill", "--all", "--wait")
    assert {r[0] for r in db_rows("SELECT (SELECT path FROM files WHERE id = file_id) FROM messages")} == {
        str(mine)
    }
    assert found_in_home("Excludedcanary1") == []
    assert ("refused: excluded by /home/dev/clients/*",) in local_rows("SELECT last_error FROM work_queue")


def test_forget_removes_rows_of_every_listed_table_of_conversation_text(tmp_path, fake, store):
    """A table of conversation text that other work adds (search chunks of each line) is covered by
    SOURCE_TABLES: its rows of a forgotten line or scope go, with their full-text entries."""
    from total_recall import curate
    from total_recall import db as dbmod

    project = "/home/dev/projects/chunky"
    path = write_transcript(
        folder(tmp_path, project) / "sess-chunk.jsonl",
        [
            ("user", "We decided the Chunkcanary8 flag stays off."),
            ("user", "We decided to keep the API stable."),
        ],
        cwd=project,
    )
    cli("backfill", str(path), "--wait")
    database = dbmod.open_store(config.load())
    try:
        with database.write():
            database.execute(  # where the recall work already made chunks, these are the same rows
                "INSERT OR IGNORE INTO chunks (file_id, source_line, message_line, seq, session_id, "
                "project, role, kind, timestamp, content) "
                "SELECT file_id, source_line, source_line, 0, session_id, "
                "project, role, kind, timestamp, content FROM messages"
            )
            database.execute(  # the reply's chunk carries the end of the turn before it
                "UPDATE chunks SET context = (SELECT content FROM messages WHERE source_line = 1) "
                "WHERE source_line = 2 AND context = ''"
            )
        [(idea_id,)] = database.execute("SELECT id FROM ideas WHERE content LIKE '%Chunkcanary8%'").fetchall()
        report = curate.forget(database, idea_id)
        assert report["chunks_removed"] >= 1
        left = " ".join(r[0] for r in database.execute("SELECT content FROM chunks"))
        assert "Chunkcanary8" not in left and "keep the API stable" in left
        contexts = " ".join(r[0] for r in database.execute("SELECT context FROM chunks"))
        assert "Chunkcanary8" not in contexts
        report = curate.forget(database, session="sess-chunk")
        assert report["chunks_removed"] >= 1
        assert database.scalar("SELECT count(*) FROM chunks") == 0
    finally:
        database.close()
    assert found_in_home("Chunkcanary8") == []


# SQLite only: about the bytes of the local database file and its WAL while a daemon holds them.
def test_forget_while_the_daemon_runs_leaves_no_byte_in_the_database_wal_or_log(tmp_path, fake):
    from helpers import daemon_process, wait_until_done

    project = "/home/dev/projects/live"
    path = write_transcript(
        folder(tmp_path, project) / "sess-live.jsonl",
        [("user", "We decided the Livecanary3 switch guards the payments."), ("assistant", "Noted.")],
        cwd=project,
    )
    keep = write_transcript(
        folder(tmp_path, project) / "sess-keep.jsonl",
        [("user", "We decided to cache the catalogue for an hour.")],
        cwd=project,
    )
    cli("init")
    with daemon_process(config.paths().log):  # where the service writes it, at debug level
        for p in (path, keep):
            assert (
                hook(
                    {
                        "session_id": p.stem,
                        "transcript_path": str(p),
                        "cwd": project,
                        "hook_event_name": "SessionEnd",
                    }
                ).returncode
                == 0
            )

        wait_until_done(2, timeout=120)
        assert "Livecanary3" in search_text("Livecanary3 switch payments")  # over the warm socket
        assert found_in_home("Livecanary3")
        went = cli_json("forget", "--session", "sess-live")
        assert went["forgotten"] >= 1 and went["wal_checkpointed"] is True
        cli("maintain")
        write_transcript(
            path,
            [("user", "The Livecanary3 switch flips at noon.")],
            cwd=project,
            append=True,
            start=DAY + timedelta(hours=2),
        )
        assert (
            hook(
                {
                    "session_id": "sess-live",
                    "transcript_path": str(path),
                    "cwd": project,
                    "hook_event_name": "SessionEnd",
                }
            ).returncode
            == 0
        )
        wait_until_done(3, timeout=120)
        assert found_in_home("Livecanary3") == []  # database, WAL, digests, log, spool: all of the home
        assert "Livecanary3" not in search_text("Livecanary3 switch payments")
        assert "Livecanary3" not in session_start(project)
        assert "catalogue" in search_text("cache the catalogue")
    assert found_in_home("Livecanary3") == []


def test_a_daemon_without_claude_config_dir_still_reads_the_folder_install_used(tmp_path, fake, monkeypatch):
    from total_recall import install

    claude = tmp_path / "custom-claude"
    (claude / "skills").mkdir(parents=True)
    install.install(claude_dir=claude)
    path = write_transcript(
        claude / "projects" / "-p" / "sess-c.jsonl", [("user", "We decided X.")], cwd="/p"
    )
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))  # what a service would see
    assert trust.refusal(str(path), config.load()) is None
    assert trust.refusal(str(tmp_path / "other" / "s.jsonl"), config.load())


def test_a_memory_also_said_in_another_session_stays_but_stops_citing_the_forgotten_one(
    tmp_path, fake, store
):
    project = "/home/dev/projects/shared"
    fact = "The staging database runs on port 5433."
    first = write_transcript(folder(tmp_path, project) / "sess-a.jsonl", [("user", fact)], cwd=project)
    write_transcript(
        folder(tmp_path, project) / "sess-b.jsonl",
        [("user", fact)],
        cwd=project,
        start=DAY + timedelta(days=1),
    )
    cli("backfill", "--all", "--wait")
    [(idea_id, mentions)] = db_rows("SELECT id, mention_count FROM ideas WHERE content LIKE '%5433%'")
    assert mentions == 2
    cli_json("forget", "--session", "sess-b")
    assert db_rows("SELECT id, mention_count FROM ideas WHERE content LIKE '%5433%'") == [(idea_id, 1)]
    assert db_rows(
        "SELECT (SELECT path FROM files WHERE id = file_id) FROM idea_sources WHERE idea_id = ?", (idea_id,)
    ) == [(str(first),)]


def test_a_forgotten_turn_is_left_quoted_in_no_context(tmp_path, fake, store):
    """A chunk keeps the end of the turn before it as its context, searched by its words. Forgetting
    that turn, by a date or as the memory of a two-word line, leaves no quote of it behind."""
    project = "/home/dev/projects/quotes"
    write_transcript(
        folder(tmp_path, project) / "sess-night.jsonl",
        [
            ("user", "We decided the Midnightcanary vault key rotates every ninety days."),
            ("assistant", "Understood, I will note the rotation schedule in the runbook today."),
        ],
        cwd=project,
        start=datetime(2026, 3, 2, 23, 59, tzinfo=timezone.utc),
        step=timedelta(minutes=2),
    )
    write_transcript(
        folder(tmp_path, project) / "sess-short.jsonl",
        [
            ("user", "Use Shortcanary."),
            ("assistant", "OK, switching the queue library over to it in the worker service now."),
        ],
        cwd=project,
        start=DAY + timedelta(days=5),
    )
    cli("backfill", "--all", "--wait")
    for needle in ("Midnightcanary", "Shortcanary"):  # each reply's chunk quotes the turn before it
        assert db_rows("SELECT count(*) FROM chunks WHERE context LIKE ?", (f"%{needle}%",)) == [(1,)]
    cli_json("forget", "--before", "2026-03-03")
    [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%Shortcanary%'")
    cli_json("forget", str(idea_id))
    for needle in ("Midnightcanary", "Shortcanary"):
        assert db_rows(
            "SELECT count(*) FROM chunks WHERE content LIKE ? OR context LIKE ?", (f"%{needle}%",) * 2
        ) == [(0,)]
        assert needle not in search_text(needle)
    assert "rotation schedule" in search_text("rotation schedule runbook")  # the replies stay
    assert "queue library" in search_text("queue library worker service")


def test_archive_copies_lose_the_lines_forgotten_by_id_or_date_and_maintain_never_restores_them(
    tmp_path, fake, store
):
    """`maintain` keeps a copy of a transcript Claude Code will soon delete. A forget by id or by
    date leaves the copy without those lines (line numbers kept), a record said before the date
    that we never stored included; copying the transcript again later leaves them out too."""
    (tmp_path / "claude" / "settings.json").write_text('{"cleanupPeriodDays": 10}')
    project = "/home/dev/projects/archived"
    by_id = write_transcript(
        folder(tmp_path, project) / "sess-id.jsonl",
        [
            ("user", "We decided the Archidcanary cache lives in Redis for ten minutes."),
            ("user", "We decided to deploy billing on Fridays only before noon."),
        ],
        cwd=project,
        start=DAY + timedelta(days=3),
    )
    by_date = write_transcript(
        folder(tmp_path, project) / "sess-date.jsonl",
        [("user", "We decided the Archdatecanary queue keeps jobs for a week.")],
        cwd=project,
        start=DAY,
    )
    progress = {"type": "progress", "timestamp": "2026-03-02T09:00:30.000Z", "data": "Archprogresscanary"}
    with by_date.open("a") as fh:
        fh.write(json.dumps(progress) + "\n")
    write_transcript(
        by_date,
        [("user", "We decided the nightly export runs at two.")],
        cwd=project,
        start=DAY + timedelta(days=2),
        append=True,
    )
    cli("backfill", "--all", "--wait")
    age([by_id, by_date])
    cli("maintain")

    def copy(path: Path) -> list[str]:
        return gzip.decompress((config.paths().archive / trust.archive_name(str(path))).read_bytes()).decode()

    canaries = ("Archidcanary", "Archdatecanary", "Archprogresscanary")
    assert all(c in copy(by_id) + copy(by_date) for c in canaries)
    [(idea_id,)] = db_rows("SELECT id FROM ideas WHERE content LIKE '%Archidcanary%'")
    went = cli_json("forget", str(idea_id))
    assert went["archives_scrubbed"] == [str(config.paths().archive / trust.archive_name(str(by_id)))]
    cli_json("forget", "--before", "2026-03-03")
    for _ in range(2):  # as forget left them; then copied again from transcripts that changed
        assert copy(by_id).splitlines()[0] == "{}" and "Fridays only before noon" in copy(by_id)
        assert copy(by_date).splitlines()[:2] == ["{}", "{}"] and "nightly export" in copy(by_date)
        assert not [c for c in canaries if c in copy(by_id) + copy(by_date)]
        for path in (by_id, by_date):
            write_transcript(
                path, [("user", "Thanks.")], cwd=project, start=DAY + timedelta(days=4), append=True
            )
        age(list(config.paths().archive.iterdir()), days=30)  # the copies are older than the change
        age([by_id, by_date], days=20)
        assert len(cli_json("maintain")["archived"]) == 2
    assert not [c for c in canaries if found_in_home(c)]


def test_forget_before_a_date_takes_a_line_without_a_time_by_when_it_was_read(tmp_path, fake, store):
    """A line without a time counts as said when it was read (as for pauses): `--before` a day after
    that forgets it with every copy of its words; a day before it does not."""
    project = "/home/dev/projects/untimed"
    now = datetime.now(timezone.utc)
    path = write_transcript(
        folder(tmp_path, project) / "sess-untimed.jsonl",
        [
            ("user", "We decided the Untimedcanary service runs on port 7443 in staging."),
            ("user", "We decided to keep the staging data for one week."),
        ],
        cwd=project,
        start=now - timedelta(days=10),
    )
    lines = path.read_text().splitlines()
    untimed = json.loads(lines[0])
    del untimed["timestamp"]
    path.write_text("\n".join([json.dumps(untimed), *lines[1:]]) + "\n")
    cli("backfill", str(path), "--wait")
    cli_json("forget", "--before", (now - timedelta(days=1)).date().isoformat())
    assert "staging data" not in search_text("staging data for one week")  # said ten days ago
    assert "Untimedcanary" in search_text("Untimedcanary service port")  # read today
    cli_json("forget", "--before", (now + timedelta(days=2)).date().isoformat())
    assert "Untimedcanary" not in search_text("Untimedcanary service port")
    for table, column in (("ideas", "content"), ("messages", "content"), ("chunks", "content")):
        assert db_rows(f"SELECT count(*) FROM {table} WHERE {column} LIKE '%Untimedcanary%'") == [(0,)]


def test_a_session_forgotten_while_its_batch_is_extracted_is_not_stored_afterwards(
    tmp_path, fake, store, monkeypatch
):
    """`forget --session` commits while the indexer waits for the LLM's answer about that session's
    new lines: the batch is written after the forget and must see it, so nothing of it is stored."""
    from fake_openai import FakeOpenAI

    held, asked, release = threading.Event(), threading.Event(), threading.Event()

    def answer(request: dict) -> str:
        if held.is_set():
            asked.set()
            release.wait(60)  # a slow endpoint: the user forgets the session meanwhile
        user = request["messages"][-1]["content"]
        batch = json.loads(user[user.index("{") :])
        items = [
            {"type": "decision", "content": m["content"], "confidence": 0.9, "source_line": m["line"]}
            for m in batch["new_messages"]
        ]
        return json.dumps({"topic_update": None, "new_span": None, "items": items, "relations": []})

    project = "/home/dev/projects/race"
    path = folder(tmp_path, project) / "sess-race.jsonl"
    with FakeOpenAI(chat=answer) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "extractor-test")
        write_transcript(path, [("user", "We decided the retry budget is ten calls.")], cwd=project)
        cli("backfill", str(path), "--wait")
        held.set()
        write_transcript(
            path,
            [("user", "We decided the Racecanary vault key rotates every ninety days.")],
            cwd=project,
            start=DAY + timedelta(hours=1),
            append=True,
        )
        indexing = subprocess.Popen(
            [sys.executable, "-m", "total_recall", "backfill", str(path), "--wait"],
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert asked.wait(120)  # the new line's batch is being extracted
            went = cli_json("forget", "--session", "sess-race")
        finally:
            release.set()
            indexing.wait(180)
    assert went["forgotten"] == 1 and went["sessions_tombstoned"] == ["sess-race"]
    for table in ("ideas", "messages", "chunks"):
        assert db_rows(f"SELECT count(*) FROM {table}") == [(0,)], table
    assert "Racecanary" not in search_text("Racecanary vault key")


def test_forget_scrubs_the_events_and_entities_of_offline_memories_the_llm_replaced(
    tmp_path, fake, store, monkeypatch
):
    """During an LLM outage a batch is extracted offline; once the LLM answers, its offline memories
    are replaced and their `insert`/`replace` events keep the words of the line. Forgetting the
    session scrubs those events and drops entities no memory names, also for a replacement made
    before the event named its lines (tied to its batch by when the batch was done)."""
    from fake_openai import FakeOpenAI

    def answer(request: dict) -> str:
        user = request["messages"][-1]["content"]
        batch = json.loads(user[user.index("{") :])
        items = [
            {"type": "context", "content": f"Said: {m['content']}", "source_line": m["line"]}
            for m in batch["new_messages"]
        ]
        return json.dumps({"topic_update": None, "new_span": None, "items": items, "relations": []})

    project = "/home/dev/projects/replaced"
    with FakeOpenAI(chat=answer) as srv:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "extractor-test")
        srv.queue_chat({"status": 400, "error": "model not loaded"}, {"status": 400, "error": "still not"})
        for session, canary in (("sess-new", "Replacecanary"), ("sess-old", "Legacycanary")):
            path = write_transcript(
                folder(tmp_path, project) / f"{session}.jsonl",
                [("user", f"We decided the {canary} vault key rotates every ninety days.")],
                cwd=project,
            )
            cli("backfill", str(path), "--wait")  # the LLM refuses: extracted offline
        keep = write_transcript(
            folder(tmp_path, project) / "sess-keep.jsonl",
            [("user", "We decided to deploy billing on Fridays.")],
            cwd=project,
            start=DAY + timedelta(days=2),
        )
        cli("backfill", str(keep), "--wait")  # the LLM answers: both batches are extracted again
    for canary in ("Replacecanary", "Legacycanary"):
        assert db_rows(
            "SELECT count(*) FROM memory_events WHERE action = 'replace' AND old LIKE ?", (f"%{canary}%",)
        ) == [(1,)]
    # sess-old's replacement as a store written before the event named its lines left it
    [(event_id, old)] = db_rows("SELECT id, old FROM memory_events WHERE old LIKE '%Legacycanary%vault%'")
    legacy = {k: v for k, v in json.loads(old).items() if k != "sources"}
    db_write(
        ("UPDATE memory_events SET old = ? WHERE id = ?", (json.dumps(legacy), event_id)),
        "INSERT OR IGNORE INTO entities (name, type) VALUES ('Legacycanary', 'concept')",
    )
    cli_json("forget", "--session", "sess-new")
    cli_json("forget", "--session", "sess-old")
    for canary in ("Replacecanary", "Legacycanary"):
        assert db_rows(
            "SELECT count(*) FROM memory_events WHERE old LIKE ? OR new LIKE ?", (f"%{canary}%",) * 2
        ) == [(0,)], canary
        assert db_rows(
            "SELECT count(*) FROM entities WHERE lower(name) LIKE ?", (f"%{canary.lower()}%",)
        ) == [(0,)], canary
    assert "Fridays" in search_text("deploy billing Fridays")


def test_forgetting_the_session_a_memory_was_first_said_in_keeps_it_in_the_words_of_the_other(
    tmp_path, fake, store
):
    """A memory said in sessions A and B is one memory, stored in A's words at A's line. Forgetting
    A leaves it citing B's line only, in B's words (B said one of them in another order), and
    leaves B's line, its words and its search result alone."""
    project = "/home/dev/projects/shared"
    fact, a_words, b_words = (
        "The staging database runs on port 5433.",
        "Redis keeps the Firstwording sessions for a day.",
        "For a day Redis keeps the Firstwording sessions.",
    )
    first = write_transcript(
        folder(tmp_path, project) / "sess-a.jsonl", [("user", fact), ("user", a_words)], cwd=project
    )
    second = write_transcript(
        folder(tmp_path, project) / "sess-b.jsonl",
        [("user", fact), ("user", b_words)],
        cwd=project,
        start=DAY + timedelta(days=1),
    )
    cli("backfill", "--all", "--wait")
    shared = db_rows("SELECT id, content, mention_count FROM ideas ORDER BY id")
    assert [(c, n) for _, c, n in shared] == [(fact, 2), (a_words, 2)]
    went = cli_json("forget", "--session", "sess-a")
    assert went["forgotten"] == 0 and went["sessions_tombstoned"] == ["sess-a"]
    where = "(SELECT path FROM files WHERE id = file_id), source_line"
    assert db_rows(f"SELECT id, content, {where}, session_id, mention_count FROM ideas ORDER BY id") == [
        (shared[0][0], fact, str(second), 1, "sess-b", 1),
        (shared[1][0], b_words, str(second), 2, "sess-b", 1),
    ]
    assert sorted(db_rows(f"SELECT {where} FROM idea_sources")) == [(str(second), 1), (str(second), 2)]
    assert db_rows("SELECT count(*) FROM messages WHERE session_id = 'sess-b'") == [(2,)]
    assert db_rows("SELECT count(*) FROM chunks WHERE session_id = 'sess-b'") == [(2,)]
    assert db_rows("SELECT count(*) FROM tombstones WHERE source_file = ?", (str(second),)) == [(0,)]
    said_so = f"%{a_words[:-1]}%"  # A's wording, which B never used
    for table, column in (("ideas", "content"), ("memory_events", "old"), ("memory_events", "new")):
        assert db_rows(f"SELECT count(*) FROM {table} WHERE {column} LIKE ?", (said_so,)) == [(0,)]
    assert db_rows("SELECT count(*) FROM spans WHERE name LIKE ? OR summary LIKE ?", (said_so,) * 2) == [(0,)]
    hit = cli_json("search", "Redis Firstwording sessions", "--all-projects")[0]
    assert (hit["content"], hit["source_file"], hit["source_line"]) == (b_words, str(second), 2)
    assert str(first) not in search_text("staging database port")


# SQLite only: `recover` works on the local database file, and this reads the home folder's bytes.
def test_the_database_copy_recover_kept_is_deleted_by_the_next_forget(tmp_path, fake):
    """`recover` keeps the damaged database beside the new one; it holds everything the old one held.
    A later forget deletes it (a dry run lists it), so the forgotten text is in no byte of the home."""
    project = "/home/dev/projects/recovered"
    write_transcript(
        folder(tmp_path, project) / "sess-gone.jsonl",
        [("user", "We decided the Recovercanary cache lives in Redis for ten minutes.")],
        cwd=project,
    )
    write_transcript(
        folder(tmp_path, project) / "sess-kept.jsonl",
        [("user", "We decided to deploy billing on Fridays only before noon.")],
        cwd=project,
        start=DAY + timedelta(days=2),
    )
    cli("backfill", "--all", "--wait")
    recovered = cli_json("recover")
    copy = Path(recovered["damaged_copy_kept"])
    assert "forget" in recovered["next"] and b"Recovercanary" in copy.read_bytes()
    cli("daemon", "--once")
    preview = cli_json("forget", "--session", "sess-gone", "--dry-run")
    assert preview["database_copies_removed"] == [str(copy)] and copy.exists()
    went = cli_json("forget", "--session", "sess-gone")
    assert went["database_copies_removed"] == [str(copy)]
    cli("maintain")
    assert found_in_home("Recovercanary") == []
    assert not list(config.paths().home.glob("*damaged*"))
    assert "Fridays" in search_text("deploy billing Fridays")


def test_what_the_extractor_writes_is_redacted_too():
    raw = {
        "topic_update": {"name": "Deploy keys", "summary": "We set DB_PASS=Kx7mQ2vZp9 for staging."},
        "new_span": {
            "name": "hf_QwErTyUiOpAsDfGhJkLzXcVbNmQwErTy rollout",
            "reason": "<private>home</private>",
        },
        "items": [
            {"type": "context", "content": "The key is sk_live_51HqWeRtYuIoPaSdFgHjKlZx.", "source_line": 1}
        ],
    }
    out = protocol.validate_output(raw, {1}).output
    text = json.dumps(out)
    for needle in ("Kx7mQ2vZp9", "hf_QwErTy", "sk_live_51Hq", "home"):
        assert needle not in text, needle
    assert protocol.validate_output(out, {1}).output == out  # still a fixpoint of the validator


def test_an_ordinary_word_used_as_a_value_is_not_hidden_everywhere():
    first, later = redact_batch(['api_key: "production"', "deploy to production on Friday"])
    assert "production" not in first and later == "deploy to production on Friday"


def test_a_memory_that_stays_cites_the_branch_of_the_reply_it_is_still_said_in(tmp_path, fake, store):
    """Forgetting the session a memory was first said in leaves it citing where it is still said:
    here the text line of a reply written after its thinking line, which has no row of its own (the
    reply's row is at its first line): the memory takes that reply's branch, not none."""
    from helpers import record

    project = "/home/dev/projects/branches"
    fact = "The staging database runs on port 5433."
    write_transcript(folder(tmp_path, project) / "sess-a.jsonl", [("user", fact)], cwd=project)
    when = DAY + timedelta(days=1)
    said = [
        record(
            "user",
            "Which port does staging use?",
            session="sess-b",
            cwd=project,
            when=when,
            branch="feature-x",
        ),
        record(
            "assistant", fact, session="sess-b", cwd=project, when=when, msg_id="msg_b", branch="feature-x"
        ),
        record(
            "assistant", fact, session="sess-b", cwd=project, when=when, msg_id="msg_b", branch="feature-x"
        ),
    ]
    said[1]["message"]["content"] = [{"type": "thinking", "thinking": "Look it up.", "signature": "x"}]
    later = folder(tmp_path, project) / "sess-b.jsonl"
    later.write_text("".join(json.dumps(r) + "\n" for r in said))
    cli("backfill", "--all", "--wait")
    [(idea_id, mentions)] = db_rows("SELECT id, mention_count FROM ideas WHERE content LIKE '%5433%'")
    assert mentions == 2
    cli_json("forget", "--session", "sess-a")
    assert db_rows(
        "SELECT (SELECT path FROM files WHERE id = file_id), source_line, session_id, git_branch FROM ideas "
        "WHERE id = ?",
        (idea_id,),
    ) == [(str(later), 3, "sess-b", "feature-x")]


def test_a_secret_hidden_once_is_hidden_where_it_recurs_later_without_its_name(tmp_path):
    """ "The staging password is Kestrel-Moon-5521" is redacted by its name; a later turn, read by a
    later hook, says the value alone ("connect again using Kestrel-Moon-5521") and so does another
    session: both are hidden too, in every row, result and digest. What is kept to know the value
    again is a keyed digest in a 0600 file of the home, never the value."""
    value, other = "Kestrel-Moon-5521", "Glacier-Otter-913"
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-shop"
    first = write_transcript(
        folder / "s1.jsonl",
        [
            ("user", f"The staging db password is {value}. Decided today."),
            ("user", f"The demo password is {other}."),
        ],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(first), "--wait")
    write_transcript(
        first,
        [
            ("user", f"Connect again using {value} please, we decided to keep it."),
            ("assistant", f"Connected with psql (pw:{value})."),
        ],
        cwd="/home/dev/projects/shop",
        append=True,
    )
    cli("backfill", str(first), "--wait")
    second = write_transcript(
        folder / "s2.jsonl",
        [("user", f"We decided to rotate {other} next week.")],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(second), "--wait")
    for table, column in (
        ("messages", "content"),
        ("chunks", "content"),
        ("ideas", "content"),
        ("spans", "name"),
        ("spans", "summary"),
        ("memory_events", "new"),
    ):
        for secret in (value, other):
            assert db_rows(f"SELECT count(*) FROM {table} WHERE {column} LIKE ?", (f"%{secret}%",)) == [(0,)]
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%rotate [REDACTED%'") == [(1,)]
    home = config.paths()
    for path in [home.seen_secrets, *home.digests.glob("*")]:
        assert value.encode() not in path.read_bytes() and other.encode() not in path.read_bytes()
    assert oct(home.seen_secrets.stat().st_mode & 0o777) == "0o600"
    found = cli_json("search", "connect again staging", "--all-projects")
    assert found and not any(value in r["content"] for r in found)


def test_a_value_said_bare_before_it_is_named_a_secret_is_hidden_where_it_was_stored(tmp_path):
    """ "We use Tulip-Gate-8842 for staging" is stored as said (nothing names it a secret); a later read
    says "DB_PASSWORD=Tulip-Gate-8842": the value is then hidden in what the earlier reads stored too
    (rows, windows, memories, topics, their log, entities, the session-start digest) (I216)."""
    value = "Tulip-Gate-8842"
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / "s1.jsonl",
        [("user", f"We decided the staging db uses {value} from now on."), ("assistant", f"Noted: {value}.")],
        cwd="/home/dev/projects/shop",
    )
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{value}%",)) != [(0,)]
    write_transcript(
        path,
        [("user", f"For the record DB_PASSWORD={value} is set.")],
        cwd="/home/dev/projects/shop",
        append=True,
    )
    cli("backfill", str(path), "--wait")
    assert found_in_home(value) == []
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%staging db uses [REDACTED:%'") == [
        (1,)
    ]
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%staging db uses [REDACTED:%'") == [(1,)]


def test_a_session_queued_but_not_indexed_yet_can_be_forgotten_by_its_whole_id(tmp_path):
    """`forget --session` covers "also what is not indexed yet": the whole id of a session whose
    transcript is only queued is taken, and nothing of it is indexed later; a short or mistyped id of
    nothing indexed is still refused (it would forget nothing the user meant)."""
    session = "2323a1b2-0000-4000-8000-00000000abcd"
    path = write_transcript(
        tmp_path / "claude" / "projects" / "-home-dev-projects-shop" / f"{session}.jsonl",
        [("user", "We decided the vault passphrase lives in the team safe.")],
        cwd="/home/dev/projects/shop",
    )
    assert cli_json("backfill", str(path))["queued"] == 1  # queued, not indexed
    assert cli("forget", "--session", session[:8], check=False).returncode != 0
    went = cli_json("forget", "--session", session)
    assert went["sessions_tombstoned"] == [session] and went["forgotten"] == 0
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%passphrase%'") == [(0,)]
    assert db_rows("SELECT count(*) FROM ideas") == [(0,)]
    assert cli_json("search", "vault passphrase", "--all-projects") == []
