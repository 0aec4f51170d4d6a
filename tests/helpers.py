"""Test helpers: write Claude Code-shaped transcripts; run the CLI (in-process or as a process), the hook
and the daemon as processes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "hooks" / "enqueue.py"


def record(
    role: str,
    text: str,
    *,
    session: str,
    cwd: str,
    when: datetime,
    msg_id: str | None = None,
    branch: str = "main",
) -> dict:
    base = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.39",
        "gitBranch": branch,
        "uuid": str(uuid.uuid4()),
        "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
    }
    if role == "user":
        return {**base, "type": "user", "message": {"role": "user", "content": text}}
    return {
        **base,
        "type": "assistant",
        "message": {
            "id": msg_id or f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": None,
        },
    }


def write_transcript(
    path: Path,
    turns: Iterable[tuple[str, str]],
    *,
    session: str | None = None,
    cwd: str = "/home/dev/projects/demo",
    start: datetime | None = None,
    append: bool = False,
    step: timedelta = timedelta(minutes=1),
) -> Path:
    """turns: (role, text) pairs -> one JSONL line each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    session = session or path.stem
    when = start or datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for i, (role, text) in enumerate(turns):
            fh.write(json.dumps(record(role, text, session=session, cwd=cwd, when=when + i * step)) + "\n")
    return path


def git_checkout(path: Path, config: str) -> str:
    """A checkout at `path` whose `.git` holds what `git init` lays out (HEAD, objects/, refs/)
    and this `config` text; its path."""
    git = path / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (git / "config").write_text(config, encoding="utf-8")
    return str(path)


def git_repository(path: Path) -> Path:
    """A real git repository at `path` with no remote and one (empty) commit, as `git worktree add`
    and Claude Code's worktrees need; made without the user's git configuration."""
    git = {"PATH": os.environ.get("PATH", ""), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    git |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=git)
    subprocess.run(
        ["git", "-C", str(path), "commit", "-q", "--allow-empty", "-m", "start"], check=True, env=git
    )
    return path


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONUNBUFFERED"] = "1"
    return e


# Commands that stay real processes even in the default in-process mode: the daemon owns signal
# handlers, an instance lock and its own log stream, and its tests are about the process.
PROCESS_ONLY = frozenset({"daemon"})
# Read once at import: each test's isolation drops TOTAL_RECALL_* variables from its environment.
EVERY_CLI_CALL_A_PROCESS = os.environ.get("TOTAL_RECALL_TEST_CLI") == "process"


def cli(
    *args: str,
    check: bool = True,
    timeout: float = 180,
    cwd: str | None = None,
    process: bool | None = None,
) -> subprocess.CompletedProcess:
    """`total-recall ARGS`: in this test process (`cli.main`, the same code the console script runs,
    with stdout and stderr captured) unless `process` is asked for, the command is the daemon, or
    TOTAL_RECALL_TEST_CLI=process makes every call a real subprocess (to run the whole suite through
    the command line; tests/test_cli_modes.py pins that both answer alike). In-process calls share
    the worker's loaded embedding model: that is most of the fast suite's saving."""
    if process is None:
        process = EVERY_CLI_CALL_A_PROCESS or bool(args[:1] and args[0] in PROCESS_ONLY)
    proc = _cli_process(args, timeout, cwd) if process else _cli_in_process(args, cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"total-recall {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def _cli_process(args, timeout: float, cwd: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "total_recall", *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=timeout,
        cwd=cwd,
    )


def _cli_in_process(args, cwd: str | None) -> subprocess.CompletedProcess:
    import structlog

    from total_recall import cli as cli_module

    out, err = _captured(), _captured()
    logging = structlog.get_config()  # main() configures logging for its run; a process would exit after
    streams = sys.stdin, sys.stdout, sys.stderr
    umask = os.umask(0o022)  # os has no getter: set to read, then put back
    os.umask(umask)
    code: int | str | None
    try:
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
        with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
            try:
                code = cli_module.main(list(args))
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        os.umask(umask)  # main() makes the process's umask private; a process would exit here
        structlog.configure(**logging)
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["total-recall", *args], returncode, _text(out), _text(err))


def _captured() -> io.TextIOWrapper:
    """A text stream with a .buffer, like a captured pipe (never a TTY)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")


def cli_json(*args: str, **kw):
    return json.loads(cli(*args, "--json", **kw).stdout)


def hook(payload: dict | str) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-I", "-S", str(HOOK)],
        input=data,
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )


def start_daemon(log_path: Path) -> subprocess.Popen:
    """`total-recall daemon` as a real process of the test's home, logging at debug level to log_path."""
    fh = log_path.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "total_recall", "daemon", "--log-level", "debug"],
        stdout=fh,
        stderr=fh,
        env=env(),
    )


def stop_daemon(proc: subprocess.Popen, timeout: float = 60.0) -> int:
    """SIGTERM (a clean stop), SIGKILL if that hangs past `timeout`; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@contextlib.contextmanager
def daemon_process(log_path: Path, *, serving: bool = False):
    """A `total-recall daemon` subprocess, stopped with SIGTERM (killed if that hangs) on the way out;
    with serving, entered once its search socket exists. Tests check `proc.returncode` after the block."""
    start = log_path.stat().st_size if log_path.exists() else 0
    proc = start_daemon(log_path)
    try:
        # A SIGTERM that lands while Python is still importing kills the process before its handler is
        # in place (exit -15): the block begins once the daemon says it has started.
        wait_for(lambda: _started(log_path, start, proc), timeout=60)
        if serving:
            wait_for_socket(proc)
        yield proc
    finally:
        stop_daemon(proc)


def _started(log_path: Path, offset: int, proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"the daemon exited with {proc.returncode} before it started")
    with log_path.open("rb") as fh:
        fh.seek(offset)
        return b"daemon_started" in fh.read()


def wait_for_socket(proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    """Until the daemon of the test's home serves its socket (fails at once if proc has exited)."""
    from total_recall import config

    def up() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode} before serving")
        return config.paths().socket.exists()

    wait_for(up, timeout=timeout)


def done_rows() -> int:
    """Queue rows the daemon has finished (state 'done')."""
    return local_rows("SELECT count(*) FROM work_queue WHERE state = 'done'")[0][0]


def wait_until_done(n: int, timeout: float = 120.0) -> None:
    """Until n queue rows are done: the daemon indexed what the hooks queued."""
    wait_for(lambda: done_rows() == n, timeout=timeout)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def sqlite_connect(path, **kwargs):
    """A plain connection to a database file through the SQLite library the app itself uses in this
    process (`db.choose_driver`: sqlean where the stdlib's cannot load sqlite-vec). Two copies of
    SQLite in one process drop each other's POSIX locks when either closes a connection to the same
    file (SQLite's own warning), and the tests run the CLI in this process: a stdlib connection
    closing here once let another process checkpoint under a live connection and lose a commit."""
    return sqlite_module().connect(str(path), **kwargs)


def sqlite_module():
    """The DB-API module of that library (its OperationalError is not the stdlib's)."""
    from total_recall import db

    return db.choose_driver()[1]


@contextlib.contextmanager
def memory_store():
    """The memory store of the test's home, as the app opens it (`db.open_store`): the local file
    (sqlite-vec loaded, never migrated here) or the PostgreSQL store `[store] url` names, whose
    `execute` takes the same SQLite-style SQL (`pg.translate`)."""
    from total_recall import config, db

    settings = config.load()
    if settings.store.url.strip():
        database = db.open_store(settings)
    else:
        database = db.connect(config.paths().db, settings=settings, migrate_to_head=False)
    try:
        yield database
    finally:
        database.close()


def db_rows(sql: str, params=()) -> list[tuple]:
    """Rows of the memory tables (ideas, sources, spans, entities, relations, events, proposals,
    messages, chunks, index_state, ...) of the store in use, as plain tuples that compare equal
    across stores. The work queue is local: `local_rows`."""
    with memory_store() as database:
        return [tuple(row) for row in database.execute(sql, params).fetchall()]


def db_write(*statements: str | tuple[str, tuple]) -> None:
    """Run these statements (SQL, or (SQL, params)) in one transaction of the store in use."""
    with memory_store() as database, database.write():
        for statement in statements:
            sql, params = statement if isinstance(statement, tuple) else (statement, ())
            database.execute(sql, params)


def local_rows(sql: str, params=()) -> list[tuple]:
    """Read the test home's local database file (the work queue, whatever the store)."""
    from total_recall import config, db

    conn = db.connect(config.paths().db, migrate_to_head=False)
    try:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def fts_ids(table: str, word: str) -> list[int]:
    """Ids of the rows of `table` (ideas, spans or chunks; every row, sessions too) whose
    full-text index matches `word`: its FTS5 table on SQLite, its generated tsvector on PostgreSQL."""
    with memory_store() as database:
        if database.dialect == "postgres":
            sql = f"SELECT id FROM {table} WHERE fts @@ plainto_tsquery('english', ?) ORDER BY id"
        else:
            sql = f"SELECT rowid FROM {table}_fts WHERE {table}_fts MATCH ? ORDER BY rowid"
        return [row[0] for row in database.execute(sql, (word,)).fetchall()]


def stored_vectors(owner: str, ids: list[int]) -> dict[int, bytes]:
    """The stored vectors of these ideas/spans/chunks ('ideas', ...) by id, as float32 blobs,
    through `vectors.vectors_of` (vec0 on SQLite, pgvector on PostgreSQL)."""
    from total_recall import vectors

    with memory_store() as database:
        return vectors.vectors_of(database, owner, ids)


# An AskUserQuestion question as Claude Code records it (in the call's input and again in the answer's
# `toolUseResult`): the picked option's label is all its answer names; its description says what it means.
ASKED_TOOLS = {
    "question": "Which tools should we set up?",
    "header": "Tools",
    "options": [
        {"label": "All four (Recommended)", "description": "Credo + Dialyxir + mix_audit + Sobelow"},
        {"label": "Credo + Dialyxir + mix_audit", "description": "Skip Sobelow (Phoenix security scanner)"},
    ],
    "multiSelect": False,
}
