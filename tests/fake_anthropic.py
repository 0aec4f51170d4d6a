"""A small Anthropic-Messages-compatible HTTP server for tests (standard library only).

Serves ``POST /v1/messages`` (streaming SSE when the request says ``"stream": true``, one JSON
message otherwise) and ``POST /v1/messages/count_tokens`` on 127.0.0.1 at an ephemeral port, so
the real Claude Code CLI can run a headless session with no network and no key::

    with FakeAnthropic() as srv:
        srv.script("release plan", [todo_write(...), "Planned."])
        run claude -p "release plan" with ANTHROPIC_BASE_URL=srv.base_url
        assert "release plan" in srv.requests[-1]["body"]

Behaviour
---------
Every request is recorded (``srv.requests``: method, path, headers, parsed ``json``, raw ``body``)
before it is answered. A conversation request (one that offers ``tools``) is answered from the
*rule* whose ``match`` text occurs in its latest user prompt, the newest rule first; the reply is
that rule's ``replies[n]`` where n counts the assistant messages after that prompt, so a rule
scripts one whole turn: ``[tool call, text]`` answers the prompt with the tool call and the
request that carries its ``tool_result`` with the text. Past the end, the last reply repeats.
Requests without tools (titles, summaries, quota probes, a session goal's check) and prompts no
rule matches get ``default`` (plain text "OK"), or the reply of the newest *side* rule
(``srv.answer_side(match, reply)``) whose ``match`` occurs anywhere in a tool-less request's body:
the CLI's side calls are told apart by their system prompt, not by a user's prompt.

A reply is a str (assistant text) or a dict whose keys combine:

    thinking    a thinking block sent before the text (extended thinking: the CLI writes it on a
                line of its own, before the text's line, under one message id)
    text        assistant text
    tool_use    {"name": ..., "input": {...}} or {"name_matching": REGEX, "input": {...}}: the
                first tool offered in the request whose name matches (so a test need not know how
                the client spells an MCP tool); a tool the request only names as deferred (Claude
                Code 2.1.2xx on: its task and MCP tools) is first loaded with a ToolSearch call,
                which does not count as one of the turn's replies; no match is answered with text
                saying so; ``"fill": {FIELD: REGEX}`` sets each input field to the regex's first group
                in the request's messages, newest match first (an id the client made up, such as the
                agentId a background agent's launch returned)
    status      HTTP status; >= 400 sends an Anthropic-style error object

The stop reason is ``tool_use`` when a tool is called, else ``end_turn``.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
MODEL = "claude-fake"
TOOL_SEARCH = "ToolSearch"


# ---------------------------------------------------------------------------------------------
# Reading a request


def _text_of(content: Any) -> str:
    """The text blocks of one message's content (tool results and reminders included)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def _is_prompt(message: dict) -> bool:
    """A user message that is a prompt, not only the results of tool calls."""
    content = message.get("content")
    if message.get("role") != "user":
        return False
    if isinstance(content, str):
        return True
    blocks = content if isinstance(content, list) else []
    return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)


def latest_prompt(request: dict) -> tuple[str, int]:
    """The text of the newest prompt and how many assistant messages followed it (a call that only
    loads a deferred tool is not one: it is how the fake reaches a scripted call, see _load)."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    for index in range(len(messages) - 1, -1, -1):
        if _is_prompt(messages[index]):
            answered = sum(
                1 for m in messages[index + 1 :] if m.get("role") == "assistant" and not _only_loads(m)
            )
            return _text_of(messages[index].get("content")), answered
    return "", 0


def _only_loads(message: dict) -> bool:
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    calls = [b for b in blocks if b.get("type") == "tool_use"]
    return bool(calls) and all(b.get("name") == TOOL_SEARCH for b in calls)


def tool_results(request: dict) -> list[dict]:
    """Every tool_result block the request carries, oldest first."""
    found = []
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append(block)
    return found


def tool_names(request: dict) -> list[str]:
    return [t.get("name", "") for t in request.get("tools") or [] if isinstance(t, dict)]


DEFERRED_LIST = re.compile(
    r"deferred tools are now available via ToolSearch\b[^\n]*:\n((?:[A-Za-z][\w-]*\n?)+)"
)


def deferred_tools(request: dict) -> list[str]:
    """The tools a request names without offering them: Claude Code 2.1.2xx on sends some (its task
    tools, MCP tools) by name only, in a reminder listing what its ToolSearch tool can load."""
    names: list[str] = []
    for message in request.get("messages") or []:
        text = _text_of(message.get("content")) if isinstance(message, dict) else ""
        for listed in DEFERRED_LIST.findall(text):
            names += [n for n in listed.split("\n") if n and n not in names]
    return names


def _deferred(request: dict, pattern: str) -> str | None:
    return next((n for n in deferred_tools(request) if re.search(pattern, n)), None)


# ---------------------------------------------------------------------------------------------
# Building a reply


def _content_blocks(request: dict, reply: dict, serial: int) -> list[dict]:
    blocks: list[dict] = []
    if reply.get("thinking"):
        blocks.append(
            {"type": "thinking", "thinking": str(reply["thinking"]), "signature": f"sig_fake_{serial:04d}"}
        )
    if reply.get("text"):
        blocks.append({"type": "text", "text": str(reply["text"])})
    call = reply.get("tool_use")
    if call:
        name = call.get("name") or next(
            (n for n in tool_names(request) if re.search(call.get("name_matching", "^$"), n)), None
        )
        if name is None and TOOL_SEARCH in tool_names(request):
            deferred = _deferred(request, call.get("name_matching", "^$"))
            if deferred is not None:
                # Trigger: the tool is deferred (named, not offered). Why: the client offers it once
                # the model loads it. Outcome: this reply loads it; the next one calls it.
                return [_load(deferred, serial)]
        if name is None:
            # Trigger: the client offered no tool of that shape. Why: the test should read what
            # was offered, not a hang. Outcome: a text reply naming the pattern.
            return [{"type": "text", "text": f"fake: no offered tool matches {call.get('name_matching')!r}"}]
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake_{serial:04d}",
                "name": name,
                "input": {**call.get("input", {}), **_filled(request, call.get("fill", {}))},
            }
        )
    return blocks or [{"type": "text", "text": "OK"}]


def _filled(request: dict, fill: dict[str, str]) -> dict[str, str]:
    text = json.dumps(request.get("messages"))
    out = {}
    for field, pattern in fill.items():
        found = re.findall(pattern, text)
        if found:
            out[field] = found[-1]
    return out


def _load(name: str, serial: int) -> dict:
    return {
        "type": "tool_use",
        "id": f"toolu_fake_{serial:04d}",
        "name": TOOL_SEARCH,
        "input": {"query": f"select:{name}", "max_results": 1},
    }


def _message(request: dict, blocks: list[dict], serial: int) -> dict:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    output = max(1, len(json.dumps(blocks)) // 4)
    usage = {
        "input_tokens": max(1, len(json.dumps(request.get("messages"))) // 4),
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    return {
        "id": f"msg_fake_{serial:04d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", MODEL),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def _sse_events(message: dict) -> list[tuple[str, dict]]:
    """The Messages API stream for a finished message: start, one delta per block, stop."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": empty},
                ),
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ]
            empty, delta = None, {"type": "signature_delta", "signature": block["signature"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        if empty is not None:
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": empty},
                )
            )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _error_body(status: int) -> dict:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = kinds.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": f"fake error {status}"}}


# ---------------------------------------------------------------------------------------------
# HTTP


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep pytest output clean; the request record is the log

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        fake = self.server.fake
        fake.record(self, body, raw)
        path = self.path.split("?", 1)[0].rstrip("/")  # the CLI adds ?beta=true
        if path == COUNT_TOKENS:
            return self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        if path != MESSAGES or not isinstance(body, dict):
            return self._send_json(
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}},
            )
        reply = fake.reply_for(body, raw.decode("utf-8", "replace"))
        if int(reply.get("status", 200)) >= 400:
            return self._send_json(int(reply["status"]), _error_body(int(reply["status"])))
        serial = fake.serial()
        message = _message(body, _content_blocks(body, reply, serial), serial)
        if body.get("stream"):
            return self._send_stream(message)
        self._send_json(200, message)

    def do_GET(self) -> None:
        self.server.fake.record(self, None, b"")
        self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

    def _send_stream(self, message: dict) -> None:
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
            for name, payload in _sse_events(message)
        )
        self._send(200, data, "text/event-stream")

    def _send_json(self, status: int, payload: dict) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", "req_fake")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up; nothing to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client that hangs up mid-request is expected
        super().handle_error(request, client_address)


class FakeAnthropic:
    """In-process fake; a context manager. See the module docstring for rules and replies."""

    def __init__(self, default: str | dict = "OK") -> None:
        self.default = default
        self.rules: list[tuple[str, list]] = []
        self.side_rules: list[tuple[str, str | dict]] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._serial = 0
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeAnthropic:
        # A short poll interval keeps shutdown (and so each test) quick.
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def script(self, match: str, replies: list) -> None:
        """Answer the prompt containing `match` with `replies`, one per model request of its turn."""
        with self._lock:
            self.rules.insert(0, (match, list(replies)))

    def answer_side(self, match: str, reply: str | dict) -> None:
        """Answer a request that offers no tools (a side call of the CLI) whose body holds `match`."""
        with self._lock:
            self.side_rules.insert(0, (match, reply))

    def conversation_requests(self, containing: str = "") -> list[dict]:
        """Recorded model requests of a conversation (they offer tools) whose body holds `containing`."""
        return [
            r
            for r in self.requests
            if r["path"].split("?", 1)[0].rstrip("/") == MESSAGES
            and isinstance(r["json"], dict)
            and r["json"].get("tools")
            and containing in r["body"]
        ]

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

    def serial(self) -> int:
        with self._lock:
            self._serial += 1
            return self._serial

    def reply_for(self, request: dict, raw: str = "") -> dict:
        prompt, answered = latest_prompt(request)
        replies = None
        with self._lock:
            if request.get("tools"):
                replies = next((r for match, r in self.rules if match in prompt), None)
            else:
                side = next((r for match, r in self.side_rules if match in raw), None)
                replies = None if side is None else [side]
        reply = replies[min(answered, len(replies) - 1)] if replies else self.default
        return {"text": reply} if isinstance(reply, str) else dict(reply)
