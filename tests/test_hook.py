"""The hook shims as Claude Code runs them: real subprocesses, real SQLite, real files."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from total_recall import config, db

HOOKS = config.resource_dir("hooks")
ENQUEUE = HOOKS / "enqueue.py"
SESSION_START = HOOKS / "session_start.py"
SPOOL_KEYS = {"transcript_path", "session_id", "cwd", "event", "size_seen", "enqueued_at"}
# A hook that hangs would stall Claude Code; this only turns a hang into a failure.
HANG_GUARD = 30


def run_hook(hook: Path, payload: bytes | str | dict, *args: str, env: dict | None = None):
    data = json.dumps(payload) if isinstance(payload, dict) else payload
    data = data.encode() if isinstance(data, str) else data
    return subprocess.run(
        [sys.executable, "-I", "-S", str(hook), *args],
        input=data,
        capture_output=True,
        env=env or os.environ.copy(),
        timeout=HANG_GUARD,
    )


def make_db(home: Path) -> Path:
    db.connect(home / "memory.db").close()
    return home / "memory.db"


def queue_rows(path: Path) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM work_queue ORDER BY id")]
    finally:
        conn.close()


def spool_lines(home: Path) -> list[dict]:
    spool = home / "spool.jsonl"
    if not spool.exists():
        return []
    return [json.loads(line) for line in spool.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def transcript(tmp_path) -> Path:
    path = tmp_path / "claude" / "projects" / "-home-u-proj" / "abc.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"type":"user"}\n{"type":"assistant"}\n', encoding="utf-8")
    return path


def stop_payload(transcript: Path, **extra) -> dict:
    return {
        "session_id": "abc",
        "transcript_path": str(transcript),
        "cwd": "/home/u/proj",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        **extra,
    }


# --- enqueue: the database path ------------------------------------------------------------


def test_good_input_enqueues_one_row_and_wakes_daemon(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    done = run_hook(ENQUEUE, stop_payload(transcript))
    assert (done.returncode, done.stdout) == (0, b"")
    rows = queue_rows(dbfile)
    assert len(rows) == 1
    row = rows[0]
    assert row["transcript_path"] == str(transcript)
    assert (row["session_id"], row["cwd"], row["event"], row["state"]) == (
        "abc",
        "/home/u/proj",
        "Stop",
        "pending",
    )
    assert row["size_seen"] == transcript.stat().st_size
    assert row["enqueued_at"] > 0
    assert not (isolated_home / "spool.jsonl").exists()
    assert (isolated_home / "wake").exists()


def test_home_with_uri_characters_uses_the_database(tmp_path, transcript, monkeypatch):
    home = tmp_path / "odd home %3f ? #"
    monkeypatch.setenv("TOTAL_RECALL_HOME", str(home))
    dbfile = make_db(home)
    run_hook(ENQUEUE, stop_payload(transcript))
    assert [r["transcript_path"] for r in queue_rows(dbfile)] == [str(transcript)]
    assert not (home / "spool.jsonl").exists()


def test_hook_leaves_journal_mode_alone(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    run_hook(ENQUEUE, stop_payload(transcript))
    assert sqlite3.connect(dbfile).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_subagent_stop_records_the_subagent_transcript(isolated_home, transcript, tmp_path):
    dbfile = make_db(isolated_home)
    agent = transcript.parent / "agent-def.jsonl"
    agent.write_text("{}\n", encoding="utf-8")
    payload = stop_payload(transcript, hook_event_name="SubagentStop", agent_transcript_path=str(agent))
    run_hook(ENQUEUE, payload)
    [row] = queue_rows(dbfile)
    assert (row["transcript_path"], row["event"], row["size_seen"]) == (str(agent), "SubagentStop", 3)


def test_event_falls_back_to_argument_then_unknown(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    payload = stop_payload(transcript)
    del payload["hook_event_name"]
    run_hook(ENQUEUE, payload, "PreCompact")
    run_hook(ENQUEUE, payload)
    assert [r["event"] for r in queue_rows(dbfile)] == ["PreCompact", "unknown"]


def test_wrong_typed_fields_are_treated_as_missing(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    run_hook(ENQUEUE, stop_payload(transcript, session_id=5, cwd={"a": 1}, hook_event_name=["Stop"]), "Stop")
    [row] = queue_rows(dbfile)
    assert (row["session_id"], row["cwd"], row["event"]) == (None, None, "Stop")


def test_missing_transcript_file_is_recorded_without_size(isolated_home, tmp_path):
    dbfile = make_db(isolated_home)
    run_hook(ENQUEUE, stop_payload(tmp_path / "claude" / "projects" / "-p" / "not-yet.jsonl"))
    [row] = queue_rows(dbfile)
    assert row["size_seen"] is None


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        b'"a string"',
        b'{"transcript_path": null}',
        b'{"transcript_path": 42, "hook_event_name": "Stop"}',
        b'{"transcript_path": ["a.jsonl"]}',
        b'{"transcript_path": ""}',
        b'{"session_id": "abc", "hook_event_name": "Stop"}',
        b'{"transcript_path": "/x.jsonl"',
    ],
)
def test_unusable_input_exits_zero_silently_and_records_nothing(isolated_home, payload):
    dbfile = make_db(isolated_home)
    done = run_hook(ENQUEUE, payload)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert queue_rows(dbfile) == []
    assert spool_lines(isolated_home) == []


def test_huge_garbage_stdin_exits_zero_silently(isolated_home):
    dbfile = make_db(isolated_home)
    done = run_hook(ENQUEUE, b"x" * (8 << 20))
    assert (done.returncode, done.stdout) == (0, b"")
    assert queue_rows(dbfile) == []


def test_huge_hook_input_still_records_its_transcript(isolated_home, transcript):
    """A multi-megabyte last_assistant_message must not lose the event."""
    dbfile = make_db(isolated_home)
    payload = stop_payload(transcript, last_assistant_message="y" * (4 << 20))
    done = run_hook(ENQUEUE, payload)
    assert (done.returncode, done.stdout) == (0, b"")
    [row] = queue_rows(dbfile)
    assert (row["transcript_path"], row["session_id"], row["event"]) == (str(transcript), "abc", "Stop")


@pytest.mark.parametrize(
    "tail",
    [
        b', "last_assistant_message": "caf\xe9 \xff done"}',  # bytes that are not UTF-8
        b', "tool_response": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nested past the parser's depth
        b', "last_assistant_message": "cut off in the midd',  # the payload ends early
    ],
    ids=["invalid-utf8", "deep-nesting", "cut-off"],
)
def test_hook_input_that_does_not_parse_still_records_its_transcript(isolated_home, transcript, tail):
    """The fields Claude Code puts first name the transcript; a fault further on must not lose it."""
    dbfile = make_db(isolated_home)
    head = json.dumps(stop_payload(transcript)).encode()[:-1]
    done = run_hook(ENQUEUE, head + tail)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    [row] = queue_rows(dbfile)
    assert (row["transcript_path"], row["session_id"], row["event"]) == (str(transcript), "abc", "Stop")


# --- enqueue: the spool path ---------------------------------------------------------------


def test_missing_home_goes_to_a_private_spool(isolated_home, transcript):
    assert not isolated_home.exists()
    done = run_hook(ENQUEUE, stop_payload(transcript))
    assert (done.returncode, done.stdout) == (0, b"")
    [line] = spool_lines(isolated_home)
    assert set(line) == SPOOL_KEYS
    assert line["transcript_path"] == str(transcript)
    assert line["size_seen"] == transcript.stat().st_size
    assert stat.S_IMODE(isolated_home.stat().st_mode) == 0o700
    assert stat.S_IMODE((isolated_home / "spool.jsonl").stat().st_mode) == 0o600
    assert not (isolated_home / "memory.db").exists()  # the hook never creates the database


@pytest.mark.parametrize("content", [b"this is not a database", None])
def test_unusable_database_goes_to_the_spool(isolated_home, transcript, content):
    isolated_home.mkdir()
    dbfile = isolated_home / "memory.db"
    if content is None:
        sqlite3.connect(dbfile).close()  # an empty database without the schema
    else:
        dbfile.write_bytes(content)
    done = run_hook(ENQUEUE, stop_payload(transcript))
    assert done.returncode == 0
    assert [line["transcript_path"] for line in spool_lines(isolated_home)] == [str(transcript)]


HOLD_LOCK = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


def test_locked_database_goes_to_the_spool(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(dbfile)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        done = run_hook(ENQUEUE, stop_payload(transcript))
    finally:
        holder.communicate("\n", timeout=HANG_GUARD)
    assert (done.returncode, done.stdout) == (0, b"")
    assert [line["transcript_path"] for line in spool_lines(isolated_home)] == [str(transcript)]
    assert queue_rows(dbfile) == []


def test_fifo_transcript_is_dropped_without_blocking(isolated_home, tmp_path):
    dbfile = make_db(isolated_home)
    fifo = tmp_path / "claude" / "projects" / "-home-u-proj" / "pipe.jsonl"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = run_hook(ENQUEUE, stop_payload(fifo))
    assert done.returncode == 0
    assert queue_rows(dbfile) == []  # only regular files are recorded (issue 12, section 3)
    assert "not a regular file" in (isolated_home / "refused.log").read_text()


ODD_NAMES = [
    "with space/a b.jsonl",
    "new\nline.jsonl",
    "ünï cødé ✓ 会话.jsonl",
    "quote'\"$(x)`.jsonl",
    "pct%3f?#.jsonl",
]


@pytest.mark.parametrize("spool", [False, True], ids=["db", "spool"])
def test_odd_paths_are_recorded_exactly(isolated_home, tmp_path, spool):
    dbfile = None if spool else make_db(isolated_home)
    paths = []
    for name in ODD_NAMES:
        path = tmp_path / "claude" / "projects" / "t" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n", encoding="utf-8")
        paths.append(str(path))
        done = run_hook(ENQUEUE, stop_payload(path, cwd=str(path.parent)))
        assert done.returncode == 0
    records = spool_lines(isolated_home) if spool else queue_rows(dbfile)
    assert [r["transcript_path"] for r in records] == paths
    assert [r["cwd"] for r in records] == [str(Path(p).parent) for p in paths]
    assert all(r["size_seen"] == 3 for r in records)


WRITER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    print("ready", flush=True)
    n = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('writer', ?)", (str(n),))
        time.sleep(0.05)  # hold the write lock long enough for some hooks to give up
        conn.execute("COMMIT")
        n += 1
        time.sleep(0.01)
    """
)


def test_concurrent_hooks_lose_nothing_while_another_process_writes(isolated_home, transcript):
    dbfile = make_db(isolated_home)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(dbfile)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(
                pool.map(
                    lambda i: run_hook(ENQUEUE, stop_payload(transcript, session_id=f"s{i}")), range(200)
                )
            )
    finally:
        writer.kill()
        writer.wait()
    assert [(r.returncode, r.stdout) for r in results] == [(0, b"")] * 200
    recorded = [r["session_id"] for r in queue_rows(dbfile)] + [
        r["session_id"] for r in spool_lines(isolated_home)
    ]
    assert sorted(recorded) == sorted(f"s{i}" for i in range(200))


def test_a_spool_line_cut_short_by_a_full_disk_does_not_swallow_the_next_record(isolated_home, tmp_path):
    """A write cut short (file size limit, full disk) leaves a line without its newline; the next
    hook's record must not be glued to it and dropped with it when the daemon drains the spool."""
    import resource

    from total_recall import queue

    folder = tmp_path / "claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    paths = {name: folder / f"{name}.jsonl" for name in ("before", "cut", "after")}
    for path in paths.values():
        path.write_text('{"type":"user"}\n', encoding="utf-8")
    isolated_home.mkdir()  # no database: every record goes to the spool
    spool = isolated_home / "spool.jsonl"
    assert run_hook(ENQUEUE, stop_payload(paths["before"])).returncode == 0
    room = spool.stat().st_size + 40

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, room))

    cut = subprocess.run(
        [sys.executable, "-I", "-S", str(ENQUEUE)],
        input=json.dumps(stop_payload(paths["cut"])).encode(),
        capture_output=True,
        preexec_fn=limited,
        timeout=HANG_GUARD,
    )
    assert (cut.returncode, cut.stdout) == (0, b"")
    assert spool.stat().st_size == room and not spool.read_bytes().endswith(b"\n")  # a half line
    assert run_hook(ENQUEUE, stop_payload(paths["after"])).returncode == 0

    database = db.connect(isolated_home / "memory.db")
    try:
        queue.drain_spool(database, spool)
    finally:
        database.close()
    queued = [r["transcript_path"] for r in queue_rows(isolated_home / "memory.db")]
    assert queued == [str(paths["before"]), str(paths["after"])]


# --- session_start -------------------------------------------------------------------------


def write_digest(home: Path, project: Path, text: str) -> Path:
    from total_recall import projects

    path = home / "digests" / f"{projects.digest_key(str(project))}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def start_payload(cwd: Path) -> dict:
    return {"session_id": "abc", "cwd": str(cwd), "hook_event_name": "SessionStart", "source": "startup"}


DIGEST = (
    "## Recent decisions\n- use SQLite WAL\n- keep hooks stdlib-only\n## Open todos\n- write the README\n"
)


def test_session_start_prints_the_project_digest(isolated_home, tmp_path):
    project = tmp_path / "my.project_1"
    write_digest(isolated_home, project, DIGEST)
    done = run_hook(SESSION_START, start_payload(project))
    assert done.returncode == 0
    assert done.stdout.decode() == f"<total-recall-context>\n{DIGEST.strip()}\n</total-recall-context>\n"
    assert not (isolated_home / "spool.jsonl").exists()
    assert not (isolated_home / "memory.db").exists()


def test_session_start_falls_back_to_nearest_parent_digest(isolated_home, tmp_path):
    project = tmp_path / "repo"
    write_digest(isolated_home, project, "- parent digest\n")
    write_digest(isolated_home, tmp_path, "- grandparent digest\n")
    done = run_hook(SESSION_START, start_payload(project / "src" / "pkg"))
    assert "- parent digest" in done.stdout.decode()
    assert "grandparent" not in done.stdout.decode()


def test_session_start_respects_the_budget_at_a_line_boundary(isolated_home, tmp_path, monkeypatch):
    project = tmp_path / "p"
    write_digest(isolated_home, project, DIGEST)
    monkeypatch.setenv("TOTAL_RECALL_CONTEXT_BUDGET_CHARS", "45")
    out = run_hook(SESSION_START, start_payload(project)).stdout.decode()
    body = out.removeprefix("<total-recall-context>\n").removesuffix("\n</total-recall-context>\n")
    assert 0 < len(body) <= 45
    assert DIGEST.startswith(body + "\n")


@pytest.mark.parametrize("value", ["0", "false", "off", "OFF"])
def test_session_start_prints_nothing_when_opted_out(isolated_home, tmp_path, monkeypatch, value):
    write_digest(isolated_home, tmp_path, DIGEST)
    monkeypatch.setenv("TOTAL_RECALL_CONTEXT_ENABLED", value)
    done = run_hook(SESSION_START, start_payload(tmp_path))
    assert (done.returncode, done.stdout) == (0, b"")


def test_session_start_honours_config_file_opt_out(isolated_home, tmp_path):
    if sys.version_info < (3, 11):
        pytest.skip("the hook reads config.toml with tomllib (3.11+)")
    write_digest(isolated_home, tmp_path, DIGEST)
    (isolated_home / "config.toml").write_text("[context]\nenabled = false\n", encoding="utf-8")
    assert run_hook(SESSION_START, start_payload(tmp_path)).stdout == b""


@pytest.mark.parametrize("payload", [b"", b"garbage", b"[]", b'{"cwd": 7}'])
def test_session_start_without_digest_prints_nothing(isolated_home, tmp_path, payload):
    done = run_hook(SESSION_START, start_payload(tmp_path / "nothing-here"))
    assert (done.returncode, done.stdout) == (0, b"")
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SESSION_START)],
        input=payload,
        capture_output=True,
        cwd=tmp_path,
        timeout=HANG_GUARD,
    )
    assert (done.returncode, done.stdout) == (0, b"")


def test_session_start_ignores_a_fifo_digest(isolated_home, tmp_path):
    from total_recall import projects

    key = projects.digest_key(str(tmp_path))
    (isolated_home / "digests").mkdir(parents=True)
    os.mkfifo(isolated_home / "digests" / f"{key}.md")
    done = run_hook(SESSION_START, start_payload(tmp_path))
    assert (done.returncode, done.stdout) == (0, b"")


# --- the import rule -----------------------------------------------------------------------


@pytest.mark.parametrize("hook", [ENQUEUE, HOOKS / "enqueue_hook.py", SESSION_START], ids=lambda p: p.name)
def test_hooks_import_only_cheap_stdlib_modules(hook):
    allowed = {
        "enqueue_hook",  # the enqueue shim's own module, next to it (its bytecode is cached)
        "__future__",
        "json",
        "os",
        "sys",
        "time",
        "stat",
        "sqlite3",
        "fcntl",
        "tomllib",
        "hashlib",
        "unicodedata",
    }
    imported = set()
    for node in ast.walk(ast.parse(hook.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= allowed, imported - allowed


def test_extra_roots_in_config_toml_are_honoured_and_commented_ones_are_not(isolated_home, tmp_path):
    from total_recall import bootstrap

    db_path = make_db(isolated_home)
    outside = tmp_path / "mirror" / "p" / "s.jsonl"
    outside.parent.mkdir(parents=True)
    outside.write_text('{"type":"user"}\n', encoding="utf-8")
    config_toml = isolated_home / "config.toml"
    # The file `init` writes names extra_roots only in a comment: the hook refuses the path.
    config_toml.write_text(bootstrap.config_template(), encoding="utf-8")
    assert run_hook(ENQUEUE, stop_payload(outside)).returncode == 0
    assert queue_rows(db_path) == []
    assert "outside the Claude projects folder" in (isolated_home / "refused.log").read_text()
    # Set for real (after the commented example), the same payload is recorded.
    config_toml.write_text(
        bootstrap.config_template().replace("# extra_roots = []", f'extra_roots = ["{tmp_path / "mirror"}"]'),
        encoding="utf-8",
    )
    assert run_hook(ENQUEUE, stop_payload(outside)).returncode == 0
    assert [r["transcript_path"] for r in queue_rows(db_path)] == [str(outside)]
