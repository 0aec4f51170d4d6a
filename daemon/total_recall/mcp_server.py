"""`total-recall mcp`: the memory as MCP tools for Claude Code, over stdio.

Built on the official MCP Python SDK (imported here, lazily from the CLI, so hooks and `--help`
never load it). Tools share the CLI's library functions: search goes to the daemon's warm socket
when it runs and otherwise searches in this process with an embedder kept warm between calls.
Every result is compact text with `file:line` sources plus the same data as structured content.
A domain error becomes a tool error with a readable message; the server keeps running.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations, which use local names.
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any

import structlog

from total_recall import config
from total_recall.errors import TotalRecallError

log = structlog.get_logger(__name__)

SETUP_HINT = (
    "run `total-recall up` (or `total-recall init`) to set up the memory, "
    "then index with `total-recall backfill`"
)
MAX_K = 50
INSTRUCTIONS = (
    "total-recall is the long-term memory of past Claude Code conversations: decisions, conclusions, "
    "questions, problems, solutions, todos and context, each with its transcript source (file:line). "
    "Use `search` when the user refers to earlier work, `get` for one memory's sources and history, "
    "`recent` for a standup, `digest` for a project's overview, `topics` for a session's outline and "
    "`note` to remember something the user asks to keep."
)


class Memory:
    """The server's state: one database connection and one warm embedder, opened on first use."""

    def __init__(self) -> None:
        self.settings = config.load()
        self._db = None
        self._embedder: Any = None
        self.lock = threading.Lock()  # tools run in worker threads; the connection is used by one at a time

    @property
    def cwd(self) -> str:
        return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()

    def db(self):
        if self._db is None:
            path = config.paths().db
            if not path.exists():  # also with a [store] url: no local queue means not set up here
                raise TotalRecallError(f"no memory database at {path}; {SETUP_HINT}")
            from total_recall import db as dbmod

            self._db = dbmod.open_store(self.settings)  # memory.db or the [store] url's PostgreSQL
        return self._db

    def embedder(self):
        if self._embedder is None:
            from total_recall.search import local_embedder

            self._embedder = local_embedder(self.settings)
        return self._embedder

    def projects(self, project: str | None, all_projects: bool = False) -> list[str] | None:
        from total_recall.search import resolve_projects

        return resolve_projects(self.db(), project, all_projects, self.cwd)


# -- text rendering ---------------------------------------------------------------------------
def _src(file: str, line: int | None) -> str:
    return f"{file}:{line}"


def results_text(results: list[dict], notes: list[str]) -> str:
    from total_recall.render import shorten

    if not results:
        return "No memories found." + "".join(f"\nnote: {n}" for n in notes)
    lines = []
    for r in results:
        if r["kind"] == "span":
            lines.append(
                f"[topic] {r['name']}: {shorten(r['summary'], 200)} ({r['source_file']}:{r['start_line']}-"
                f"{r['end_line']}, {(r['timestamp'] or '')[:10]})"
            )
            continue
        if r["kind"] == "message":
            # A transcript line without an idea (DESIGN.md I44): no intent, confidence or memory id.
            from total_recall.render import said

            lines.append(
                f"[{said(r)}] {shorten(r['content'], 400)} "
                f"({_src(r['source_file'], r['source_line'])}, {(r['timestamp'] or '')[:10]}){_also(r)}"
            )
            continue
        flags = "".join(
            [
                " pinned" if r.get("pinned") else "",
                f" superseded-by #{r['superseded_by'][0]}" if r.get("superseded_by") else "",
            ]
        )
        lines.append(
            f"#{r['id']} [{r['intent']} {r['confidence']:.2f}{flags}] {shorten(r['content'], 400)} "
            f"({_src(r['source_file'], r['source_line'])}, {(r['timestamp'] or '')[:10]}){_also(r)}"
        )
    return "\n".join(lines + [f"note: {n}" for n in notes])


def _also(r: dict) -> str:
    """' also at file:line' for the other places a result's text was said, or ''."""
    from total_recall.render import other_places

    others = other_places(r)
    if not others:
        return ""
    more = f" (+{len(others) - 1} more)" if len(others) > 1 else ""
    return f" also at {_src(others[0]['source_file'], others[0]['source_line'])}{more}"


def memory_text(m: dict) -> str:
    from total_recall.render import shorten

    out = [
        f"#{m['id']} [{m['intent']} {m['confidence']:.2f}{' pinned' if m['pinned'] else ''}] {m['content']}",
        f"project {m['project']} · session {m['session_id']} · {(m['message_time'] or '')[:19]} · "
        f"mentioned {m['mention_count']}x",
    ]
    if m["topic"]:
        out.append(f"topic: {m['topic']['name']}")
    if m["entities"]:
        out.append("entities: " + ", ".join(m["entities"]))
    for rel in m["relations"]:
        arrow = "→" if rel["direction"] == "out" else "←"
        out.append(f"{rel['type']} {arrow} #{rel['id']}: {shorten(rel['content'], 160)}")
    if m["chain"]:
        out.append(
            "evolution: " + " → ".join(f"#{c['id']}" + ("*" if c["current"] else "") for c in m["chain"])
        )
    for s in m["sources"]:
        out.append(f"source {_src(s['source_file'], s['source_line'])} ({(s['timestamp'] or '')[:19]})")
        for line in s["excerpt"]:
            mark = ">" if line["is_source"] else " "
            out.append(f"  {mark} {line['line']} {line['role']}: {shorten(line['content'], 300)}")
    return "\n".join(out)


def topics_text(sessions: list[dict]) -> str:
    from total_recall.render import topics_markdown

    return topics_markdown(sessions)


def recent_text(days: list[dict]) -> str:
    from total_recall.render import recent_markdown

    return recent_markdown(days)


# -- the tools, as plain functions over Memory (the server wraps them) -------------------------
def do_search(
    mem: Memory,
    query: str,
    project: str | None = None,
    session: str | None = None,
    since: str | None = None,
    until: str | None = None,
    intent: str | None = None,
    k: int = 10,
    all_projects: bool = False,
) -> dict:
    from total_recall import browse

    return browse.search(
        mem.db(),
        mem.settings,
        mem.embedder,
        query,
        project=project,
        session=session,
        since=since,
        until=until,
        intent=intent,
        k=min(int(k), MAX_K),
        all_projects=all_projects,
        cwd=mem.cwd,
    )


def do_get(mem: Memory, id: int, context_lines: int = 3) -> dict:
    from total_recall import browse

    return browse.get_memory(mem.db(), int(id), max(0, min(int(context_lines), 20)))


def do_recent(mem: Memory, days: int = 7, project: str | None = None, all_projects: bool = False) -> dict:
    from total_recall import digest

    projects = None if all_projects else mem.projects(project)
    return {"days": digest.recent(mem.db(), days=max(1, min(int(days), 365)), projects=projects)}


def do_digest(mem: Memory, project: str | None = None, branch: str | None = None) -> dict:
    from total_recall import digest

    projects = mem.projects(project)
    if not projects:
        raise TotalRecallError("not inside an indexed project; name one with `project`")
    return {
        "projects": projects,
        "digest": digest.digests_of(mem.db(), projects, branch),
    }


def do_topics(mem: Memory, session: str | None = None) -> dict:
    from total_recall import report

    sessions = report.topics(mem.db(), session, limit=10)
    if session and not sessions:
        raise TotalRecallError(f"no topics for session {session!r}")
    return {"sessions": sessions}


def do_note(
    mem: Memory,
    text: str,
    intent: str = "context",
    pin: bool = False,
    session: str | None = None,
    project: str | None = None,
) -> dict:
    from total_recall import note

    return note.note(
        mem.db(),
        text,
        intent=intent,
        pin=pin,
        session=session,
        project=project,
        cwd=mem.cwd,
        settings=mem.settings,
        embedder=mem.embedder(),
    )


def note_text(n: dict) -> str:
    verb = "Stored" if n["created"] else "Already known, counted again:"
    extra = f" ({n['note']})" if n.get("note") else ""
    return (
        f"{verb} #{n['id']} [{n['intent']}{' pinned' if n['pinned'] else ''}] {n['content']} "
        f"({_src(n['source_file'], n['source_line'])}, project {n['project']}){extra}"
    )


# -- the MCP server -----------------------------------------------------------------------------
def build_server(mem: Memory | None = None):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from total_recall import __version__

    mem = mem or Memory()
    app = MCPServer("total-recall", instructions=INSTRUCTIONS, version=__version__)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def call(fn: Callable[..., dict], render: Callable[[dict], str], **kwargs) -> CallToolResult:
        try:
            with mem.lock:
                data = fn(mem, **kwargs)
        except TotalRecallError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:
            if type(exc).__name__ in {"OperationalError", "DatabaseError"}:
                raise ToolError(f"database error: {exc}") from None
            raise
        return CallToolResult(content=[TextContent(type="text", text=render(data))], structured_content=data)

    Project = Annotated[
        str | None,
        Field(description="a project directory or its short name; default: the project Claude Code runs in"),
    ]
    Session = Annotated[str | None, Field(description="a Claude Code session id")]

    @app.tool(annotations=read_only, structured_output=False)
    def search(
        query: Annotated[
            str,
            Field(
                description="what to look for, in plain words; time words ('last week', "
                "'since 2025-05-01'), kinds ('decisions about') and overviews ('summarize the auth "
                "work', 'in what order did we ...': answered by topics) are understood"
            ),
        ],
        project: Project = None,
        session: Annotated[str | None, Field(description="only memories from this session id")] = None,
        since: Annotated[
            str | None, Field(description="only memories said at or after this date (YYYY-MM-DD)")
        ] = None,
        until: Annotated[
            str | None, Field(description="only memories said before this date (YYYY-MM-DD)")
        ] = None,
        intent: Annotated[
            str | None,
            Field(
                description="only this kind: decision, conclusion, question, problem, "
                "solution, todo or context"
            ),
        ] = None,
        k: Annotated[int, Field(description="how many results", ge=1, le=MAX_K)] = 10,
        all_projects: Annotated[bool, Field(description="search every project")] = False,
    ) -> CallToolResult:
        """Search the long-term memory of past Claude Code conversations (hybrid: meaning and keywords).
        Each result has an id, intent, confidence, content, date and its transcript source as file:line."""
        from total_recall.query import OVERVIEW
        from total_recall.render import timeline

        # An overview over time reads as a timeline (as the CLI's text shows it).
        in_time = OVERVIEW.search(query) is not None
        return call(
            do_search,
            lambda d: results_text(timeline(d["results"]) if in_time else d["results"], d["notes"]),
            query=query,
            project=project,
            session=session,
            since=since,
            until=until,
            intent=intent,
            k=k,
            all_projects=all_projects,
        )

    @app.tool(annotations=read_only, structured_output=False)
    def get(
        id: Annotated[
            int,
            Field(
                description="the memory id (#N in search results); a result of kind `message` is a "
                "transcript line, not a memory: its id is no memory id, and its file:line is its source"
            ),
        ],
        context_lines: Annotated[
            int, Field(description="conversation lines shown around each source", ge=0, le=20)
        ] = 3,
    ) -> CallToolResult:
        """One memory in full: its sources with the transcript lines around them, entities, relations
        (supersedes, builds on, answers, contradicts), its evolution chain and its change log."""
        return call(do_get, memory_text, id=id, context_lines=context_lines)

    @app.tool(annotations=read_only, structured_output=False)
    def recent(
        days: Annotated[int, Field(description="how many days back", ge=1, le=365)] = 7,
        project: Project = None,
        all_projects: Annotated[bool, Field(description="every project")] = False,
    ) -> CallToolResult:
        """A standup: per project and day, the topics worked on and the decisions, problems, solutions,
        todos and questions recorded."""
        return call(
            do_recent, lambda d: recent_text(d["days"]), days=days, project=project, all_projects=all_projects
        )

    @app.tool(annotations=read_only, structured_output=False)
    def digest(
        project: Project = None,
        branch: Annotated[str | None, Field(description="only memories from this git branch")] = None,
    ) -> CallToolResult:
        """A project's digest: pinned memories, decisions, conventions, open questions and todos,
        conclusions, and known problems with their fixes, each with its source."""
        return call(do_digest, lambda d: d["digest"], project=project, branch=branch)

    @app.tool(annotations=read_only, structured_output=False)
    def topics(session: Session = None) -> CallToolResult:
        """The topic tree of one session (or of the latest sessions): topics and sub-topics with line
        ranges, summaries and how many memories each holds."""
        return call(do_topics, lambda d: topics_text(d["sessions"]), session=session)

    @app.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
        structured_output=False,
    )
    def note(
        text: Annotated[str, Field(description="one self-contained sentence to remember")],
        intent: Annotated[
            str, Field(description="decision, conclusion, question, problem, solution, todo or context")
        ] = "context",
        pin: Annotated[bool, Field(description="pin it: always listed first at session start")] = False,
        session: Annotated[
            str | None,
            Field(description="the current session id, so the note keeps its place in the conversation"),
        ] = None,
        project: Project = None,
    ) -> CallToolResult:
        """Remember something now (an explicit memory): stored with its session and project and
        searchable at once. Use when the user asks to remember, note or not forget something."""
        return call(do_note, note_text, text=text, intent=intent, pin=pin, session=session, project=project)

    return app


def serve() -> int:
    """Run on stdio until the client closes the connection."""
    build_server().run("stdio")
    return 0
