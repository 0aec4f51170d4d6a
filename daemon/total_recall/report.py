"""What `doctor`, `stats`, `status` and `topics` report: plain dicts, rendered by the CLI."""

from __future__ import annotations

import os
import time
from typing import Any

from total_recall import config, memories, queue, repoint, retry, state, trust, vectors
from total_recall.db import VEC_FIX_HINT, Database, fts5_available, schema_version, sqlite_version
from total_recall.errors import TotalRecallError

INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")


def _embedder_info(settings: config.Settings, load: bool) -> dict:
    info: dict[str, Any] = {"provider": settings.embed.provider, "model": settings.embed.model}
    if not load:
        return info
    try:
        from total_recall.embed import get_embedder

        embedder = get_embedder(settings)
        started = time.perf_counter()
        embedder.embed(["doctor probe"])
        info.update(
            ok=True,
            model=embedder.model_id,
            dim=embedder.dim,
            load_seconds=round(time.perf_counter() - started, 3),
        )
    except Exception as exc:  # doctor reports every failure instead of raising
        info.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    return info


def store_check(settings: config.Settings) -> dict:
    """Where memories live and whether that store answers (the URL without its password)."""
    url = settings.store.url.strip()
    if not url:
        return {"kind": "sqlite", "path": str(config.paths().db)}
    from total_recall import db as dbmod

    out: dict[str, Any] = {"kind": "postgresql", "url": config.without_password(url)}
    try:
        store = dbmod.open_store(settings)
    except TotalRecallError as exc:  # unreachable, refused, no psycopg, schema too new
        return {**out, "ok": False, "error": str(exc)}
    try:
        out.update(ok=True, pgvector=store.vec_version, ideas=sum(memories.ideas_by_intent(store).values()))
    finally:
        store.close()
    return out


def doctor(
    db: Database | None, settings: config.Settings, *, load_embedder: bool = True, db_error: str | None = None
) -> dict:
    """Every check, each reported on its own: a damaged database or a dead endpoint stops nothing."""
    from total_recall import daemon, install, salvage

    paths = config.paths()
    state = daemon.daemon_state(paths)
    health = salvage.check(paths.db)
    if db_error and health["ok"]:
        health = {"ok": False, "error": db_error}
    database: dict[str, Any] = {"path": str(paths.db), "ok": health["ok"] and db is not None}
    if not database["ok"]:
        database["error"] = health["error"] or db_error
        database["fix"] = salvage.CORRUPT_HINT
    out: dict[str, Any] = {"home": str(paths.home), "database": database, "store": store_check(settings)}
    if db is not None:
        out.update(_database_checks(db, settings))
    out.update(
        {
            "embedder": _embedder_info(settings, load_embedder),
            "llm": llm_check(settings),
            "daemon": _daemon_info(paths, state),
        }
    )
    if db is not None:
        try:
            out["queue"] = queue.depth(db)
        except db.dbapi.Error as exc:
            out["queue"] = {"error": str(exc)}
    out["privacy"] = privacy_check(settings)
    out["hooks_installed"] = install.hooks_installed()
    out["permissions"] = {"home": oct(os.stat(paths.home).st_mode & 0o777)}
    if paths.db.exists():
        out["permissions"]["database"] = oct(os.stat(paths.db).st_mode & 0o777)
    return out


def privacy_check(settings: config.Settings) -> dict:
    """The folders whose transcripts may be read, and any [privacy] extra_roots entry ignored."""
    ignored = trust.extra_roots(settings)[1]
    out: dict[str, Any] = {"transcript_roots": trust.allowed_roots(settings)}
    if ignored:
        out.update(extra_roots_ignored=ignored, fix=trust.EXTRA_ROOTS_FIX)
    return out


def _daemon_info(paths: Any, state: dict) -> dict:
    """Whether the daemon runs, and, when it answers on its socket, whether it holds the vectors in
    memory (vector_cache.py: ready, loading, too large for search.vector_cache_mb, off, failed)."""
    from total_recall import client

    info = {"running": state["running"], "pid": state["pid"]}
    if state["running"]:
        answer = client.ask(paths.socket, {"op": "ping"}) or {}
        info["vectors_in_memory"] = answer.get("vector_cache", "not answering")
    return info


def _database_checks(db: Database, settings: config.Settings) -> dict:
    out: dict[str, Any] = {
        "sqlite_version": sqlite_version(db),
        "sqlite_driver": db.driver,
        "fts5": fts5_available(db),
        "sqlite_vec": {
            "loaded": db.has_vec,
            "version": db.vec_version,
            "error": None if db.has_vec else f"{db.vec_error}; {VEC_FIX_HINT}",
        },
    }
    try:
        out.update(
            schema_version=schema_version(db),
            embed_model_recorded=db.get_meta("embed_model"),
            embed_model_mismatch=db.get_meta("embed_model_mismatch"),
            # Chunks whose vectors an older embed_text made, embedded again a slice per heartbeat.
            vectors_to_refresh=vectors.refresh_left(db),
            # Transcripts read again for pointers left on a reply's thinking line (repoint.py).
            transcripts_to_repoint=repoint.left(db, settings.machine_name()),
        )
    except db.dbapi.Error as exc:  # damaged pages: reported under "database"
        out["schema_error"] = str(exc)
    return out


LLM_PROBE_TIMEOUT = 5.0


def llm_check(settings: config.Settings) -> dict:
    """The configured extractor, and for an endpoint one cheap request (GET /models, short timeout)."""
    enabled = settings.llm_enabled()
    info: dict[str, Any] = {
        "enabled": enabled,
        "base_url": settings.llm.base_url or None,
        "model": settings.llm.model if enabled else None,
        "extractor": "llm" if enabled else "offline",
    }
    if enabled:
        info["endpoint"] = probe_llm(settings)
        if info["endpoint"]["status"] not in ("ok", "reachable"):
            info["extractor"] = f"offline fallback (endpoint {info['endpoint']['status']})"
    return info


def probe_llm(settings: config.Settings, timeout: float = LLM_PROBE_TIMEOUT) -> dict:
    """reachable / unauthorised / model missing / unreachable, from one GET /models."""
    import openai

    model = settings.llm.model
    client = openai.OpenAI(
        base_url=settings.llm.base_url,
        api_key=settings.llm_api_key() or "not-needed",
        timeout=timeout,
        max_retries=0,
        http_client=retry.bounded_http_client(timeout),
    )
    try:
        served = [m.id for m in client.models.list()]
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        return {
            "status": "unauthorised",
            "error": f"HTTP {exc.status_code}: check llm.api_key / OPENAI_API_KEY",
        }
    except openai.APIStatusError as exc:  # e.g. 404: the server lists no models; it answered
        return {
            "status": "reachable",
            "note": f"the model list is not served (HTTP {exc.status_code}); model {model!r} not checked",
        }
    except openai.APIError as exc:  # connection refused, DNS, timeout
        return {"status": "unreachable", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        client.close()
    if model not in served:
        return {
            "status": "model missing",
            "error": f"{model!r} is not among the {len(served)} models served",
            "served": served[:10],
        }
    return {"status": "ok"}


def stats(db: Database, settings: config.Settings, store: Any = None) -> dict:
    """Counts of the memory store (`store`: memory.db, or the PostgreSQL store [store] url names;
    `db` when None) and of the local file's work queue (`db`)."""
    store = db if store is None else store
    by_intent = memories.ideas_by_intent(store)
    now = time.time()
    today = state.today_start_utc(now)
    calls = state.llm_usage_since(store, today)
    searched = state.search_usage_since(store, today)
    fallbacks = state.fallbacks_since(store, today)
    parked = queue.parked(db)
    size = sum(os.path.getsize(p) for p in (str(db.path), f"{db.path}-wal") if os.path.exists(p))
    counts = memories.counts(store)
    return {
        "ideas": sum(by_intent.values()),
        "ideas_by_intent": {i: by_intent.get(i, 0) for i in INTENTS},
        "open": memories.open_counts(store),  # unanswered questions, open todos, problems with no fix
        "spans": counts["spans"],
        "entities": counts["entities"],
        "relations": counts["relations"],
        "sessions": counts["sessions"],
        "projects": counts["projects"],
        "transcripts_indexed": state.count(store),
        "transcripts_pending": queue.unfinished(db),
        "messages": counts["messages"],
        "messages_skipped": memories.skipped_messages(store),
        "queue": queue.depth(db),
        "parked": [
            {"transcript": p["transcript_path"], "attempts": p["attempts"], "error": p["last_error"]}
            for p in parked
        ],
        "without_vectors": memories.without_vectors(store),
        "vector_search": store.has_vec,
        "llm_today": {
            "calls": calls["calls"],
            "prompt_tokens": calls["prompt_tokens"],
            "completion_tokens": calls["completion_tokens"],
            "fallbacks_to_offline": fallbacks,
            "search_calls": searched["calls"],  # HyDE and re-ranking, while a user waited
            "search_tokens": searched["tokens"],
            "budget_exhausted": state.budget_exhausted(store, settings.llm.daily_token_budget, now),
        },
        "database_bytes": size,
    }


def status(db: Database | None) -> dict:
    from total_recall import daemon

    out = daemon.daemon_state(config.paths())
    if db is not None:
        out["queue"] = queue.depth(db)
    return out


TIME_KEYS = ("started", "status_updated", "at", "updated")


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if unit == 'day' and n > 1 else ''} ago"
    return f"{int(seconds)} s ago"


def local_time(epoch: Any, now: float | None = None) -> Any:
    """'2026-03-02 10:04:05 (3 min ago)' in local time; anything else unchanged."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)) or epoch <= 0:
        return epoch
    now = time.time() if now is None else now
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(epoch))} ({ago(now - epoch)})"


def readable_times(data: Any, now: float | None = None) -> Any:
    """The same dict with epoch times shown as local times and ages (text output; JSON stays raw)."""
    if not isinstance(data, dict):
        return data
    return {k: local_time(v, now) if k in TIME_KEYS else readable_times(v, now) for k, v in data.items()}


def topics(db: Database, session: str | None = None, limit: int = 50) -> list[dict]:
    """The span tree per session: names, summaries, line ranges and idea counts, and the session's
    title (None without one)."""
    if session:
        from total_recall.search import resolve_session

        session = resolve_session(db, session)
    out = []
    sessions = memories.recent_sessions(db, session, limit)
    titles, prs = memories.session_titles(db, sessions), memories.session_prs(db, sessions)
    for sid in sessions:
        rows = memories.session_spans(db, sid)
        nodes = {
            r["id"]: {
                "id": r["id"],
                "depth": r["depth"],
                "name": r["name"],
                "summary": r["summary"],
                "start_line": r["start_line"],
                "end_line": r["end_line"],
                "source_file": r["source_file"],
                "project": r["project"],
                "started_at": r["started_at"],
                "ideas": r["ideas"],
                "children": [],
            }
            for r in rows
        }
        tree = []
        for r in rows:
            (nodes[r["parent_id"]]["children"] if r["parent_id"] in nodes else tree).append(nodes[r["id"]])
        out.append({"session": sid, "title": titles.get(sid), "prs": prs.get(sid, []), "spans": tree})
    return out
