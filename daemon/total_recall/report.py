"""What `doctor`, `stats`, `status` and `topics` report: plain dicts, rendered by the CLI."""

from __future__ import annotations

import os
import time
from typing import Any

from total_recall import config, queue
from total_recall.db import VEC_FIX_HINT, Database, schema_version
from total_recall.indexer import budget_exhausted, today_start_utc

INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")


def _fts5_ok(db: Database) -> bool:
    try:
        db.execute("CREATE VIRTUAL TABLE temp._tr_fts USING fts5(x)")
        db.execute("DROP TABLE temp._tr_fts")
        return True
    except db.dbapi.Error:
        return False


def _embedder_info(settings: config.Settings, load: bool) -> dict:
    info: dict[str, Any] = {"provider": settings.embed.provider, "model": settings.embed.model}
    if not load:
        return info
    try:
        from total_recall.embed import get_embedder

        embedder = get_embedder(settings)
        started = time.perf_counter()
        embedder.embed(["doctor probe"])
        info.update(ok=True, model=embedder.model_id, dim=embedder.dim,
                    load_seconds=round(time.perf_counter() - started, 3))
    except Exception as exc:  # doctor reports every failure instead of raising
        info.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    return info


def doctor(db: Database | None, settings: config.Settings, *, load_embedder: bool = True,
           db_error: str | None = None) -> dict:
    """Every check, each reported on its own: a damaged database or a dead endpoint stops nothing."""
    from total_recall import daemon, install, recover

    paths = config.paths()
    state = daemon.daemon_state(paths)
    health = recover.check(paths.db)
    if db_error and health["ok"]:
        health = {"ok": False, "error": db_error}
    database: dict[str, Any] = {"path": str(paths.db), "ok": health["ok"] and db is not None}
    if not database["ok"]:
        database["error"] = health["error"] or db_error
        database["fix"] = recover.CORRUPT_HINT
    out: dict[str, Any] = {"home": str(paths.home), "database": database}
    if db is not None:
        out.update(_database_checks(db))
    out.update({
        "embedder": _embedder_info(settings, load_embedder),
        "llm": llm_check(settings),
        "daemon": {"running": state["running"], "pid": state["pid"]},
    })
    if db is not None:
        try:
            out["queue"] = queue.depth(db)
        except db.dbapi.Error as exc:
            out["queue"] = {"error": str(exc)}
    out["hooks_installed"] = install.hooks_installed()
    out["permissions"] = {"home": oct(os.stat(paths.home).st_mode & 0o777)}
    if paths.db.exists():
        out["permissions"]["database"] = oct(os.stat(paths.db).st_mode & 0o777)
    return out


def _database_checks(db: Database) -> dict:
    out: dict[str, Any] = {
        "sqlite_version": db.scalar("SELECT sqlite_version()"),
        "sqlite_driver": db.driver,
        "fts5": _fts5_ok(db),
        "sqlite_vec": {"loaded": db.has_vec, "version": db.vec_version,
                       "error": None if db.has_vec else f"{db.vec_error}; {VEC_FIX_HINT}"},
    }
    try:
        out.update(schema_version=schema_version(db), embed_model_recorded=db.get_meta("embed_model"),
                   embed_model_mismatch=db.get_meta("embed_model_mismatch"))
    except db.dbapi.Error as exc:  # damaged pages: reported under "database"
        out["schema_error"] = str(exc)
    return out


LLM_PROBE_TIMEOUT = 5.0


def llm_check(settings: config.Settings) -> dict:
    """The configured extractor, and for an endpoint one cheap request (GET /models, short timeout)."""
    enabled = settings.llm_enabled()
    info: dict[str, Any] = {"enabled": enabled, "base_url": settings.llm.base_url or None,
                            "model": settings.llm.model if enabled else None,
                            "extractor": "llm" if enabled else "offline"}
    if enabled:
        info["endpoint"] = probe_llm(settings)
        if info["endpoint"]["status"] not in ("ok", "reachable"):
            info["extractor"] = f"offline fallback (endpoint {info['endpoint']['status']})"
    return info


def probe_llm(settings: config.Settings, timeout: float = LLM_PROBE_TIMEOUT) -> dict:
    """reachable / unauthorised / model missing / unreachable, from one GET /models."""
    import openai

    model = settings.llm.model
    client = openai.OpenAI(base_url=settings.llm.base_url,
                           api_key=settings.llm_api_key() or "not-needed", timeout=timeout, max_retries=0)
    try:
        served = [m.id for m in client.models.list()]
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        return {"status": "unauthorised",
                "error": f"HTTP {exc.status_code}: check llm.api_key / OPENAI_API_KEY"}
    except openai.APIStatusError as exc:  # e.g. 404: the server lists no models; it answered
        return {"status": "reachable", "note": f"the model list is not served (HTTP {exc.status_code}); "
                                               f"model {model!r} not checked"}
    except openai.APIError as exc:  # connection refused, DNS, timeout
        return {"status": "unreachable", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        client.close()
    if model not in served:
        return {"status": "model missing", "error": f"{model!r} is not among the {len(served)} models served",
                "served": served[:10]}
    return {"status": "ok"}


def stats(db: Database, settings: config.Settings) -> dict:
    by_intent = dict(db.execute("SELECT intent, count(*) FROM ideas GROUP BY intent").fetchall())
    now = time.time()
    today = today_start_utc(now)
    calls = db.one(
        "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
        "FROM llm_calls WHERE extractor = 'llm' AND at >= ?", (today,))
    fallbacks = db.scalar("SELECT count(*) FROM llm_calls WHERE extractor = 'fallback' AND at >= ?", (today,), 0)
    parked = db.execute(
        "SELECT transcript_path, attempts, last_error FROM work_queue WHERE state = 'parked' ORDER BY id").fetchall()
    size = sum(os.path.getsize(p) for p in (str(db.path), f"{db.path}-wal") if os.path.exists(p))
    return {
        "ideas": sum(by_intent.values()),
        "ideas_by_intent": {i: by_intent.get(i, 0) for i in INTENTS},
        "spans": db.scalar("SELECT count(*) FROM spans", default=0),
        "entities": db.scalar("SELECT count(*) FROM entities", default=0),
        "relations": db.scalar("SELECT count(*) FROM relations", default=0),
        "sessions": db.scalar("SELECT count(DISTINCT session_id) FROM spans", default=0),
        "projects": db.scalar("SELECT count(DISTINCT project) FROM ideas", default=0),
        "transcripts_indexed": db.scalar("SELECT count(*) FROM index_state", default=0),
        "transcripts_pending": db.scalar(
            "SELECT count(DISTINCT transcript_path) FROM work_queue WHERE state IN ('pending', 'claimed')", default=0),
        "messages": db.scalar("SELECT count(*) FROM messages", default=0),
        "messages_skipped": dict(db.execute(
            "SELECT skip_reason, count(*) FROM messages WHERE skip_reason IS NOT NULL GROUP BY skip_reason").fetchall()),
        "queue": queue.depth(db),
        "parked": [{"transcript": p[0], "attempts": p[1], "error": p[2]} for p in parked],
        "without_vectors": {
            "ideas": db.scalar("SELECT count(*) FROM ideas WHERE needs_embedding = 1", default=0),
            "spans": db.scalar("SELECT count(*) FROM spans WHERE needs_embedding = 1", default=0),
        },
        "vector_search": db.has_vec,
        "llm_today": {"calls": calls[0], "prompt_tokens": calls[1], "completion_tokens": calls[2],
                      "fallbacks_to_offline": fallbacks,
                      "budget_exhausted": budget_exhausted(db, settings, now)},
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
    """The span tree per session: names, summaries, line ranges and idea counts."""
    if session:
        from total_recall.search import resolve_session

        session = resolve_session(db, session)
    where, params = ("WHERE s.session_id = ?", (session,)) if session else ("", ())
    roots = db.execute(
        f"SELECT DISTINCT s.session_id FROM spans s {where} ORDER BY s.created_at DESC LIMIT ?", (*params, limit)
    ).fetchall()
    out = []
    for (sid,) in roots:
        rows = db.execute(
            "SELECT s.id, s.parent_id, s.depth, s.name, s.summary, s.start_line, s.end_line, s.source_file, "
            "s.project, s.started_at, (SELECT count(*) FROM ideas i WHERE i.span_id = s.id) "
            "FROM spans s WHERE s.session_id = ? ORDER BY s.depth, s.start_line, s.id", (sid,)).fetchall()
        nodes = {r[0]: {"id": r[0], "depth": r[2], "name": r[3], "summary": r[4], "start_line": r[5],
                        "end_line": r[6], "source_file": r[7], "project": r[8], "started_at": r[9],
                        "ideas": r[10], "children": []} for r in rows}
        tree = []
        for r in rows:
            (nodes[r[1]]["children"] if r[1] in nodes else tree).append(nodes[r[0]])
        out.append({"session": sid, "spans": tree})
    return out
