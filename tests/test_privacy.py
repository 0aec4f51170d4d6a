"""Privacy (issue 7): private files, a socket only the user can reach, secrets never stored or
sent, and no network at all without an endpoint. Real processes throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from fake_openai import FakeOpenAIProcess
from helpers import (
    cli,
    cli_json,
    daemon_process,
    db_rows,
    env,
    hook,
    wait_for,
    wait_until_done,
    write_transcript,
)
from total_recall import config

PROJECT = "/home/dev/projects/private"
FINISH = 240.0  # only turns a hang into a failure
NOBODY = 65534

TALK = [
    ("user", "We decided to keep the Zanzibar billing exports in the private bucket."),
    ("assistant", "The problem is that the Zanzibar export job retries forever when the bucket is missing."),
]


def project_dir(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "projects" / "-home-dev-projects-private"


@pytest.fixture
def private_home(monkeypatch):
    """A home whose parent others may traverse (tmp_path is 0700, which would hide every mistake)."""
    base = Path(tempfile.mkdtemp(prefix="tr-priv-"))
    os.chmod(base, 0o711)
    home = base / "home"
    monkeypatch.setenv("TOTAL_RECALL_HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_as_nobody(code: str, *args: str) -> subprocess.CompletedProcess | None:
    """Run stdlib-only code as the user nobody; None when no interpreter here is usable by nobody."""

    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    # Our interpreter may live in a folder only its owner can enter; any Python does for a socket.
    for python in dict.fromkeys(
        [sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")]
    ):
        if not python:
            continue
        try:
            return subprocess.run(
                [python, "-I", "-S", "-c", code, *args],
                capture_output=True,
                text=True,
                preexec_fn=drop,
                timeout=60,
                cwd="/",
            )
        except PermissionError:
            continue
    return None


CONNECT = textwrap.dedent(
    """
    import socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(sys.argv[1])
        s.sendall(b'{"op": "ping"}\\n')
        print("connected:", s.recv(1000).decode())
    except OSError as exc:
        print("refused:", type(exc).__name__, exc.errno)
    """
)


def ping(path: Path) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(b'{"op": "ping"}\n')
        return json.loads(s.makefile().readline())


def kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


LOCK_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


def test_every_file_is_private_and_the_socket_refuses_other_users(tmp_path, private_home):
    probe = run_as_nobody("print('ok')") if os.geteuid() == 0 else None
    if probe is None or probe.stdout.strip() != "ok":
        pytest.skip("needs root and an interpreter the user nobody can run")
    cli("init")
    paths = config.paths()
    # The daemon as `total-recall up` starts it where no service manager exists: detached, logging
    # to daemon.log.
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "from total_recall import bootstrap; print(bootstrap.start_background_daemon()['pid'])",
        ],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    pid = int(started.stdout.strip())
    try:
        wait_for(lambda: paths.socket.exists() and paths.status.exists(), timeout=60)
        path = write_transcript(project_dir(tmp_path) / "private-session.jsonl", TALK, cwd=PROJECT)
        payload = {
            "session_id": "private-session",
            "transcript_path": str(path),
            "cwd": PROJECT,
            "hook_event_name": "SessionEnd",
        }
        holder = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, str(paths.db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            assert hook(payload).returncode == 0  # locked: the record goes to the spool
            assert paths.spool.exists()
        finally:
            holder.communicate("go\n", timeout=30)
        wait_until_done(1, timeout=FINISH)
        # The digest is written just after the queue row is marked done.
        wait_for(lambda: any(p.suffix == ".md" for p in private_home.rglob("*")), timeout=30)
        assert ping(paths.socket)["ok"]

        # Nothing in the home folder is open to group or others, whatever its kind.
        found = {}
        for p in [private_home, *private_home.rglob("*")]:
            try:
                found[p] = os.lstat(p).st_mode
            except FileNotFoundError:  # a temporary file (made 0600, config.write_private), renamed meanwhile
                continue
        loose = {str(p): oct(m & 0o777) for p, m in found.items() if m & 0o077}
        assert not loose
        assert stat.S_IMODE(found[private_home]) == 0o700
        for name in (
            "memory.db",
            "memory.db-wal",
            "memory.db-shm",
            "spool.jsonl",
            "daemon.status.json",
            "daemon.log",
            "daemon.lock",
            "config.toml",
        ):
            assert stat.S_IMODE(found[private_home / name]) == 0o600, name
        assert stat.S_ISSOCK(found[paths.socket]) and stat.S_IMODE(found[paths.socket]) == 0o600
        assert any(p.suffix == ".md" for p in found), "a digest was written and checked"

        # Another user cannot reach the socket: not through the 0700 home...
        assert run_as_nobody(CONNECT, str(paths.socket)).stdout.startswith("refused: PermissionError")
        # ...nor when the user opened the home folder up, because the socket itself is 0600.
        os.chmod(private_home, 0o711)
        try:
            assert run_as_nobody(CONNECT, str(paths.socket)).stdout.startswith("refused: PermissionError")
        finally:
            os.chmod(private_home, 0o700)
    finally:
        kill_pid(pid)


# --- secrets ------------------------------------------------------------------------------------

SECRETS = {
    "openai": "sk-proj-Zx9Kq2Lm8Np4Rs6Tv1Wy3Ab5Cd7Ef0Gh2Ij4Kl6Mn",
    "github": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "aws_key": "AKIAZ7QW3ERT5YUI8OPL",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq93TRANQUIL",
    "private_key": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "password": "Tr0ub4dor&3xyzzyPLUGH",
    "shell_password": "hunter2hunter2GOLDFISH",
    "basic_auth": "S3cr3tPa55w0rdMARMOT",
    "service_key": "gsk_" + "Wq7Er2Ty9Ui4Op6As1Df3Gh8" * 2,
    "set_password": "Gr4nite!Falcon",
}

SECRET_TALK = [
    ("user", f"Zanzibar deploys use the key {SECRETS['openai']} for the summariser, please keep it."),
    ("assistant", f"Zanzibar CI pushes with the token {SECRETS['github']} from the release workflow."),
    (
        "user",
        f"Zanzibar backups: aws_access_key_id = {SECRETS['aws_key']} and "
        f"aws_secret_access_key = {SECRETS['aws_secret']} in the backup profile.",
    ),
    (
        "assistant",
        "Zanzibar bastion key, do not lose it:\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"{SECRETS['private_key']}\n{SECRETS['private_key'][::-1]}\n-----END OPENSSH PRIVATE KEY-----",
    ),
    ("user", f"We decided the Zanzibar database config keeps DB_PASSWORD={SECRETS['password']} for now."),
    (
        "assistant",
        f"The Zanzibar smoke test runs mysql --user=app password={SECRETS['shell_password']} -e 'select 1'.",
    ),
    (
        "user",
        f"Zanzibar mirrors from https://deploy:{SECRETS['basic_auth']}@git.example.com/org/repo.git nightly.",
    ),
    (
        "user",
        f"Zanzibar's summariser calls Groq with {SECRETS['service_key']}; I set the admin password to "
        f"{SECRETS['set_password']} on the staging box.",
    ),
]


def leaks(data: bytes) -> list[str]:
    needles = [v for v in SECRETS.values()] + [SECRETS["private_key"][::-1]]
    return [n for n in needles if n.encode() in data]


def test_planted_secrets_reach_neither_storage_nor_logs_nor_endpoints(tmp_path, monkeypatch):
    path = write_transcript(project_dir(tmp_path) / "secret-session.jsonl", SECRET_TALK, cwd=PROJECT)
    fail_fast = {"status": 500, "retry_after": 0}
    answer = {
        "content": json.dumps(
            {"items": [{"type": "decision", "content": "Zanzibar exports stay private.", "source_line": 1}]}
        )
    }
    monkeypatch.setenv("TOTAL_RECALL_DAEMON_MAX_BATCH_MESSAGES", "4")
    with FakeOpenAIProcess(
        tmp_path / "fake", {"chat": {"default": answer, "queue": [fail_fast] * 4}}
    ) as fake:
        monkeypatch.setenv("TOTAL_RECALL_LLM_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_PROVIDER", "openai")
        monkeypatch.setenv("TOTAL_RECALL_EMBED_BASE_URL", fake.base_url)
        monkeypatch.setenv("TOTAL_RECALL_EMBED_MODEL", "fake-embed")
        cli("init")
        log = tmp_path / "daemon.log"
        with daemon_process(log) as proc:  # at debug level: the most it ever logs
            assert (
                hook(
                    {
                        "session_id": "secret-session",
                        "transcript_path": str(path),
                        "cwd": PROJECT,
                        "hook_event_name": "SessionEnd",
                    }
                ).returncode
                == 0
            )
            wait_until_done(1, timeout=FINISH)
            assert cli_json("search", "Zanzibar", "--all-projects")
        requests = fake.requests()
    assert proc.returncode == 0
    # The batch the LLM could not answer went through the offline extractor, the other through the
    # LLM: both stored memories, and the endpoint saw every message, redacted.
    assert db_rows("SELECT count(*) FROM llm_calls WHERE extractor = 'fallback'")[0][0] == 1
    sent = json.dumps(requests)
    assert "Zanzibar" in sent and "[REDACTED:" in sent
    assert any(r["path"].endswith("/embeddings") for r in requests)
    assert not leaks(sent.encode())
    assert db_rows("SELECT count(*) FROM messages") == [(len(SECRET_TALK),)]
    stored = " ".join(c for (c,) in db_rows("SELECT content FROM messages"))
    assert stored.count("[REDACTED:") >= len(SECRETS) - 1  # the two AWS values may share one assignment
    assert "git.example.com" in stored and "deploy:" in stored  # the URL and user are kept
    # Byte for byte: the database (with its WAL and shared memory), digests, status and the log.
    files = [p for p in config.paths().home.rglob("*") if p.is_file()] + [log]
    assert any(p.name == "memory.db" for p in files)
    for file in files:
        assert not leaks(file.read_bytes()), file
    assert len(leaks(path.read_bytes())) == len(SECRETS) + 1  # the needles do exist in the transcript


# --- no network without an endpoint ----------------------------------------------------------------

AUDIT = textwrap.dedent(
    """
    import os, socket, sys

    _LOG = os.environ["NETWORK_AUDIT_LOG"]

    def _record(event, args):
        if event == "socket.connect":
            sock, address = args[0], args[1]
            family = getattr(sock, "family", None)
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                       "socket.sendto", "socket.sendmsg"):
            family, address = None, args[0] if args else None
        else:
            return
        name = getattr(family, "name", str(family))
        with open(_LOG, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\\t{event}\\t{name}\\t{address!r}\\n")

    sys.addaudithook(_record)
    """
)


def test_without_an_endpoint_nothing_touches_the_network(tmp_path, monkeypatch):
    """Index, serve and search with the default settings; every socket event is audited."""
    hooks = tmp_path / "audit"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(AUDIT, encoding="utf-8")
    audit_log = tmp_path / "network.log"
    audit_log.touch()
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    monkeypatch.setenv("NETWORK_AUDIT_LOG", str(audit_log))
    # The audit sees an inet connection when one happens (port 9, discard: refused or not, it is attempted).
    probe = (
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
        "except OSError:\n    pass"
    )
    subprocess.run([sys.executable, "-c", probe], env=env(), timeout=60, check=True)
    assert "socket.connect\tAF_INET\t('127.0.0.1', 9)" in audit_log.read_text()
    audit_log.write_text("")
    path = write_transcript(project_dir(tmp_path) / "offline-session.jsonl", TALK, cwd=PROJECT)
    cli("init", process=True)  # every process of ours runs under the audit hook
    with daemon_process(tmp_path / "daemon.log", serving=True) as proc:
        assert (
            hook(
                {
                    "session_id": "offline-session",
                    "transcript_path": str(path),
                    "cwd": PROJECT,
                    "hook_event_name": "SessionEnd",
                }
            ).returncode
            == 0
        )
        wait_until_done(1, timeout=FINISH)
        found = cli_json("search", "Zanzibar billing exports", "--all-projects", process=True)
        assert any("Zanzibar" in r["content"] for r in found)
    assert proc.returncode == 0
    events = [line.split("\t") for line in audit_log.read_text(encoding="utf-8").splitlines()]
    # The audit hook was live in these processes: the search reached the daemon over its Unix socket.
    assert any(e[1] == "socket.connect" and e[2] == "AF_UNIX" for e in events)
    network = [e for e in events if not (e[1] == "socket.connect" and e[2] == "AF_UNIX")]
    assert network == []


def test_the_local_model_starts_no_telemetry(tmp_path, monkeypatch):
    """onnxruntime's telemetry client, started at its import, works below Python's socket module:
    it writes under the user's ~/.cache and resolves its collector from C. The daemon indexes and
    serves a search with connect(2) traced, and lives past the client's first upload (~9 s)."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    path = write_transcript(project_dir(tmp_path) / "offline-session.jsonl", TALK, cwd=PROJECT)
    cli("init")
    trace = tmp_path / "connect.trace"
    command = [sys.executable, "-m", "total_recall", "daemon"]
    strace = shutil.which("strace")
    if strace:
        command = [strace, "-f", "-qq", "-e", "trace=connect,bind", "-o", str(trace), *command]
    started = time.monotonic()
    with (tmp_path / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(command, env=env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: config.paths().socket.exists(), timeout=60)
        payload = {
            "session_id": "offline-session",
            "transcript_path": str(path),
            "cwd": PROJECT,
            "hook_event_name": "SessionEnd",
        }
        assert hook(payload).returncode == 0
        wait_until_done(1, timeout=FINISH)
        found = cli_json("search", "Zanzibar billing exports", "--all-projects", process=True)
        assert any("Zanzibar" in r["content"] for r in found)
        time.sleep(max(0.0, started + 15 - time.monotonic()))
    finally:
        cli("stop", check=False)
        proc.wait(timeout=60)
    # No device id and no event store (~/.cache/Microsoft/DeveloperTools/.onnxruntime).
    assert sorted(str(p.relative_to(user)) for p in user.rglob("*")) == []
    if strace:
        lines = trace.read_text(encoding="utf-8").splitlines()
        assert any(line.split()[1].startswith("bind(") for line in lines)  # it saw the search socket
        assert [line for line in lines if "connect(" in line and "AF_INET" in line] == []
