"""The client half of the search socket: standard library only.

`total-recall search` asks the daemon through these functions and prints its answer before
anything but the standard library is imported (DESIGN.md I58); `server.search` and the web
view use them too. The daemon's side, and the in-process fallback, are in `server`.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from total_recall.errors import TotalRecallError

CONNECT_TIMEOUT = 0.5
ANSWER_TIMEOUT = 60.0


def request(
    text: str,
    *,
    k: int | None,
    project: str | None,
    all_projects: bool,
    hyde: bool,
    session: str | None = None,
    cwd: str | None = None,
    current_session: str | None = None,
) -> dict:
    """The search request as the socket and `in_process` take it."""
    return {
        "op": "search",
        "query": text,
        "k": k,
        "project": project,
        "all_projects": all_projects,
        "cwd": cwd or os.getcwd(),
        "hyde": hyde,
        "session": session,
        "current_session": current_session,
    }


def result(answer: dict) -> dict:
    """{results, notes} of an answer; its error as a TotalRecallError."""
    if answer.get("error"):
        raise TotalRecallError(answer["error"])
    return {"results": answer["results"], "notes": answer.get("notes", [])}


def ask(path: Path, request: dict) -> dict | None:
    """Send one request; None when no daemon listens (the caller then works in-process)."""
    try:
        return exchange(path, request)
    except TimeoutError as exc:
        log_timeout(exc)
        return None  # searched in-process instead


def log_timeout(exc: TimeoutError) -> None:
    _log().warning("daemon_socket_timeout", seconds=ANSWER_TIMEOUT, error=str(exc))


def exchange(path: Path, request: dict) -> dict | None:
    """One request and its answer, standard library only; None when no daemon answers.

    Raises TimeoutError when a daemon accepted the request but did not answer in time (the caller
    logs it, once its logging is configured).
    """
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
    except TimeoutError:
        raise
    except (OSError, ValueError):
        # Trigger: stale socket, daemon stopping, or a broken answer. Why: searching must not
        # depend on the daemon. Outcome: the caller searches in-process with the same code.
        return None
    finally:
        sock.close()


def _log() -> object:
    import structlog

    return structlog.get_logger(__name__)
