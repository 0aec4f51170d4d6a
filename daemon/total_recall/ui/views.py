"""The web view's pages and JSON endpoints; each calls the library functions the CLI calls."""

from __future__ import annotations

import hmac
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from total_recall import browse, curate, digest, memories, report
from total_recall.errors import NotFound, TotalRecallError

TIMELINE_DAYS = 14
MAX_DAYS = 365


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value))) if value else default
    except ValueError:
        return default


async def _checked_form(view, request: Request) -> Any:
    """The POSTed form, after its CSRF token matched this run's (else 403)."""
    form = await request.form()
    given = str(form.get("csrf") or request.headers.get("x-csrf-token") or "")
    if not hmac.compare_digest(given.encode(), view.csrf.encode()):
        raise HTTPException(403, "missing or wrong CSRF token; reload the page and try again")
    return form


def _projects_filter(view, project: str | None) -> list[str] | None:
    from total_recall.search import resolve_projects

    return view.run(resolve_projects, project, not project, None)


def timeline(view):
    def load(db, days: int, projects: list[str] | None) -> list[dict]:
        return digest.recent(db, days=days, projects=projects)

    async def handler(request: Request) -> Response:
        project = request.query_params.get("project") or None
        days = _int(request.query_params.get("days"), TIMELINE_DAYS, 1, MAX_DAYS)
        projects = await run_in_threadpool(_projects_filter, view, project)
        entries = await run_in_threadpool(view.run, load, days, projects)
        return view.page(
            request,
            "timeline.html",
            entries=entries,
            days=days,
            project=project or "",
            projects=await run_in_threadpool(view.projects),
            forgot=request.query_params.get("forgot"),
        )

    return handler


def _search_args(request: Request) -> dict:
    q = request.query_params
    return {
        "query": q.get("q", ""),
        "project": q.get("project") or None,
        "session": q.get("session") or None,
        "since": q.get("since") or None,
        "until": q.get("until") or None,
        "intent": q.get("intent") or None,
        "k": _int(q.get("k"), 20, 1, 100),
        "all_projects": not q.get("project"),
    }


def _search(view, args: dict) -> dict:
    return view.run(
        lambda db: browse.search(
            db,
            view.settings,
            view.embedder,
            args["query"],
            cwd="/",
            **{k: v for k, v in args.items() if k != "query"},
        )
    )


def search_page(view):
    async def handler(request: Request) -> Response:
        args = _search_args(request)
        answer, error = {"results": [], "notes": []}, None
        if args["query"].strip():
            try:
                answer = await run_in_threadpool(_search, view, args)
            except TotalRecallError as exc:
                error = str(exc)
        return view.page(
            request,
            "search.html",
            args=args,
            results=answer["results"],
            notes=answer["notes"],
            error=error,
            projects=await run_in_threadpool(view.projects),
        )

    return handler


def memory_page(view):
    async def handler(request: Request) -> Response:
        m = await run_in_threadpool(view.run, browse.get_memory, request.path_params["id"])
        return view.page(request, "memory.html", m=m, done=request.query_params.get("done"))

    return handler


def pin(view, pinned: bool):
    async def handler(request: Request) -> Response:
        await _checked_form(view, request)
        idea_id = request.path_params["id"]
        await run_in_threadpool(view.run, curate.pin, idea_id, pinned)
        return RedirectResponse(
            f"/memory/{idea_id}?done={'pinned' if pinned else 'unpinned'}", status_code=303
        )

    return handler


def edit(view):
    async def handler(request: Request) -> Response:
        form = await _checked_form(view, request)
        idea_id = request.path_params["id"]
        await run_in_threadpool(view.run, curate.edit, idea_id, str(form.get("text") or ""))
        return RedirectResponse(f"/memory/{idea_id}?done=edited", status_code=303)

    return handler


def forget(view):
    async def handler(request: Request) -> Response:
        idea_id = request.path_params["id"]
        if request.method == "GET":
            preview = await run_in_threadpool(view.run, browse.forget_preview, idea_id)
            return view.page(request, "forget.html", m=preview)
        form = await _checked_form(view, request)
        if form.get("confirm") != "yes":
            return RedirectResponse(f"/memory/{idea_id}", status_code=303)
        await run_in_threadpool(view.run, curate.forget, idea_id)
        return RedirectResponse(f"/?forgot={idea_id}", status_code=303)

    return handler


def session_page(view):
    def load(db, sid: str) -> dict:
        sessions = report.topics(db, sid)
        if not sessions:
            # No topics (nothing was extracted: tool output, a compaction summary): its lines.
            lines = [{**r, "message_kind": r["kind"]} for r in memories.session_lines(db, sid)]
            if not lines:
                raise NotFound(f"no session {sid!r}")
            title = memories.session_titles(db, [sid]).get(sid)
            prs = memories.session_prs(db, [sid]).get(sid, [])
            session = {"session": sid, "title": title, "prs": prs, "spans": []}
            return {"session": session, "ideas": {}, "lines": lines}
        ideas: dict[int | None, list[dict]] = {}
        for row in memories.session_ideas(db, sid):
            ideas.setdefault(row["span_id"], []).append(
                {
                    "id": row["id"],
                    "intent": row["intent"],
                    "content": row["content"],
                    "line": row["source_line"],
                }
            )
        return {"session": sessions[0], "ideas": ideas, "lines": []}

    async def handler(request: Request) -> Response:
        data = await run_in_threadpool(view.run, load, request.path_params["sid"])
        return view.page(request, "session.html", **data)

    return handler


def entity_page(view):
    async def handler(request: Request) -> Response:
        entity = await run_in_threadpool(view.run, browse.entity_memories, request.path_params["id"])
        return view.page(request, "entity.html", entity=entity)

    return handler


def graph_page(view):
    async def handler(request: Request) -> Response:
        return view.page(
            request,
            "graph.html",
            project=request.query_params.get("project") or "",
            projects=await run_in_threadpool(view.projects),
        )

    return handler


def review_page(view):
    async def handler(request: Request) -> Response:
        items = await run_in_threadpool(view.run, curate.proposals)
        return view.page(request, "review.html", items=items, done=request.query_params.get("done"))

    return handler


def decide(view):
    async def handler(request: Request) -> Response:
        await _checked_form(view, request)
        decision = request.path_params["decision"]
        if decision not in ("apply", "reject"):
            raise HTTPException(404, "unknown decision")
        result = await run_in_threadpool(
            view.run, curate.decide, request.path_params["id"], decision == "apply"
        )
        return RedirectResponse(f"/review?done={result['state']}", status_code=303)

    return handler


def api_search(view):
    async def handler(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(_search, view, _search_args(request)))

    return handler


def api_memory(view):
    async def handler(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(view.run, browse.get_memory, request.path_params["id"]))

    return handler


def api_graph(view):
    async def handler(request: Request) -> Response:
        projects = await run_in_threadpool(
            _projects_filter, view, request.query_params.get("project") or None
        )
        limit = _int(request.query_params.get("limit"), 120, 10, 500)
        return JSONResponse(await run_in_threadpool(view.run, browse.entity_graph, projects, limit))

    return handler


def error_handlers(view) -> dict:
    def render(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return view.page(request, "error.html", status=status, status_code=status, message=message)

    async def not_found(request: Request, exc: Exception) -> Response:
        return render(request, 404, str(exc))

    async def user_error(request: Request, exc: Exception) -> Response:
        return render(request, 400, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        return render(request, getattr(exc, "status_code", 500), getattr(exc, "detail", "") or "error")

    return {NotFound: not_found, TotalRecallError: user_error, HTTPException: http_error}
