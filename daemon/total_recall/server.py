"""The daemon's local search socket: one JSON line in, one JSON line out.

A Unix socket in the private home folder, chmod 0600, so only the user can connect. The CLI asks
here first (warm model, no start-up cost) and searches in-process when nobody answers.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import traceback
from pathlib import Path
from typing import Any

import structlog

from total_recall import config
from total_recall.errors import TotalRecallError

log = structlog.get_logger(__name__)

MAX_REQUEST = 1 << 20
CONNECT_TIMEOUT = 0.5
ANSWER_TIMEOUT = 60.0
CLIENT_TIMEOUT = 10.0  # server side: seconds a connected client may take to send or read


def search(
    settings: config.Settings,
    text: str,
    *,
    k: int | None,
    project: str | None,
    all_projects: bool,
    hyde: bool,
    session: str | None = None,
    cwd: str | None = None,
) -> dict:
    """The search transport: ask the daemon over its socket, else search in-process.

    Returns {results, notes}; the caller (the CLI) decides how to show the notes.
    """
    request = {
        "query": text,
        "k": k,
        "project": project,
        "all_projects": all_projects,
        "cwd": cwd or os.getcwd(),
        "hyde": hyde,
        "session": session,
    }
    answer = ask(config.paths().socket, {"op": "search", **request})
    if answer is None:
        answer = in_process(settings, request)
    if answer.get("error"):
        raise TotalRecallError(answer["error"])
    return {"results": answer["results"], "notes": answer.get("notes", [])}


def in_process(settings: config.Settings, request: dict) -> dict:
    """One search request answered by this process (no daemon listening)."""
    from total_recall import db as dbmod
    from total_recall import search as searchmod

    database = dbmod.open_store(settings)
    try:
        return searchmod.run(database, settings, searchmod.local_embedder(settings), request)
    finally:
        database.close()


def ask(path: Path, request: dict) -> dict | None:
    """Send one request; None when no daemon listens (the caller then works in-process)."""
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(str(path))
        sock.settimeout(ANSWER_TIMEOUT)
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        return json.loads(data) if data.strip() else None
    except TimeoutError as exc:
        log.warning("daemon_socket_timeout", seconds=ANSWER_TIMEOUT, error=str(exc))
        return None  # searched in-process instead, as below
    except (OSError, ValueError):
        # Trigger: stale socket, daemon stopping, or a broken answer. Why: searching must not
        # depend on the daemon. Outcome: the caller searches in-process with the same code.
        return None
    finally:
        sock.close()


class _Handler(socketserver.StreamRequestHandler):
    timeout = CLIENT_TIMEOUT  # a client that connects and sends nothing frees its thread

    def handle(self) -> None:
        try:
            line = self.rfile.readline(MAX_REQUEST)
        except OSError as exc:  # socket.timeout included
            log.warning("socket_client_timeout", seconds=self.timeout, error=str(exc))
            return
        try:
            request = json.loads(line)
            answer = self.server.dispatch(request)  # type: ignore[attr-defined]
        except Exception as exc:  # boundary: one bad request never stops the server
            log.warning("socket_request_failed", error=str(exc), traceback=traceback.format_exc(limit=8))
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            self.wfile.write(json.dumps(answer, default=str).encode() + b"\n")
        except OSError as exc:  # the client went away or stopped reading
            log.warning("socket_client_gone", error=str(exc))


class SearchServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, daemon: Any):
        self.daemon_ref = daemon
        self._conn = None
        self._conn_lock = threading.Lock()  # one warm connection, searches take turns
        super().__init__(str(path), _Handler)
        os.chmod(path, 0o600)

    def _db(self):
        """The server's one connection, opened on first use (each request runs in its own thread)."""
        from total_recall import db as dbmod

        if self._conn is None:
            self._conn = dbmod.open_store(self.daemon_ref.settings)
        return self._conn

    def dispatch(self, request: dict) -> dict:
        from total_recall import search as searchmod

        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}
        if op == "search":
            d = self.daemon_ref
            # The daemon's warm embedder; whether vectors are usable is checked by the search on
            # this server's own connection (never the main loop's, which another thread is using).
            try:
                embedder = d.indexer.embedder
            except TotalRecallError:
                embedder = None
            with self._conn_lock:
                return searchmod.run(self._db(), d.settings, embedder, request)
        return {"error": f"unknown op {op!r}"}


def start(daemon: Any) -> SearchServer | None:
    path = daemon.paths.socket
    if len(str(path)) > 100:
        log.warning("socket_path_too_long", path=str(path))
        return None
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    server = SearchServer(path, daemon)
    thread = threading.Thread(target=server.serve_forever, name="search-socket", daemon=True)
    thread.start()
    return server
