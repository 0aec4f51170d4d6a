"""Export and import (`total-recall export` / `import`): a round trip loses nothing, an import merges
with what a home already has, and forgotten memories stay forgotten."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from conftest import isolate
from helpers import cli, cli_json, db_rows, write_transcript

PROJECT = "/home/dev/projects/atlas"
START = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=3)
TURNS = [
    ("user", "We decided to store the atlas data in PostgreSQL 16 with logical replication."),
    ("assistant", "The frontend is built with React and Vite; tests run with Vitest."),
    ("user", "The deploy pipeline pushes Docker images to the GitLab registry on every tag."),
    ("assistant", "We fixed the flaky login test by waiting for the session cookie."),
    ("user", "We switched from nginx to Caddy for TLS instead of certbot."),
    ("user", "TODO: add a migration test for the billing schema."),
]
# What may differ between an export and the export of its import: the fields below, nothing else.
IGNORED = {
    "header": {"exported_at"},  # when each file was written
    "event": {"at"},  # kept on import, but float seconds may round-trip through another store's type
}
# Record ids (`ref`) and references to them (`span`, `parent`, `from`, `to`, `idea`) are local row
# ids; they are compared by the position of the record they point at. Audit rows the import itself
# adds (cause "import") are the import's own history, not the file's.


def _index(tmp_path, name: str, turns, session: str):
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-atlas" / f"{name}.jsonl"
    write_transcript(path, turns, cwd=PROJECT, start=START, session=session)
    cli("backfill", str(path), "--wait")
    return path


def _export(tmp_path, name: str, *args: str) -> list[dict]:
    out = tmp_path / f"{name}.jsonl"
    out.write_text(cli("export", *args).stdout, encoding="utf-8")
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _comparable(records: list[dict]) -> list[dict]:
    """Records with local ids replaced by positions and the IGNORED fields and import rows dropped."""
    position = {}
    for kind in ("span", "idea"):
        refs = [r["ref"] for r in records if r["kind"] == kind]
        position[kind] = {ref: n for n, ref in enumerate(refs)}
    out = []
    for record in records:
        if record["kind"] == "event" and record["cause"] == "import":
            continue
        r = {k: v for k, v in record.items() if k not in IGNORED.get(record["kind"], set())}
        for key, kind in (("ref", r["kind"]), ("span", "span"), ("parent", "span"), ("from", "idea")):
            if key in r and r[key] is not None and kind in position:
                r[key] = position[kind][r[key]]
        for key in ("to", "idea"):
            if r["kind"] in ("relation", "event") and key in r:
                r[key] = position["idea"][r[key]]
        out.append(r)
    return out


def _fresh_home(tmp_path, monkeypatch, name: str, another_store):
    """A second home (and, on PostgreSQL, a second empty store) the test switches to."""
    base = tmp_path / name
    base.mkdir()
    isolate(base, monkeypatch)
    url = another_store()
    if url:
        monkeypatch.setenv("TOTAL_RECALL_STORE_URL", url)
    return base


def test_export_import_export_round_trip_is_equal_apart_from_ids_and_times(
    tmp_path, monkeypatch, another_store
):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    ideas = cli_json("search", "Caddy TLS", "--project", "atlas")
    cli("pin", str(ideas[0]["id"]))
    gitlab = cli_json("search", "GitLab registry Docker images", "--project", "atlas")[0]
    cli("forget", str(gitlab["id"]))
    first = _export(tmp_path, "first", "--vectors")
    kinds = {r["kind"] for r in first}
    assert kinds >= {"header", "span", "idea", "event", "tombstone"}, kinds
    assert any(r["kind"] == "idea" and r["pinned"] for r in first)
    assert not any("GitLab" in json.dumps(r) for r in first)  # forgotten text never leaves

    other = _fresh_home(tmp_path, monkeypatch, "other", another_store)
    imported = cli_json("import", str(tmp_path / "first.jsonl"), cwd=str(other))
    assert imported["ideas_created"] == sum(r["kind"] == "idea" for r in first)
    assert imported["reembedded"] == 0  # same model: the file's vectors are used
    second = _export(tmp_path, "second", "--vectors")
    assert _comparable(second) == _comparable(first)

    # The imported memories are found, pinned and with their file:line, in the new home.
    found = cli_json("search", "which web server for TLS", "--all-projects")
    assert found[0]["content"] == ideas[0]["content"] and found[0]["source_line"] == ideas[0]["source_line"]


def test_an_import_merges_duplicates_and_a_second_import_changes_nothing(
    tmp_path, monkeypatch, another_store
):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    _export(tmp_path, "from-a")
    _fresh_home(tmp_path, monkeypatch, "b", another_store)
    said_again = [("user", "Let's plan the sprint."), ("user", TURNS[0][1])]
    _index(tmp_path / "b", "sess-b", said_again, "sess-b")
    decision = "%PostgreSQL 16 with logical replication%"
    assert db_rows("SELECT mention_count FROM ideas WHERE content LIKE ?", (decision,)) == [(1,)]

    first = cli_json("import", str(tmp_path / "from-a.jsonl"))
    assert first["ideas_merged"] >= 1
    assert db_rows("SELECT mention_count FROM ideas WHERE content LIKE ?", (decision,)) == [(2,)]
    before = db_rows("SELECT id, mention_count, confidence FROM ideas ORDER BY id")
    again = cli_json("import", str(tmp_path / "from-a.jsonl"))
    assert again["ideas_created"] == 0 and again["sources_added"] == 0
    assert db_rows("SELECT id, mention_count, confidence FROM ideas ORDER BY id") == before


def test_an_import_never_recreates_a_forgotten_memory_and_carries_forgetting_over(
    tmp_path, monkeypatch, another_store
):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    _export(tmp_path, "all-of-a")
    caddy = cli_json("search", "Caddy TLS", "--project", "atlas")[0]
    cli("forget", str(caddy["id"]))
    _export(tmp_path, "after-forget")

    _fresh_home(tmp_path, monkeypatch, "b", another_store)
    cli("import", str(tmp_path / "all-of-a.jsonl"))
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%Caddy%'") == [(1,)]
    result = cli_json("import", str(tmp_path / "after-forget.jsonl"))
    assert result["forgotten_here"] == 1  # the tombstone came along and forgot it here too
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%Caddy%'") == [(0,)]
    cli("import", str(tmp_path / "all-of-a.jsonl"))  # the old file cannot bring it back
    assert db_rows("SELECT count(*) FROM ideas WHERE content LIKE '%Caddy%'") == [(0,)]


@pytest.mark.parametrize("how", ["session", "project", "before"])
def test_an_export_from_before_a_scope_forget_brings_back_no_topic_of_it(tmp_path, how):
    """Exported, then the session, the project or everything before a date forgotten here: importing
    the old file recreates no memory of it (the forget's tombstones), and no topic either, whose name
    and summary say the forgotten words."""
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    _export(tmp_path, "before-forget")
    assert db_rows("SELECT count(*) FROM spans") != [(0,)]
    scope = {"session": ["--session", "sess-a"], "project": ["--project", PROJECT]}
    day = (START + timedelta(days=1)).strftime("%Y-%m-%d")
    cli("forget", *scope.get(how, ["--before", day]))
    result = cli_json("import", str(tmp_path / "before-forget.jsonl"))
    assert result["ideas_created"] == 0 and result["spans"] == 0
    assert db_rows("SELECT count(*) FROM spans") == [(0,)]
    assert db_rows("SELECT count(*) FROM ideas") == [(0,)]
    assert cli_json("search", "Caddy TLS certbot", "--all-projects") == []


def test_a_session_forgotten_there_is_forgotten_here_every_line_and_for_good(
    tmp_path, monkeypatch, another_store
):
    """Both homes indexed the session; the first forgot it and exported. Importing the file here
    forgets the whole session (a tool's output too, which no memory came from), and what the session
    says later is not indexed here either (I208)."""
    output = {"type": "tool_result", "tool_use_id": "toolu_x1", "content": "src/link.c: gammaword undefined"}
    turns = [("user", "We decided the linker flags stay in the Makefile."), ("user", [output])]
    _index(tmp_path, "sess-f", turns, "sess-f")
    cli("forget", "--session", "sess-f")
    records = _export(tmp_path, "after-forget")
    scopes = [{k: v for k, v in r.items() if k != "at"} for r in records if r.get("of") == "session"]
    assert scopes == [{"kind": "tombstone", "of": "session", "value": "sess-f"}]

    other = _fresh_home(tmp_path, monkeypatch, "b", another_store)
    path = _index(other, "sess-f", turns, "sess-f")  # this machine's own copy of the session
    assert db_rows("SELECT count(*) FROM messages WHERE content LIKE '%gammaword%'") == [(1,)]
    result = cli_json("import", str(tmp_path / "after-forget.jsonl"))
    assert result["scopes_forgotten_here"] == 2  # the session, and the transcript it was read from there
    assert db_rows("SELECT count(*) FROM messages") == [(0,)]
    assert db_rows("SELECT count(*) FROM chunks") == [(0,)]
    assert cli_json("search", "gammaword undefined", "--all-projects") == []
    write_transcript(
        path, [("user", "Later: the gammaword fix shipped.")], cwd=PROJECT, session="sess-f", append=True
    )
    cli("backfill", str(path), "--wait")
    assert db_rows("SELECT count(*) FROM messages") == [(0,)]
    assert cli_json("import", str(tmp_path / "after-forget.jsonl"))["scopes_forgotten_here"] == 0


def test_an_imported_file_is_redacted_as_what_is_indexed_and_may_leave_out_an_ideas_topic(tmp_path):
    """A file written by hand or by a version that hid fewer secrets: its memories, topics and change
    log are redacted on import, an entity whose name held a secret is left out, and an idea with no
    `span` key is under no topic (it raised KeyError) (I211)."""
    key = "sk-ant-api03-AbCdEfGh1234567890XyZ"
    header = {
        "kind": "header",
        "format": "total-recall-export",
        "version": 1,
        "exported_at": "2026-03-01T00:00:00+00:00",
    }
    idea = {
        "kind": "idea",
        "ref": 1,
        "content": f"We decided DB_PASSWORD=Hunter2-Secret-77 for prod and the key {key}",
        "intent": "decision",
        "confidence": 0.9,
        "project": PROJECT,
        "session_id": "sess-x",
        "sources": [{"file": "/t/x.jsonl", "line": 1}],
        "entities": [{"name": key, "type": "concept"}, {"name": "prod", "type": "concept"}],
    }
    path = tmp_path / "hand-made.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (header, idea)) + "\n", encoding="utf-8")
    cli("init")
    assert cli_json("import", str(path))["ideas_created"] == 1
    [(content,)] = db_rows("SELECT content FROM ideas")
    assert "Hunter2-Secret-77" not in content and key not in content and "[REDACTED:" in content
    assert db_rows("SELECT name FROM entities ORDER BY name") == [("prod",)]


def test_an_export_of_one_project_names_no_forgotten_line_or_transcript_of_another(tmp_path):
    """`export --project` carries the forgets of that project, not the line tombstones and transcript
    paths of another project the user forgot (its folder names it) (I213)."""
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    blog = tmp_path / "claude" / "projects" / "-home-dev-projects-blog" / "sess-b.jsonl"
    write_transcript(blog, [("user", "We decided the blog moves to Hugo.")], cwd="/home/dev/projects/blog")
    cli("backfill", str(blog), "--wait")
    cli("forget", "--session", "sess-b")
    cli("forget", "--project", "/home/dev/projects/blog")
    caddy = cli_json("search", "Caddy TLS", "--project", "atlas")[0]
    cli("forget", str(caddy["id"]))
    text = cli("export", "--project", PROJECT).stdout
    assert "blog" not in text and "sess-b" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(r.get("of") == "line" and "atlas" in r["source_file"] for r in lines)  # its own forget


def test_an_export_of_another_model_is_re_embedded_and_found_by_meaning(tmp_path, monkeypatch, another_store):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    records = _export(tmp_path, "a", "--vectors")
    records[0]["embed_model"] = "some-other-model"
    (tmp_path / "other-model.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    _fresh_home(tmp_path, monkeypatch, "b", another_store)
    result = cli_json("import", str(tmp_path / "other-model.jsonl"))
    assert result["reembedded"] == result["ideas_created"] > 0
    found = cli_json("search", "which web server terminates TLS", "--all-projects")
    assert "Caddy" in found[0]["content"] and "idea_vec" in found[0]["matched_by"]


def test_an_older_export_s_problem_with_a_fix_is_imported_with_its_fix_given(
    tmp_path, monkeypatch, another_store
):
    """An export made before problems had fixes (I186) says answered false for a problem a solution
    answers; imported, the relation in the file gives it its fix, and "unresolved problems" leaves
    it out."""
    _index(
        tmp_path,
        "sess-p",
        [
            ("user", "The deploy fails with a TLS handshake error on the staging box."),
            ("assistant", "Fixed it by renewing the staging certificate with certbot."),
        ],
        "sess-p",
    )
    records = _export(tmp_path, "fixed")
    problem = next(r for r in records if r["kind"] == "idea" and r["intent"] == "problem")
    assert problem["answered"] is True
    problem["answered"] = False  # as an older version wrote it
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    _fresh_home(tmp_path, monkeypatch, "other", another_store)
    cli("import", str(old))
    (answered,) = db_rows("SELECT answered FROM ideas WHERE intent = 'problem'")
    assert answered[0] == 1
    found = cli_json("search", "unresolved problems", "--project", "atlas")
    assert not [r for r in found if r["kind"] == "idea"]


def test_a_bad_file_is_refused_with_its_line_and_changes_nothing(tmp_path, store):
    _index(tmp_path, "sess-a", TURNS, "sess-a")
    records = _export(tmp_path, "a")
    before = db_rows("SELECT id, mention_count FROM ideas ORDER BY id")
    cases = {
        "not-json": ["{broken"],
        "no-header": [json.dumps(records[1])],
        "bad-intent": [json.dumps({**records[-1], "kind": "idea", "ref": 1, "intent": "whim"})],
        "dangling": [json.dumps({"kind": "relation", "from": 10**9, "to": 10**9 + 1, "type": "answers"})],
    }
    for name, tail in cases.items():
        lines = ([] if name == "no-header" else [json.dumps(r) for r in records]) + tail
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        proc = cli("import", str(path), check=False)
        assert proc.returncode == 1 and proc.stderr.startswith("total-recall: error: "), (name, proc.stderr)
        assert "Traceback" not in proc.stderr and str(path) in proc.stderr, proc.stderr
    assert db_rows("SELECT id, mention_count FROM ideas ORDER BY id") == before
    proc = cli("export", "--since", "last week", check=False)
    assert proc.returncode == 1 and "--since takes a date" in proc.stderr
