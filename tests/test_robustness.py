"""Robustness after crashes and bad input, and the rough edges of daily use (issue 15).

Real parts throughout: the CLI, the daemon and the hook run as processes on real SQLite files;
the LLM endpoint is the fake OpenAI server process.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import isolate, use_copy_of
from helpers import (
    cli,
    cli_json,
    daemon_process,
    db_rows,
    local_rows,
    sqlite_connect,
    sqlite_module,
    wait_for,
    write_transcript,
)
from total_recall import config

PROJECT = "/home/dev/projects/robust"
TURNS = [
    ("user", "We decided to use Caddy for TLS termination because it renews certificates itself."),
    ("assistant", "The problem is that the staging deploy fails with a TimeoutError on port 443."),
    ("user", "TODO: add a health check for the reverse proxy before the release."),
    ("assistant", "Fixed by opening port 443 in the staging firewall rules."),
]


def transcript(tmp_path: Path, session: str = "sess-robust", turns=TURNS) -> Path:
    path = tmp_path / "claude" / "projects" / "-home-dev-projects-robust" / f"{session}.jsonl"
    return write_transcript(path, turns, session=session, cwd=PROJECT)


def queue_rows() -> list[tuple]:
    return local_rows("SELECT state, attempts, last_error FROM work_queue ORDER BY id")


def claim_as_a_dead_daemon() -> None:
    """What a daemon killed by SIGKILL leaves behind: rows claimed under a lease of 10 minutes."""
    conn = sqlite_connect(config.paths().db)
    with conn:
        conn.execute("UPDATE work_queue SET state = 'claimed', lease_expires = ?", (time.time() + 600,))
    conn.close()


# --- a restarted daemon does not wait out the dead one's leases -------------------------------


# in-process: test_inprocess.py::test_run_daemon_once_releases_a_dead_workers_claims_under_the_lock
@pytest.mark.slow
def test_daemon_once_releases_the_dead_daemons_claims_at_start(tmp_path, fake):
    path = transcript(tmp_path)
    cli("backfill", str(path))
    claim_as_a_dead_daemon()
    cli("daemon", "--once", timeout=120)
    assert [r[0] for r in queue_rows()] == ["done"]
    assert db_rows("SELECT count(*) FROM messages")[0][0] == len(TURNS)


def test_work_stamped_before_the_clock_stepped_back_is_not_held_for_the_size_of_the_step(
    tmp_path, fake, monkeypatch
):
    """The clock stepped back an hour (NTP, a resumed VM): a hook's record stamped before the step,
    and a failed batch's retry time set before it, are an hour 'in the future'; the daemon must
    not wait that hour to index them."""
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_BATCH_WINDOW", "1")
    spooled, retried = transcript(tmp_path, "stamped-ahead"), transcript(tmp_path, "retry-ahead")
    cli("init")
    ahead = time.time() + 3600
    record = {"transcript_path": str(spooled), "session_id": "stamped-ahead", "cwd": PROJECT}
    record |= {"event": "Stop", "size_seen": spooled.stat().st_size, "enqueued_at": ahead}
    config.paths().spool.write_text(json.dumps(record) + "\n", encoding="utf-8")
    conn = sqlite_connect(config.paths().db)
    with conn:
        conn.execute(
            "INSERT INTO work_queue (transcript_path, session_id, cwd, event, size_seen, enqueued_at, "
            "state, attempts, last_error, not_before) VALUES (?, ?, ?, 'Stop', ?, ?, 'pending', 1, "
            "'TransientError: endpoint down', ?)",
            (str(retried), "retry-ahead", PROJECT, retried.stat().st_size, time.time() - 10, ahead + 10),
        )
    conn.close()
    log = tmp_path / "daemon.log"
    with daemon_process(log) as proc:
        # Only a hang guard: without the fix both rows wait an hour.
        wait_for(lambda: [r[0] for r in queue_rows()] == ["done", "done"] or proc.poll(), timeout=60)
    assert proc.returncode == 0
    for path in (spooled, retried):
        rows = db_rows(
            "SELECT count(*) FROM messages WHERE file_id = (SELECT id FROM files WHERE path = ?)",
            (str(path),),
        )
        assert rows == [(len(TURNS),)]


def test_backfill_wait_releases_stale_claims_under_the_lock(tmp_path, fake):
    first, second = transcript(tmp_path, "sess-a"), transcript(tmp_path, "sess-b")
    cli("backfill", str(first))
    claim_as_a_dead_daemon()
    out = cli_json("backfill", str(second), "--wait", timeout=120)
    assert out["indexed_by"] == "this process"
    assert [r[0] for r in queue_rows()] == ["done", "done"]


# --- one bad character never parks a transcript -----------------------------------------------


def test_lone_surrogates_in_metadata_are_sanitised_and_every_line_indexed(tmp_path, fake):
    path = transcript(tmp_path)
    lines = path.read_text().splitlines()
    for key, i in (("gitBranch", 0), ("cwd", 1), ("sessionId", 2), ("timestamp", 3)):
        rec = json.loads(lines[i])
        rec[key] = rec[key] + "\udc80"
        lines[i] = json.dumps(rec)  # ASCII escapes: the file itself is valid UTF-8
    path.write_text("\n".join(lines) + "\n")
    out = cli_json("backfill", str(path), "--wait", timeout=120)
    assert out["indexed"] == 1 and out["parked"] == 0 and out["pending_with_errors"] == 0, out
    assert [r[0] for r in queue_rows()] == ["done"]
    assert db_rows("SELECT count(*) FROM messages")[0][0] == len(TURNS)


def test_backfill_summary_says_what_really_happened(tmp_path):
    from total_recall import backfill, db, queue

    database = db.connect()
    try:
        files = [str(tmp_path / f"t{i}.jsonl") for i in range(4)]
        for f in files:
            queue.enqueue(database, f)
        now = time.time()
        claims = [queue.claim_next(database, now=now, window=0, lease=60) for _ in files]
        by_path = {c.transcript_path: c for c in claims}
        queue.complete(database, by_path[files[0]])
        queue.fail(
            database,
            by_path[files[1]],
            "UnicodeEncodeError: surrogates not allowed",
            transient=False,
            max_attempts=5,
            now=now,
        )
        queue.fail(
            database, by_path[files[2]], "TranscriptError: broken", transient=False, max_attempts=1, now=now
        )
        queue.release(database, by_path[files[3]])
        out = backfill.outcome(database, files)
    finally:
        database.close()
    assert (out["indexed"], out["pending_with_errors"], out["parked"], out["still_pending"]) == (1, 1, 1, 1)
    states = {p["transcript"]: (p["state"], p["error"]) for p in out["problems"]}
    assert states == {
        files[1]: ("pending", "UnicodeEncodeError: surrogates not allowed"),
        files[2]: ("parked", "TranscriptError: broken"),
    }


# --- stop, restart, uninstall: nothing of ours keeps running ---------------------------------


def processes_of_ours(home: Path) -> list[int]:
    """total_recall processes whose environment points at this test's home folder."""
    needle = f"TOTAL_RECALL_HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in environ and b"total_recall" in cmdline:
            found.append(int(proc.name))
    return found


@pytest.fixture
def no_service_manager(tmp_path, monkeypatch):
    """A user without systemctl/launchctl on PATH (containers, CI): `up` starts a detached daemon."""
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


@needs_proc
def test_up_reports_the_detached_daemon_truthfully_and_stop_ends_it(
    tmp_path, fake, no_service_manager, isolated_home
):
    out = cli_json("up", "--no-backfill", timeout=120)
    daemon = out["daemon"]
    assert daemon["running"] and daemon["managed_by"] == "detached" and daemon["started_now"], out
    assert "by hand" not in json.dumps(out), "the daemon runs; nobody needs to start it by hand"
    assert processes_of_ours(isolated_home) == [daemon["pid"]]
    again = cli_json("up", "--no-backfill", timeout=120)
    assert (again["daemon"]["pid"], again["daemon"]["started_now"]) == (daemon["pid"], False)
    assert cli_json("service", "status")["daemon"] == {
        "running": True,
        "pid": daemon["pid"],
        "managed_by": "detached",
    }
    assert cli_json("status")["pid"] == daemon["pid"]

    stopped = cli_json("stop", timeout=120)
    assert stopped["was_running"] and stopped["pid"] == daemon["pid"] and not stopped["running"]
    assert processes_of_ours(isolated_home) == []
    assert not config.paths().socket.exists()
    assert cli_json("status")["running"] is False
    assert cli_json("stop")["was_running"] is False


@needs_proc
def test_uninstall_after_up_leaves_no_process_of_ours(tmp_path, fake, no_service_manager, isolated_home):
    out = cli_json("up", "--no-backfill", timeout=120)
    assert processes_of_ours(isolated_home) == [out["daemon"]["pid"]]
    cli("uninstall", timeout=120)
    assert processes_of_ours(isolated_home) == []
    assert not config.paths().socket.exists()


@needs_proc
def test_restart_replaces_the_daemon_and_stop_removes_a_dead_daemons_socket(
    tmp_path, fake, no_service_manager, isolated_home
):
    from helpers import start_daemon, wait_for_socket

    proc = start_daemon(tmp_path / "daemon.log")
    wait_for_socket(proc)
    proc.kill()
    proc.wait()
    assert config.paths().socket.exists()  # SIGKILL leaves it behind
    assert cli_json("stop")["removed_socket"] is True
    out = cli_json("restart", timeout=120)
    assert out["daemon"]["running"] and out["daemon"]["started_now"]
    assert processes_of_ours(isolated_home) == [out["daemon"]["pid"]]
    second = cli_json("restart", timeout=120)
    assert second["stopped"]["pid"] == out["daemon"]["pid"]
    assert second["daemon"]["pid"] != out["daemon"]["pid"]
    cli("stop", timeout=120)
    assert processes_of_ours(isolated_home) == []


# --- output: closed pipes and readable times ---------------------------------------------------


@pytest.mark.parametrize(
    "args", [("status",), ("stats",), ("search", "caddy"), ("digest", "robust"), ("status", "--json")]
)
def test_a_closed_pipe_ends_quietly(tmp_path, fake, args):
    import subprocess
    import sys

    from helpers import env

    path = transcript(tmp_path)
    cli("backfill", str(path), "--wait", timeout=120)
    proc = subprocess.Popen(
        [sys.executable, "-m", "total_recall", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    proc.stdout.close()  # the reader is gone before anything is written, as with `| head -0`
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_status_shows_local_times_and_ages():
    from total_recall import report

    now = time.time()
    shown = report.readable_times(
        {"running": True, "pid": 7, "started": now - 185, "last_batch": {"at": now - 7200, "ideas": 3}}, now
    )
    assert shown["started"] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 185)) + " (3 min ago)"
    assert shown["last_batch"]["at"].endswith("(2 h ago)") and shown["last_batch"]["ideas"] == 3
    assert shown["pid"] == 7 and shown["running"] is True


# --- a damaged database: doctor still reports, recover salvages and rebuilds -------------------


LONGER = TURNS + [
    ("user", "We decided to keep Postgres 16 for the billing database because of logical replication."),
    ("assistant", "The problem is that the nightly export job runs out of memory on large invoices."),
    ("assistant", "Fixed by streaming the export in pages of 500 invoices instead of loading them all."),
    ("user", "Should we move the export job to a separate worker next quarter?"),
]


def damage_table(table: str) -> None:
    """Overwrite the root page of `table` with garbage, as a failing disk would."""
    conn = sqlite_connect(config.paths().db)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(config.paths().db, "r+b") as fh:
        fh.seek((root - 1) * size)
        fh.write(b"\xa5" * size)


def ideas_now() -> set[tuple]:
    return set(
        db_rows("SELECT (SELECT path FROM files WHERE id = file_id), source_line, content, intent FROM ideas")
    )


def chunks_with_vectors() -> set[tuple]:
    """(line, window) of every chunk that has a vector: what the meaning side of search can find."""
    return set(db_rows("SELECT source_line, seq FROM chunks c JOIN chunk_embeddings e ON e.chunk_id = c.id"))


def test_damaged_database_doctor_reports_and_recover_rebuilds_everything(tmp_path, fake):
    path = transcript(tmp_path, turns=LONGER)
    cli("backfill", str(path), "--wait", timeout=120)
    before = ideas_now()
    assert before
    embedded = chunks_with_vectors()
    assert len(embedded) >= len(LONGER)
    damage_table("ideas")

    broken = cli("search", "billing database", "--project", PROJECT, check=False)
    assert broken.returncode == 1 and "Traceback" not in broken.stderr, broken.stderr
    assert "total-recall recover" in broken.stderr
    doctor = cli_json("doctor", "--fast")
    assert doctor["database"]["ok"] is False and "recover" in doctor["database"]["fix"]
    assert doctor["llm"]["extractor"] == "offline" and "embedder" in doctor

    out = cli_json("recover", timeout=120)
    assert out["recovered"] and out["transcripts_requeued"] == 1 and out["unreadable_count"] >= 1
    assert Path(out["damaged_copy_kept"]).exists()
    assert cli_json("doctor", "--fast")["database"]["ok"] is True
    cli("daemon", "--once", timeout=120)
    assert ideas_now() == before
    assert db_rows("SELECT count(*) FROM messages")[0][0] == len(LONGER)
    assert chunks_with_vectors() == embedded  # the salvaged lines are found by meaning again
    conn = sqlite_connect(config.paths().db)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    found = cli_json("search", "billing database", "--project", PROJECT)
    assert any("Postgres" in r["content"] for r in found)


def test_unreadable_database_file_doctor_reports_and_recover_rebuilds_from_transcripts(tmp_path, fake):
    path = transcript(tmp_path, turns=LONGER)
    cli("backfill", str(path), "--wait", timeout=120)
    before = ideas_now()
    db_file = config.paths().db
    db_file.write_bytes(b"this is not a database " * 4096)
    doctor = cli("doctor", "--fast", "--json", check=False)
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)["database"]["ok"] is False
    out = cli_json("recover", timeout=120)
    assert out["transcripts_requeued"] == 1  # found under Claude Code's projects folder
    cli("daemon", "--once", timeout=120)
    assert ideas_now() == before


# --- doctor asks the LLM endpoint --------------------------------------------------------------


def test_doctor_probes_the_llm_endpoint(tmp_path, fake, monkeypatch):
    import socket

    monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "fake-model")
    llm = cli_json("doctor", "--fast")["llm"]
    assert (llm["extractor"], llm["endpoint"]["status"]) == ("llm", "ok")

    monkeypatch.setenv("TOTAL_RECALL_LLM_MODEL", "no-such-model")
    llm = cli_json("doctor", "--fast")["llm"]
    assert llm["endpoint"]["status"] == "model missing" and llm["extractor"].startswith("offline")

    fake.write_script({"models_status": 401})
    llm = cli_json("doctor", "--fast")["llm"]
    assert llm["endpoint"]["status"] == "unauthorised" and llm["extractor"].startswith("offline")

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    llm = cli_json("doctor", "--fast")["llm"]
    assert llm["endpoint"]["status"] == "unreachable" and llm["extractor"].startswith("offline")
    assert time.monotonic() - started < 30


# --- the skill name said is the one installed ---------------------------------------------------


def session_start_text() -> str:
    import subprocess
    import sys

    from helpers import REPO, env

    hook = REPO / "hooks" / "session_start.py"
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(hook)],
        input=json.dumps({"cwd": PROJECT}),
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    return done.stdout


@pytest.mark.parametrize("installed", [True, False])
def test_the_skill_name_said_is_the_one_installed(tmp_path, fake, installed):
    if installed:
        cli("install")  # writes the personal skill /remember
    cli("backfill", str(transcript(tmp_path)), "--wait", timeout=120)
    text = session_start_text()
    if installed:
        expected, other = "/remember ", "/total-recall:remember"
    else:
        expected, other = "/total-recall:remember ", "Use /remember"
    assert expected in text and other not in text, text
    from total_recall import install

    assert install.remember_command() == expected.strip()


# --- search scope: --session with short ids, and saying when all projects were searched ---------


SESSION_A = "5f1c2d3e-0000-4000-8000-00000000000a"
SESSION_B = "9a8b7c6d-0000-4000-8000-00000000000b"


@pytest.fixture(scope="module")
def two_sessions_indexed(tmp_path_factory):
    """SESSION_A and SESSION_B backfilled once for the module by the real CLI, with the fake
    server's embeddings (deterministic, so a test's own fake server matches them)."""
    from fake_openai import FakeOpenAIProcess

    base = tmp_path_factory.mktemp("two-sessions")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAIProcess(base / "fake") as srv:
        home = isolate(base, mp)
        mp.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        mp.setenv("TOTAL_RECALL_EMBED_BASE_URL", srv.base_url)
        mp.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        transcript(base, SESSION_A, [("user", "We decided to deploy the API with Docker Compose.")])
        transcript(base, SESSION_B, [("user", "We decided to deploy the API with Kubernetes Helm charts.")])
        cli("backfill", str(base / "claude" / "projects"), "--wait", timeout=120)
    return home


@pytest.fixture
def two_sessions(two_sessions_indexed, isolated_home, fake) -> None:
    """A copy of the module's two indexed sessions (tests never share the files)."""
    use_copy_of(two_sessions_indexed, isolated_home)


def test_search_and_topics_take_the_short_session_id_they_print(two_sessions):
    everything = cli_json("search", "how do we deploy the API", "--project", PROJECT)
    assert {r["session"] for r in everything} == {SESSION_A, SESSION_B}
    for sid in (SESSION_A, SESSION_A[:8]):
        only = cli_json("search", "how do we deploy the API", "--session", sid)
        assert only and {r["session"] for r in only} == {SESSION_A}
        text = cli("search", "how do we deploy the API", "--session", sid).stdout
        assert f"session {SESSION_A[:8]}" in text  # the id printed is the id accepted
    topics = cli_json("topics", SESSION_B[:8])
    assert [t["session"] for t in topics] == [SESSION_B]
    missing = cli("topics", "ffffffff", check=False)
    assert missing.returncode == 1 and "no indexed session" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_search_outside_every_project_says_it_searched_all(two_sessions, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    done = cli("search", "deploy", "--json", cwd=str(outside))
    assert json.loads(done.stdout)
    assert "searched all projects" in done.stderr
    inside = cli("search", "deploy", "--json", "--project", PROJECT)
    assert "searched all projects" not in inside.stderr


def test_hyde_without_an_endpoint_says_so_once(two_sessions):
    done = cli("search", "deploy", "--hyde", "--project", PROJECT)
    assert done.stderr.count("--hyde needs an LLM endpoint") == 1


# --- an edited memory is searchable at once -----------------------------------------------------


def test_an_edited_memory_gets_its_vector_at_once_and_is_found(tmp_path, fake):
    cli("backfill", str(transcript(tmp_path)), "--wait", timeout=120)
    idea = db_rows("SELECT id FROM ideas WHERE content LIKE '%Caddy%'")[0][0]
    out = cli_json(
        "edit", str(idea), "We chose Traefik as the ingress router because it reads Docker labels."
    )
    assert out["embedded"] is True
    assert db_rows("SELECT needs_embedding FROM ideas WHERE id = ?", (idea,)) == [(0,)]
    assert db_rows("SELECT count(*) FROM idea_embeddings WHERE idea_id = ?", (idea,)) == [(1,)]
    found = cli_json("search", "traefik ingress router docker labels", "--project", PROJECT)
    assert found[0]["id"] == idea


# --- every wait has a bound and a log line -------------------------------------------------------


SPOOL_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def test_a_spool_lock_held_forever_does_not_hang_the_daemon(tmp_path, fake):
    import subprocess
    import sys

    from helpers import hook

    path = transcript(tmp_path)
    payload = {
        "session_id": "sess-robust",
        "transcript_path": str(path),
        "cwd": PROJECT,
        "hook_event_name": "SessionEnd",
    }
    assert hook(payload).returncode == 0  # no database yet: the record goes to the spool
    spool = config.paths().spool
    assert spool.exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", SPOOL_HOLDER, str(spool)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        done = cli("daemon", "--once", timeout=60)
        assert time.monotonic() - started < 45
        assert "spool_lock_timeout" in done.stderr + done.stdout
        assert db_rows("SELECT count(*) FROM messages")[0][0] == 0  # not drained, not lost
    finally:
        holder.communicate("go\n", timeout=30)
    cli("daemon", "--once", timeout=120)
    assert db_rows("SELECT count(*) FROM messages")[0][0] == len(TURNS)


@pytest.mark.slow
def test_a_socket_client_that_sends_nothing_is_dropped_after_a_bound(tmp_path, fake):
    import socket

    from helpers import daemon_process
    from total_recall import server

    with daemon_process(tmp_path / "daemon.log", serving=True):
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(str(config.paths().socket))
        silent.settimeout(server.CLIENT_TIMEOUT + 20)
        started = time.monotonic()
        assert silent.recv(100) == b""  # the server closed it
        assert server.CLIENT_TIMEOUT - 1 <= time.monotonic() - started < server.CLIENT_TIMEOUT + 15
        silent.close()
        assert server.ask(config.paths().socket, {"op": "ping"})["ok"]
    assert "socket_client_timeout" in (tmp_path / "daemon.log").read_text()


# --- daemon.file_timeout: bounded, resumable reading --------------------------------------------


def test_an_endless_line_is_scanned_in_bounded_resumable_steps(tmp_path, fake, monkeypatch):
    """A sparse transcript (gigabytes of zeros, no newline) is scanned a slice per turn, never twice."""
    from total_recall import db, indexer

    monkeypatch.setenv("TOTAL_RECALL_DAEMON_FILE_TIMEOUT", "0")
    path = transcript(tmp_path)
    head = path.stat().st_size
    size = head + int(2.5 * indexer.SCAN_SLICE_BYTES)
    os.truncate(path, size)  # a hole: zeros without a newline, as a runaway or sparse file
    database = db.connect()
    try:
        idx = indexer.Indexer(database, config.load())
        scans, deferred = [], []
        for _ in range(10):
            report = idx.process(str(path))
            scans.append(database.scalar("SELECT scan_offset FROM index_state"))
            deferred.append(report.deferred)
            if not report.deferred:
                break
        assert deferred == [True, True, False]
        assert scans[0] > head and scans[0] < scans[1] < scans[2] == size  # resumed, never restarted
        assert database.scalar("SELECT count(*) FROM messages") == len(TURNS)
        assert database.scalar("SELECT byte_offset FROM index_state") == head

        # The endless line ends at last; the line after it is indexed and the scan mark is cleared.
        with path.open("ab") as fh:
            line = path.read_bytes()[:head].splitlines()[0]
            rec = json.loads(line)
            rec["message"]["content"] = "We decided to cap transcript lines at eight megabytes."
            fh.write(b"\n" + json.dumps(rec).encode() + b"\n")
        turns = 1
        while idx.process(str(path)).deferred:  # past the endless line, then the line after it
            turns += 1
            assert turns <= 3
        assert database.scalar("SELECT count(*) FROM messages") == len(TURNS) + 1
        assert database.scalar("SELECT scan_offset FROM index_state") == 0
        assert database.scalar("SELECT byte_offset FROM index_state") == path.stat().st_size
    finally:
        database.close()


def test_file_timeout_defers_a_long_transcript_behind_the_others(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_FILE_TIMEOUT", "0")
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_MAX_BATCH_MESSAGES", "2")
    long = transcript(tmp_path, "sess-long", TURNS * 3)
    cli("backfill", str(long))
    other = transcript(tmp_path, "sess-short", TURNS[:1])
    cli("backfill", str(other))
    done = cli("daemon", "--once", "--log-level", "info", timeout=120)
    log = done.stdout + done.stderr
    assert db_rows("SELECT count(*) FROM messages")[0][0] == len(TURNS) * 3 + 1
    assert [r[0] for r in queue_rows()] == ["done", "done"]
    assert "deferred" in log
    # The short transcript was indexed before the long one was finished.
    assert log.index("sess-short") < log.rindex("sess-long")


def test_recover_steps_over_a_corrupt_page_and_keeps_the_rows_after_it():
    from total_recall import db, recover, salvage

    database = db.connect()
    with database.write():
        database.executemany(
            "INSERT INTO llm_calls (at, extractor, model, messages, prompt_tokens, completion_tokens, ok, "
            "error) "
            "VALUES (?, 'llm', 'm', 1, 1, 1, 1, ?)",
            [(i, "x" * 200) for i in range(5000)],
        )
    database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    database.close()
    conn = sqlite_connect(config.paths().db)
    try:
        leaves = [
            r[0]
            for r in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'llm_calls' AND pagetype = 'leaf' ORDER BY pageno"
            )
        ]
    except sqlite_module().OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(config.paths().db, "r+b") as fh:  # one leaf in the middle of the table
        fh.seek((leaves[len(leaves) // 2] - 1) * size)
        fh.write(b"\xa5" * size)
    assert salvage.check(config.paths().db)["ok"] is False
    out = recover.recover()
    per_leaf = 5000 // len(leaves) + 1
    assert 5000 - 2 * per_leaf <= out["rows_salvaged"]["llm_calls"] < 5000
    assert salvage.check(config.paths().db)["ok"] is True


def test_recover_of_a_store_an_older_version_made_moves_its_pointers_and_copies_no_window_twice(
    tmp_path, fake
):
    """`recover` copies the old rows into a database created empty (which says its pointers are
    current) and reads every transcript again from byte 0. Rows an older indexer left on a reply's
    thinking line move first (I150): read again, the reply's text line would otherwise get its
    windows a second time beside the old ones."""
    from helpers import memory_store
    from test_recall_units import as_an_older_version_left_it, billing_reply
    from total_recall import repoint

    billing_reply(tmp_path / "claude")
    fresh = db_rows("SELECT source_line, message_line, seq, content FROM chunks ORDER BY source_line, seq")
    as_an_older_version_left_it()
    assert cli_json("recover", timeout=120)["recovered"]
    cli("daemon", "--once", timeout=120)
    assert db_rows("SELECT source_line FROM ideas WHERE content LIKE '%RabbitMQ%'") == [(3,)]
    assert (
        db_rows("SELECT source_line, message_line, seq, content FROM chunks ORDER BY source_line, seq")
        == fresh
    )
    with memory_store() as database:
        assert not repoint.pending(database, config.load().machine_name())


def test_recover_extracts_again_no_response_whose_memories_survived_on_its_text_line(tmp_path, fake):
    """A response written over several lines (thinking, text, tool call) keeps its row at its first
    line and its memories on its text's line: `recover` must not take that row for one whose
    memories were all lost, or the response is extracted a second time (with an LLM, a paid call
    and memories worded anew beside the old)."""
    from test_recall_units import transcript as merged_transcript

    merged_transcript(tmp_path / "claude")
    assert db_rows("SELECT source_line FROM ideas WHERE content LIKE '%Redis%'") == [(3,)]
    rows = set(db_rows("SELECT source_line, content_hash FROM messages"))
    out = cli_json("recover", timeout=120)
    assert set(db_rows("SELECT source_line, content_hash FROM messages")) == rows
    assert out["lines_to_extract_again"] == 0
