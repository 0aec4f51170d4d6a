"""A small OpenAI-compatible HTTP server for tests (standard library only).

Serves ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models`` on
127.0.0.1 at an ephemeral port. Two ways to use it:

In-process::

    with FakeOpenAI() as srv:
        srv.queue_chat({"status": 500}, {"content": '{"ideas": []}'})
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        ...
        assert srv.requests[0]["json"]["model"] == "m"

As a separate process (for tests that run the daemon as a real subprocess)::

    python tests/fake_openai.py --port-file PORT --script SCRIPT.json --log REQUESTS.jsonl

or, from a test, ``with FakeOpenAIProcess(tmp_path, script={...}) as srv:`` which starts that
process and offers ``srv.base_url``, ``srv.write_script(...)`` and ``srv.requests()``.

Behaviour
---------
Each request to an endpoint takes the next *action* from that endpoint's queue; when the queue is
empty it uses the endpoint's default. Requests are recorded (``srv.requests`` in-process, one JSON
line per request in the ``--log`` file) BEFORE the action runs, so even a request that is answered
with a dropped connection is visible. An action is a dict; every key is optional and they combine:

    content        assistant message content (chat); default "OK"
    usage          {"prompt_tokens", "completion_tokens", "total_tokens"}; default: chars/4 estimates
    finish_reason  default "stop"
    embeddings     explicit list of vectors (embeddings); default: the hashed vectors below
    hang           seconds to wait before doing anything else (the client may time out meanwhile)
    trickle        seconds between the body's bytes, sent one at a time after the headers (a server
                   that keeps a slow answer alive: every read returns within the client's timeout)
    close          true: drop the connection without sending a response
    status         HTTP status; for status >= 400 the body is an OpenAI-style error object
    error          message for that error object
    retry_after    value of a Retry-After header (use with status 429)
    headers        extra response headers
    body           send this text verbatim instead of the normal JSON (non-JSON responses)
    content_type   Content-Type for ``body``; default "text/plain"
    truncate       true: send only the first half of the normal JSON body (Content-Length matches
                   the bytes sent, so the client sees a complete but unparseable body)
    reject_response_format  true: answer 400 the way servers without JSON mode do
    ragged         true (embeddings): the last vector of the answer is one component short
    non_finite     true (embeddings): every vector's first component is NaN
    no_index       true (embeddings): the data entries carry no "index" (some servers omit it)

A chat default may also be a callable ``f(request_json) -> str | dict`` (a str is the content).

``reject_response_format`` may also be set server-wide (``srv.reject_response_format = True`` or
the script key): then every chat request carrying ``response_format`` gets the 400 without using up
a queued action, and requests without it are served normally. ``reject_style`` picks the error
body: "lmstudio" (default, ``{"error": "'response_format.type' must be 'json_schema'"}``) or
"vllm" (``{"object": "error", "message": ..., "type": "BadRequestError", "code": 400}``).

Default embeddings: for each input text, take the set of its lowercased words (``\\w+``); give each
distinct word a fixed pseudo-random vector of dimension ``dim`` (default 8) from SHA-256 of the
word; sum them and L2-normalise. So equal texts (and texts with equal word sets) get equal vectors,
texts sharing words have overlapping vectors, and a text with no words gets the unit vector e0.
``fake_embedding(text, dim)`` computes the same vector for assertions. Both ``encoding_format``
"float" and "base64" (the openai client's default) are honoured.

Script file (subprocess mode), re-read on every request so a test can change behaviour mid-run::

    {"chat": {"queue": [action, ...], "default": action},
     "embeddings": {"queue": [...], "default": action, "dim": 8},
     "models": ["fake-model"],
     "reject_response_format": false, "reject_style": "lmstudio"}

Queued actions in the file are consumed in order; rewriting the file with different content starts
consumption again from the first queued action of the new content.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
MODELS = "/v1/models"
DEFAULT_DIM = 8
ChatHandler = Callable[[dict], "str | dict"]


# ---------------------------------------------------------------------------------------------
# Deterministic embeddings


def _word_vector(word: str, dim: int) -> list[float]:
    raw = b""
    counter = 0
    while len(raw) < 2 * dim:
        raw += hashlib.sha256(f"{counter}:{word}".encode()).digest()
        counter += 1
    return [v / 32768.0 for v in struct.unpack(f"<{dim}h", raw[: 2 * dim])]


def fake_embedding(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The vector the fake server returns for ``text`` (see the module docstring)."""
    words = sorted(set(re.findall(r"\w+", text.lower())))
    total = [0.0] * dim
    for word in words:
        total = [a + b for a, b in zip(total, _word_vector(word, dim))]
    norm = math.sqrt(sum(v * v for v in total))
    if not words or norm == 0.0:
        return [1.0] + [0.0] * (dim - 1)
    return [v / norm for v in total]


# ---------------------------------------------------------------------------------------------
# Behaviour sources: in-memory (in-process use) and a JSON file (subprocess use)


class _MemoryScript:
    def __init__(self, chat: str | dict | ChatHandler, dim: int) -> None:
        self.lock = threading.Lock()
        self.queues: dict[str, deque] = {CHAT: deque(), EMBEDDINGS: deque()}
        self.defaults: dict[str, Any] = {CHAT: chat, EMBEDDINGS: {}}
        self.options: dict[str, Any] = {
            "dim": dim,
            "models": ["fake-model"],
            "reject_response_format": False,
            "reject_style": "lmstudio",
            "models_status": 0,
        }

    def option(self, name: str) -> Any:
        return self.options[name]

    def next_action(self, path: str) -> Any:
        with self.lock:
            queue = self.queues[path]
            return queue.popleft() if queue else self.defaults[path]


class _FileScript:
    """Reads the script file on every request; remembers how much of each queue was used."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.last_text: str | None = None
        self.used: dict[str, int] = {}

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = "{}"
        if text != self.last_text:
            # Trigger: the test rewrote the script. Why: its queue is a new plan.
            # Outcome: consumption restarts at the new queue's first action.
            self.last_text, self.used = text, {}
        return json.loads(text or "{}")

    def option(self, name: str) -> Any:
        with self.lock:
            script = self._load()
        if name == "dim":
            return int(script.get("embeddings", {}).get("dim", DEFAULT_DIM))
        fallback = {
            "models": ["fake-model"],
            "reject_response_format": False,
            "reject_style": "lmstudio",
            "models_status": 0,
        }
        return script.get(name, fallback[name])

    def next_action(self, path: str) -> Any:
        key = "chat" if path == CHAT else "embeddings"
        with self.lock:
            section = self._load().get(key, {})
            queue = section.get("queue", [])
            used = self.used.get(key, 0)
            if used < len(queue):
                self.used[key] = used + 1
                return queue[used]
        return section.get("default", {})


# ---------------------------------------------------------------------------------------------
# Response bodies


def _estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4) if value else 0


def _chat_body(request: dict, action: dict, serial: int) -> dict:
    content = action.get("content", "OK")
    prompt = _estimate_tokens(request.get("messages"))
    completion = max(1, len(content) // 4)
    usage = action.get("usage") or {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": action.get("finish_reason", "stop"),
            }
        ],
        "usage": usage,
    }


def _inputs(request: dict) -> list[str]:
    raw = request.get("input", [])
    if isinstance(raw, str):
        return [raw]
    if raw and all(isinstance(t, int) for t in raw):
        return [json.dumps(raw)]  # one token array
    return [t if isinstance(t, str) else json.dumps(t) for t in raw]


def _encode_vector(vector: list[float], encoding: str) -> Any:
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector


def _embedding_body(request: dict, action: dict, dim: int) -> dict:
    texts = _inputs(request)
    vectors = action.get("embeddings") or [fake_embedding(t, dim) for t in texts]
    if action.get("non_finite"):
        vectors = [[math.nan, *v[1:]] for v in vectors]
    if action.get("ragged") and vectors:
        vectors = [*vectors[:-1], vectors[-1][:-1]]
    encoding = request.get("encoding_format") or "float"
    tokens = sum(max(1, len(t) // 4) for t in texts)
    return {
        "object": "list",
        "model": request.get("model", "fake-model"),
        "data": [
            {"object": "embedding", "embedding": _encode_vector(v, encoding)}
            | ({} if action.get("no_index") else {"index": i})
            for i, v in enumerate(vectors)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _error_body(status: int, message: str | None) -> dict:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }
    kind = kinds.get(status, "server_error")
    message = message or f"fake error {status}"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _rejection_body(style: str) -> dict:
    message = "'response_format.type' must be 'json_schema'"
    if style == "vllm":
        return {
            "object": "error",
            "message": f"response_format is not supported: {message}",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    return {"error": message}


# ---------------------------------------------------------------------------------------------
# HTTP


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep pytest output clean; the request log is the record

    def do_GET(self) -> None:
        self.server.fake.record(self, None, b"")
        if self.path.rstrip("/") != MODELS:
            return self._send_json(404, _error_body(404, f"no route {self.path}"))
        status = self.server.fake.script.option("models_status")  # e.g. 401: a wrong key
        if status:
            return self._send_json(int(status), _error_body(int(status), "scripted models error"))
        models = self.server.fake.script.option("models")
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.server.fake.record(self, body, raw)
        path = self.path.rstrip("/")
        if path not in (CHAT, EMBEDDINGS):
            return self._send_json(404, _error_body(404, f"no route {self.path}"))
        self._act(path, body if isinstance(body, dict) else {}, self.server.fake.choose(path, body or {}))

    def _act(self, path: str, request: dict, action: dict) -> None:
        fake = self.server.fake
        if action.get("hang") and fake.stopping.wait(float(action["hang"])):
            self.close_connection = True
            return  # server shutting down: give up on the hung request
        if action.get("close"):
            self.close_connection = True
            return  # no bytes at all: the client sees the connection drop
        headers = dict(action.get("headers") or {})
        if "retry_after" in action:
            headers["Retry-After"] = str(action["retry_after"])
        status = int(action.get("status", 200))
        if "body" in action:
            data = str(action["body"]).encode()
            return self._send(status, data, action.get("content_type", "text/plain"), headers)
        if action.get("reject_response_format"):
            status, payload = 400, _rejection_body(fake.script.option("reject_style"))
        elif status >= 400:
            payload = _error_body(status, action.get("error"))
        elif path == CHAT:
            payload = _chat_body(request, action, fake.serial())
        else:
            payload = _embedding_body(request, action, fake.script.option("dim"))
        data = json.dumps(payload).encode()
        if action.get("truncate"):
            data = data[: len(data) // 2]
        self._send(status, data, "application/json", headers, trickle=float(action.get("trickle") or 0))

    def _send_json(self, status: int, payload: dict) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", {})

    def _send(self, status: int, data: bytes, content_type: str, headers: dict, trickle: float = 0) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.end_headers()
            if not trickle:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if self.server.fake.stopping.wait(trickle):
                    self.close_connection = True
                    return  # server shutting down
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (timeout); nothing to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: _Core

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # clients that time out and hang up are expected here
        super().handle_error(request, client_address)


class _Core:
    """State shared by both modes: the behaviour source, the request record, the server."""

    def __init__(self, script: Any, log_path: Path | None, port: int = 0) -> None:
        self.script = script
        self.log_path = log_path
        self.requests: list[dict] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._serial = 0
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.fake = self
        self.port = self.httpd.server_address[1]

    def serial(self) -> int:
        with self._lock:
            self._serial += 1
            return self._serial

    def record(self, handler: BaseHTTPRequestHandler, body: Any, raw: bytes) -> None:
        entry = {
            "method": handler.command,
            "path": handler.path,
            "headers": {k.lower(): v for k, v in handler.headers.items()},
            "json": body,
            "body": raw.decode("utf-8", "replace"),
            "time": time.time(),
        }
        with self._lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")

    def choose(self, path: str, request: dict) -> dict:
        if path == CHAT and "response_format" in request and self.script.option("reject_response_format"):
            # Trigger: server-wide "no JSON mode" and the request asks for it.
            # Why: mimics vLLM/LM Studio builds that refuse response_format.
            # Outcome: 400 without consuming a queued action.
            return {"reject_response_format": True}
        action = self.script.next_action(path)
        if callable(action):
            action = action(request)
        return {"content": action} if isinstance(action, str) else dict(action or {})

    def start(self) -> None:
        # A short poll interval keeps shutdown (and so each test) quick.
        thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------
# In-process API


class FakeOpenAI:
    """In-process fake; a context manager. See the module docstring for actions."""

    def __init__(
        self, chat: str | dict | ChatHandler = "OK", dim: int = DEFAULT_DIM, log_path: Path | None = None
    ) -> None:
        self._script = _MemoryScript(chat, dim)
        self._core = _Core(self._script, log_path)
        self.base_url = f"http://127.0.0.1:{self._core.port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._core.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._core.stop()

    @property
    def requests(self) -> list[dict]:
        return self._core.requests

    def requests_to(self, path: str) -> list[dict]:
        """Recorded requests whose path ends with ``path`` (e.g. "/embeddings")."""
        return [r for r in self.requests if r["path"].rstrip("/").endswith(path)]

    def set_chat(self, default: str | dict | ChatHandler) -> None:
        self._script.defaults[CHAT] = default

    def queue_chat(self, *actions: str | dict) -> None:
        self._script.queues[CHAT].extend(actions)

    def set_embeddings(self, default: dict) -> None:
        self._script.defaults[EMBEDDINGS] = default

    def queue_embeddings(self, *actions: dict) -> None:
        self._script.queues[EMBEDDINGS].extend(actions)

    @property
    def dim(self) -> int:
        return self._script.options["dim"]

    @property
    def reject_response_format(self) -> bool:
        return self._script.options["reject_response_format"]

    @reject_response_format.setter
    def reject_response_format(self, value: bool) -> None:
        self._script.options["reject_response_format"] = value

    def set_reject_style(self, style: str) -> None:
        self._script.options["reject_style"] = style


# ---------------------------------------------------------------------------------------------
# Subprocess mode


class FakeOpenAIProcess:
    """Runs this file as a separate process; files live in ``workdir``."""

    def __init__(self, workdir: Path, script: dict | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.script_path = self.workdir / "fake_openai_script.json"
        self.log_path = self.workdir / "fake_openai_requests.jsonl"
        self.port_file = self.workdir / "fake_openai.port"
        self.write_script(script or {})
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def write_script(self, script: dict) -> None:
        tmp = self.script_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(script), encoding="utf-8")
        os.replace(tmp, self.script_path)  # atomic: the server never reads half a script

    def requests(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def __enter__(self) -> FakeOpenAIProcess:
        args = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--port-file",
            str(self.port_file),
            "--script",
            str(self.script_path),
            "--log",
            str(self.log_path),
        ]
        self.proc = subprocess.Popen(args)
        deadline = time.monotonic() + 15
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.02)
        self.base_url = f"http://127.0.0.1:{int(self.port_file.read_text())}/v1"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OpenAI-compatible fake server for tests.")
    parser.add_argument("--port-file", type=Path, required=True, help="write the bound port here")
    parser.add_argument("--script", type=Path, required=True, help="JSON behaviour script")
    parser.add_argument("--log", type=Path, help="append each request as a JSON line here")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: ephemeral)")
    args = parser.parse_args(argv)
    core = _Core(_FileScript(args.script), args.log, args.port)
    tmp = args.port_file.with_name(args.port_file.name + ".tmp")
    tmp.write_text(str(core.port), encoding="utf-8")
    os.replace(tmp, args.port_file)  # readers never see an empty port file
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=core.stop).start())
    core.httpd.serve_forever(0.05)
    core.stopping.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
