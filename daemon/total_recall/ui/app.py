"""`total-recall ui`: a local web view of the memory (Starlette on uvicorn, Jinja2 templates).

Security, for a server that holds a person's conversations: it listens on 127.0.0.1 only; every
request needs the random token of this run (from the printed URL or the 0600 file a browser is
opened on, then an HttpOnly SameSite=Strict cookie); the Host header must name this loopback address
(DNS rebinding) and an Origin header, when sent, must be ours; there are no CORS headers; state
changes are POST with a CSRF token. Writes go through the library functions the CLI uses
(memory.pin/edit/forget/decide).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import os
import secrets
import socket
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import structlog
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from total_recall import config, render, transcript
from total_recall.errors import TotalRecallError

log = structlog.get_logger(__name__)

HERE = Path(__file__).resolve().parent
INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
SETUP_HINT = "run `total-recall up` (or `total-recall init`) to set up the memory first"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# Referrer-Policy same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on
# form POSTs, which the Origin check must refuse. Other sites never see our addresses either way.
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


class Guard:
    """ASGI middleware: Host and Origin checks, the run's token, security headers on every answer."""

    def __init__(self, app: Any, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.cookie = f"total_recall_{port}"
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_secure(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        headers = Headers(scope=scope)
        if headers.get("host", "") not in self.hosts:
            return await _deny(403, "forbidden host", scope, receive, send_secure)
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return await _deny(403, "forbidden origin", scope, receive, send_secure)
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            # The token leaves the address bar (and history) at once; the cookie carries it on.
            # A page of ours moves on, not a redirect: the browser arrives from the opening file
            # (`serve`), another site, and would not send a SameSite=Strict cookie along a redirect
            # that navigation started; a refresh this page asks for is our own navigation.
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response = moving_on(scope["path"] + (f"?{rest}" if rest else ""))
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return await response(scope, receive, send_secure)
        cookie = request.cookies.get(self.cookie, "")
        if not hmac.compare_digest(cookie.encode(), self.token.encode()):
            return await _deny(
                401,
                "unauthorised: open the address `total-recall ui` printed (it holds the token)",
                scope,
                receive,
                send_secure,
            )
        await self.app(scope, receive, send_secure)


def moving_on(url: str) -> Response:
    """A page that sends the browser on to url (same site) at once."""
    target = html.escape(url, quote=True)
    body = (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={target}">'
        f'<title>total-recall</title></head><body><a href="{target}">Open the memory</a></body></html>'
    )
    return Response(body, media_type="text/html")


def opening_file(url: str) -> Path:
    """A file, readable by the user only, that sends a browser on to url (which holds the token).

    Trigger: `ui` opens a browser. Why: the browser is started with what it opens on its command
    line, which every user of the machine can read (/proc/PID/cmdline, ps), and any of them can
    connect to 127.0.0.1; with the token there they could read and forget the memory. Outcome: the
    command line names this file in the 0700 home, as Jupyter does; `serve` deletes it when stopped
    by Ctrl+C (uvicorn ends the process by SIGTERM's own action; the token died with the run).
    """
    path = config.paths().home / f"ui-{os.getpid()}.html"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(moving_on(url).body)
    return path


async def _deny(status: int, text: str, scope: dict, receive: Callable, send: Callable) -> None:
    await PlainTextResponse(text, status_code=status)(scope, receive, send)


class View:
    """The app's state: one connection (used by one request at a time), a warm embedder, the CSRF token."""

    def __init__(self, token: str, settings: config.Settings | None = None) -> None:
        self.settings = settings or config.load()
        self.csrf = hmac.new(token.encode(), b"csrf", hashlib.sha256).hexdigest()
        self.lock = threading.Lock()
        self._db = None
        self._embedder: Any = None
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(intents=INTENTS, csrf=self.csrf)
        self.templates.env.filters["day"] = lambda s: (s or "")[:10] or "undated"
        self.templates.env.filters["said"] = render.said  # "tool output", "user said", ...
        self.templates.env.filters["pr_parts"] = transcript.pr_parts  # ("PR #42", url) of a PR link
        self.templates.env.filters["other_places"] = render.other_places  # "also at file:line"
        self.templates.env.filters["when"] = lambda s: (s or "")[:16].replace("T", " ")
        self.templates.env.filters["stamp"] = lambda t: datetime.fromtimestamp(float(t)).strftime(
            "%Y-%m-%d %H:%M"
        )

    def db(self):
        if self._db is None:
            from total_recall import db as dbmod

            self._db = dbmod.open_store(self.settings)  # memory.db or the [store] url's PostgreSQL
        return self._db

    def embedder(self):
        if self._embedder is None:
            from total_recall.search import local_embedder

            self._embedder = local_embedder(self.settings)
        return self._embedder

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        with self.lock:
            return fn(self.db(), *args, **kwargs)

    def page(self, request: Request, name: str, status: int = 200, **context) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def projects(self) -> list[str]:
        from total_recall.search import known_projects

        return [p for p in self.run(known_projects) if p]


def create_app(token: str, port: int, settings: config.Settings | None = None) -> Any:
    from total_recall.ui import views

    view = View(token, settings)
    routes = [
        Route("/", views.timeline(view)),
        Route("/search", views.search_page(view)),
        Route("/memory/{id:int}", views.memory_page(view)),
        Route("/memory/{id:int}/pin", views.pin(view, True), methods=["POST"]),
        Route("/memory/{id:int}/unpin", views.pin(view, False), methods=["POST"]),
        Route("/memory/{id:int}/edit", views.edit(view), methods=["POST"]),
        Route("/memory/{id:int}/forget", views.forget(view), methods=["GET", "POST"]),
        Route("/session/{sid:str}", views.session_page(view)),
        Route("/entity/{id:int}", views.entity_page(view)),
        Route("/graph", views.graph_page(view)),
        Route("/review", views.review_page(view)),
        Route("/review/{id:int}/{decision:str}", views.decide(view), methods=["POST"]),
        Route("/api/search", views.api_search(view)),
        Route("/api/memory/{id:int}", views.api_memory(view)),
        Route("/api/graph", views.api_graph(view)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers=views.error_handlers(view))
    # Open the database and compile the templates now, so the first page is not the slow one.
    view.db()
    for name in ("timeline.html", "search.html", "memory.html"):
        view.templates.get_template(name)
    return Guard(app, token, port)


def bind(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))  # loopback only, never 0.0.0.0
    except OSError as exc:
        sock.close()
        raise TotalRecallError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; try another --port"
        ) from None
    sock.listen(64)
    return sock


def _has_gui() -> bool:
    """Whether opening a browser will show a window.

    Trigger: Linux without a display (SSH, containers). Why: Python's webbrowser then falls back
    to a console browser (lynx, w3m) that would take over this terminal. Outcome: only the URL
    is printed.
    """
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def serve(
    port: int = 0, open_browser: bool = True, announce: Callable[[str], None] = lambda url: None
) -> int:
    """Serve until interrupted; announce (the CLI prints it) and open the address with this run's token."""
    import uvicorn

    if not config.paths().db.exists():
        raise TotalRecallError(f"no memory database at {config.paths().db}; {SETUP_HINT}")
    sock = bind(port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    url = f"http://127.0.0.1:{port}/?token={token}"
    announce(url)
    opener = None
    if open_browser and _has_gui():
        import webbrowser

        opener = opening_file(url)
        threading.Timer(0.3, webbrowser.open, [opener.as_uri()]).start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(token, port),
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
        )
    )
    try:
        server.run(sockets=[sock])
    finally:
        if opener is not None:
            opener.unlink(missing_ok=True)
    return 0
