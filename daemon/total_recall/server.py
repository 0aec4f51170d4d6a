"""The daemon's local search socket: one JSON line in, one JSON line out.

A Unix socket in the private home folder, chmod 0600, so only the user can connect. The CLI asks
here first (warm model, no start-up cost) and searches in-process when nobody answers. The client
half lives in `client` (standard library only); this module is the daemon's side and the
in-process fallback.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import queue
import socketserver
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from total_recall import config, vector_cache
from total_recall.client import ANSWER_TIMEOUT, CONNECT_TIMEOUT, ask, exchange, log_timeout, request, result
from total_recall.errors import TotalRecallError

__all__ = [
    "ANSWER_TIMEOUT",
    "CONNECT_TIMEOUT",
    "ask",
    "exchange",
    "log_timeout",
    "request",
    "result",
    "search",
    "in_process",
    "start",
]

MAX_REQUEST = 1 << 20
CLIENT_TIMEOUT = 10.0  # server side: seconds a connected client may take to send or read
POOL_SIZE = 4  # warm read connections: a search uses one, two when one is free (search._run_jobs)


def _log() -> Any:
    import structlog

    return structlog.get_logger(__name__)


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
    req = request(text, k=k, project=project, all_projects=all_projects, hyde=hyde, session=session, cwd=cwd)
    answer = ask(config.paths().socket, req)
    if answer is None:
        answer = in_process(settings, req)
    return result(answer)


def in_process(settings: config.Settings, request: dict) -> dict:
    """One search request answered by this process (no daemon listening)."""
    from total_recall import db as dbmod
    from total_recall import search as searchmod

    database = dbmod.open_store(settings)
    try:
        return searchmod.run(database, settings, searchmod.local_embedder(settings), request)
    finally:
        database.close()


class _Handler(socketserver.StreamRequestHandler):
    timeout = CLIENT_TIMEOUT  # a client that connects and sends nothing frees its thread

    def handle(self) -> None:
        try:
            line = self.rfile.readline(MAX_REQUEST)
        except OSError as exc:  # socket.timeout included
            _log().warning("socket_client_timeout", seconds=self.timeout, error=str(exc))
            return
        try:
            request = json.loads(line)
            answer = self.server.dispatch(request)  # type: ignore[attr-defined]
        except Exception as exc:  # boundary: one bad request never stops the server
            _log().warning("socket_request_failed", error=str(exc), traceback=traceback.format_exc(limit=8))
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            self.wfile.write(json.dumps(answer, default=str).encode() + b"\n")
        except OSError as exc:  # the client went away or stopped reading
            _log().warning("socket_client_gone", error=str(exc))


class SearchServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    # listen() backlog. socketserver's default of 5 refused the sixth of several simultaneous
    # clients (EAGAIN at connect), which then searched in-process, model load and all.
    request_queue_size = 128

    def __init__(self, path: Path, daemon: Any, pool_size: int = POOL_SIZE):
        self.daemon_ref = daemon
        self.vectors = _vector_cache(daemon)
        self.pool = ConnectionPool(lambda: _pooled(daemon, self.vectors), pool_size)
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=pool_size, thread_name_prefix="search"
        )
        super().__init__(str(path), _Handler)
        os.chmod(path, 0o600)

    def server_close(self) -> None:
        super().server_close()
        self.executor.shutdown(wait=False)
        self.pool.close()

    def dispatch(self, request: dict) -> dict:
        from total_recall import search as searchmod

        op = request.get("op")
        if op == "ping":
            cache = self.vectors.state if self.vectors is not None else "off"
            return {"ok": True, "pid": os.getpid(), "connections": self.pool.opened, "vector_cache": cache}
        if op == "search":
            d = self.daemon_ref
            # The daemon's warm embedder; whether vectors are usable is checked by the search on
            # this server's own connection (never the main loop's, which another thread is using).
            try:
                embedder = d.indexer.embedder
            except TotalRecallError:
                embedder = None
            with self.pool.connection() as database:
                return searchmod.run(
                    database, d.settings, embedder, request, spare=self.pool.spare, executor=self.executor
                )
        return {"error": f"unknown op {op!r}"}


def _vector_cache(daemon: Any) -> vector_cache.VectorCache | None:
    """The store's vectors in memory (vector_cache.py), loaded on a thread of its own; none for
    PostgreSQL or when search.vector_cache_mb is 0."""
    budget = int(daemon.settings.search.vector_cache_mb) << 20
    if budget <= 0 or daemon.settings.store.url:
        return None
    cache = vector_cache.VectorCache(budget, lambda: _open(daemon.db.path, daemon.settings))
    cache.load_in_background()
    return cache


def _pooled(daemon: Any, cache: vector_cache.VectorCache | None) -> Any:
    """A connection of the pool: searches through it use the vectors in memory."""
    database = _open(daemon.db.path, daemon.settings)
    if cache is not None:  # only for a SQLite store (_vector_cache); vector_cache.for_db checks again
        database.vectors_in_memory = cache
    return database


def _open(path: Path, settings: config.Settings) -> Any:
    from total_recall import db as dbmod

    url = settings.store.url.strip()
    if url:  # the shared PostgreSQL store: reconnected before a statement after an outage
        from total_recall import pg

        return pg.connect(url, lazy=True)
    # Unmapped: each connection's map of the file counted its pages again in the daemon's RSS
    # (measured at 1M ideas: 2.2 GB VmRSS, 212 MB of it anonymous); these read through the caches.
    return dbmod.connect(path, settings=settings, migrate_to_head=False, mapped=False)


class ConnectionPool:
    """Up to `size` warm read connections, each used by one request thread at a time.

    Opening a connection loads sqlite-vec and applies the settings (a few milliseconds, more with
    a cold page cache), so the connections stay open between requests. Searches only read, and in
    WAL mode every statement sees what the daemon committed before it began, so a pooled
    connection sees new memories as soon as they are written. Connections are opened lazily, up to
    `size`; a request that finds none free waits for one. The most recently returned connection is
    handed out first (its pages are the warmest).
    """

    def __init__(self, opener: Any, size: int):
        self._opener = opener
        self._size = max(1, size)
        self._free: queue.LifoQueue = queue.LifoQueue()
        self._opened = 0
        self._lock = threading.Lock()
        self._all: list[Any] = []

    @property
    def opened(self) -> int:
        return self._opened

    def _take_nowait(self) -> Any:
        """A free connection, or a new one while fewer than `size` are open; else None."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._opened >= self._size:
                return None
            self._opened += 1
            try:
                conn = self._opener()
            except BaseException:
                self._opened -= 1
                raise
            self._all.append(conn)
            return conn

    def _take(self) -> Any:
        conn = self._take_nowait()
        return conn if conn is not None else self._free.get()

    @contextlib.contextmanager
    def spare(self) -> Iterator[Any]:
        """A second connection for the same request if one is free or may be opened now, else
        None. Never waits: a request that waited for a second connection while holding its first
        could deadlock with others doing the same."""
        conn = self._take_nowait()
        try:
            yield conn
        finally:
            if conn is not None:
                self._free.put(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        conn = self._take()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # a search never writes; never hand on an open read
                conn.execute("ROLLBACK")
            self._free.put(conn)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


def start(daemon: Any) -> SearchServer | None:
    path = daemon.paths.socket
    if len(str(path)) > 100:
        _log().warning("socket_path_too_long", path=str(path))
        return None
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    server = SearchServer(path, daemon)
    thread = threading.Thread(target=server.serve_forever, name="search-socket", daemon=True)
    thread.start()
    return server
