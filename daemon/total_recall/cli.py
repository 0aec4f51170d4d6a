"""The `total-recall` command: each subcommand parses options and calls one library function.

Domain errors become one line on stderr and a non-zero exit; no tracebacks for user errors.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from total_recall import __version__, locations
from total_recall.errors import TotalRecallError

TYPE_CHECKING = False  # typing itself is not imported on the warm search path (I58)
if TYPE_CHECKING:
    import argparse


class _Config:
    """`config`, imported when a command first reads a setting: the warm search path needs only
    the socket's path (`locations`), and the settings module costs a third of the interpreter's
    start-up (its dataclasses import `inspect` and `ast`; I58)."""

    def __getattr__(self, name: str) -> object:
        from total_recall import config as module

        return getattr(module, name)


config = _Config()

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn):
        COMMANDS[name] = fn
        return fn

    return register


def _db():
    from total_recall import db

    return db.connect(settings=config.load())


def _store():
    """The memory store: memory.db, or the PostgreSQL store that [store] url names (the work
    queue, daemon status and recovery stay on the local file: `_db`)."""
    from total_recall import db

    return db.open_store(config.load())


def _require_home() -> None:
    """A command that only reads memory refuses a home with no database instead of creating one: a
    mistyped TOTAL_RECALL_HOME made a new empty home whose zero counts read as lost memory."""
    path = config.paths().db
    if not path.exists() and not config.load().store.url:  # a shared store's memory is on its server
        raise TotalRecallError(
            f"no memory database at {path}; run `total-recall up` (or `total-recall init`) to set up "
            "the memory, then index with `total-recall backfill`"
        )


def _print(data: object, as_json: bool, render: Callable[[object], str] | None = None) -> None:
    if as_json or render is None:
        print(json.dumps(data, indent=None if as_json else 2, ensure_ascii=False, default=str))
    else:
        print(render(data))


def _kv(data: dict, indent: str = "") -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines.append(f"{indent}{key}:")
            lines.append(_kv(value, indent + "  "))
        elif isinstance(value, list) and value and len(repr(value)) > 100:
            # a long list (the memories a dry run of forget would take) one item a line, not a repr
            lines.append(f"{indent}{key}:")
            lines += [f"{indent}  - {item}" for item in value]
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)


@command("init")
def cmd_init(args) -> int:
    from total_recall import bootstrap

    _print(bootstrap.init(), args.json, _kv)
    return 0


@command("up")
def cmd_up(args) -> int:
    from total_recall import bootstrap

    _print(bootstrap.up(backfill=not args.no_backfill, service=not args.no_service), args.json, _kv)
    return 0


@command("doctor")
def cmd_doctor(args) -> int:
    from total_recall import report

    settings = config.load()
    database, error = None, None
    try:
        database = _db()
    except TotalRecallError as exc:  # e.g. a schema newer than this code
        error = str(exc)
    except Exception as exc:
        if type(exc).__name__ not in {"OperationalError", "DatabaseError"}:  # any DB-API driver's
            raise
        error = str(exc)
    _print(report.doctor(database, settings, load_embedder=not args.fast, db_error=error), args.json, _kv)
    return 0


@command("recover")
def cmd_recover(args) -> int:
    from total_recall import recover

    _print(recover.recover(), args.json, _kv)
    return 0


@command("stats")
def cmd_stats(args) -> int:
    _require_home()
    from total_recall import db, report

    settings = config.load()
    database = db.connect(settings=settings)
    store = db.memory_store_for(settings, database)  # the file itself when there is no [store] url
    try:
        _print(report.stats(database, settings, store), args.json, _kv)
    finally:
        if store is not database:
            store.close()
        database.close()
    return 0


@command("status")
def cmd_status(args) -> int:
    from total_recall import report

    _print(report.status(_db()), args.json, lambda d: _kv(report.readable_times(d)))
    return 0


@command("topics")
def cmd_topics(args) -> int:
    _require_home()
    from total_recall import render, report

    sessions = report.topics(_store(), args.session)
    if args.session and not sessions and not args.json:
        # A session of tool output or summaries only: not "nothing indexed yet".
        print(f"No topics for session {args.session}: no memory was drawn from it; search finds its lines.")
        return 0
    _print(sessions, args.json, render.topics_markdown)
    return 0


@command("daemon")
def cmd_daemon(args) -> int:
    from total_recall import daemon, log

    log.configure(args.log_level)
    return daemon.run_daemon(once=args.once)


@command("install")
def cmd_install(args) -> int:
    from total_recall import install

    result = install.install()
    _print(result.__dict__, args.json, _kv)
    return 0


@command("uninstall")
def cmd_uninstall(args) -> int:
    from total_recall import daemon, install, service

    result = install.uninstall().__dict__
    if service.is_installed():
        result["service"] = service.uninstall_service().message
    result["daemon"] = daemon.stop_running(config.paths())  # nothing of ours keeps running
    _print(result, args.json, _kv)
    return 0


@command("stop")
def cmd_stop(args) -> int:
    from total_recall import daemon

    _print(daemon.stop_running(config.paths(), timeout=args.timeout), args.json, _kv)
    return 0


@command("restart")
def cmd_restart(args) -> int:
    from total_recall import bootstrap, daemon, service

    stopped = daemon.stop_running(config.paths(), timeout=args.timeout)
    _print({"stopped": stopped, **bootstrap.ensure_daemon(service=service.is_installed())}, args.json, _kv)
    return 0


@command("service")
def cmd_service(args) -> int:
    from total_recall import service

    actions = {
        "install": service.install_service,
        "uninstall": service.uninstall_service,
        "status": service.service_status,
    }
    result = actions[args.action]()
    _print(result if isinstance(result, dict) else result.__dict__, args.json, _kv)
    return 0


@command("backfill")
def cmd_backfill(args) -> int:
    from total_recall import backfill

    drawn: list[int] = []

    def bar(done: int, total: int, started: float) -> None:
        drawn.append(done)
        _progress_bar(done, total, started)

    result = backfill.backfill(
        config.load(),
        args.path,
        all_transcripts=args.all,
        session=args.session,
        wait=args.wait,
        progress=bar if sys.stderr.isatty() and not args.json else None,
    )
    if drawn:
        sys.stderr.write("\n")  # the bar's line is finished before the summary
    _print(result, args.json, _kv)
    return 0


def _progress_bar(done: int, total: int, started: float) -> None:
    """backfill --wait on a terminal: one redrawn line with the files done, elapsed time and ETA."""
    import time

    width = 30
    filled = int(width * done / max(1, total))
    elapsed = time.time() - started
    eta = (elapsed / done * (total - done)) if done else 0
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} transcripts  "
        f"elapsed {elapsed:4.0f}s  ETA {eta:4.0f}s"
    )
    sys.stderr.flush()


@command("retry")
def cmd_retry(args) -> int:
    from total_recall import queue

    _print({"requeued": queue.retry_parked(_db())}, args.json, _kv)
    return 0


@command("reembed")
def cmd_reembed(args) -> int:
    from total_recall import vectors

    _print(vectors.reembed(_store(), config.load()), args.json, _kv)
    return 0


@command("search")
def cmd_search(args) -> int:
    # The warm path (a daemon answers) imports only the standard library: this module, locations
    # and client (DESIGN.md I58). Everything else, settings included, loads only when searching
    # in-process.
    from total_recall import client

    if args.queries:
        _configure_log()
        from total_recall import search

        for line in search.run_queries_file(
            config.load(), Path(args.queries), all_projects=args.all_projects, k=args.k
        ):
            print(json.dumps(line, default=str))  # ASCII escapes: any query text survives stdout
        return 0
    if not " ".join(args.query or ()).strip():  # `search ""` too: as the MCP server and web view say
        raise TotalRecallError("search needs a QUERY or --queries FILE")
    request = client.request(
        " ".join(args.query),
        k=args.k,
        project=args.project,
        all_projects=args.all_projects,
        hyde=args.hyde,
        session=args.session,
        current_session=args.current_session,
    )
    try:
        answer = client.exchange(locations.paths().socket, request)
    except TimeoutError as exc:
        _configure_log()
        client.log_timeout(exc)
        answer = None
    if answer is None:
        # Trigger: no daemon answered. Why: search must work without one. Outcome: the same
        # search in this process (model load and all).
        _configure_log()
        from total_recall import server

        _require_home()
        answer = server.in_process(config.load(), request)
    found = client.result(answer)
    for note in found["notes"]:
        print(f"total-recall: note: {note}", file=sys.stderr)
    if args.json:
        _print(found["results"], True)
    else:
        from total_recall import query, render

        # An overview over time ("summarize the auth work", "in what order did we ...") reads as a
        # timeline: its topics in the order they happened.
        in_time = query.OVERVIEW.search(request["query"]) is not None
        _print(found["results"], False, lambda rs: render.results_markdown(rs, in_time=in_time))
    return 0


@command("pin")
def cmd_pin(args) -> int:
    from total_recall import curate

    _print(curate.pin(_store(), args.id, True), args.json, _kv)
    return 0


@command("unpin")
def cmd_unpin(args) -> int:
    from total_recall import curate

    _print(curate.pin(_store(), args.id, False), args.json, _kv)
    return 0


@command("edit")
def cmd_edit(args) -> int:
    from total_recall import curate

    database = _store()
    result = curate.edit(database, args.id, args.text)
    result["embedded"] = curate.embed_now(database, config.load(), args.id)  # searchable by meaning at once
    _print(result, args.json, _kv)
    return 0


@command("forget")
def cmd_forget(args) -> int:
    from total_recall import curate

    database = _store()
    session = args.session
    if session:  # the short id that search and topics print works here too (a title does not: it erases)
        from total_recall.errors import NotFound
        from total_recall.search import resolve_session
        from total_recall.transcript import UUID_SHAPE

        try:
            session = resolve_session(database, session, by_title=False)
        except NotFound:
            # Trigger: a whole session id of nothing indexed yet (queued, or never read). Why: the
            # option forgets "also what is not indexed yet". Outcome: its tombstone is set, so none of
            # it is ever indexed; a short or mistyped id is still refused.
            if not UUID_SHAPE.fullmatch(session.strip()):
                raise
            session = session.strip()
    _print(
        curate.forget(
            database, args.id, session=session, project=args.project, before=args.before, dry_run=args.dry_run
        ),
        args.json,
        _kv,
    )
    return 0


@command("pause")
def cmd_pause(args) -> int:
    from total_recall import trust

    _print(trust.pause(_store(), parse_duration(args.for_) if args.for_ else None), args.json, _kv)
    return 0


@command("resume")
def cmd_resume(args) -> int:
    from total_recall import trust

    _print(trust.resume(_store()), args.json, _kv)
    return 0


def parse_duration(text: str) -> float:
    """Seconds in "90s", "45m", "2h", "1d" or "1h30m"."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhd])", text.strip().lower())
    if not parts or re.sub(r"[\d.\s smhd]", "", text.lower()):
        raise TotalRecallError(f"--for takes a duration like 30m, 2h or 1d, not {text!r}")
    return sum(float(n) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[u] for n, u in parts)


@command("review")
def cmd_review(args) -> int:
    from total_recall import curate, render

    database = _store()
    if args.apply or args.reject:
        _print(curate.decide(database, args.apply or args.reject, apply=bool(args.apply)), args.json, _kv)
    else:
        _print(curate.proposals(database), args.json, render.proposals_markdown)
    return 0


@command("digest")
def cmd_digest(args) -> int:
    _require_home()
    from total_recall import digest, search

    database = _store()
    projects = search.resolve_projects(database, args.project, False, None)
    if not projects:
        raise TotalRecallError("not inside an indexed project; name one: total-recall digest PROJECT")
    text = digest.digests_of(database, projects, args.branch)
    _print({"projects": projects, "digest": text}, args.json, lambda d: d["digest"])
    return 0


@command("recent")
def cmd_recent(args) -> int:
    _require_home()
    from total_recall import digest, render, search

    database = _store()
    projects = None if args.all_projects else search.resolve_projects(database, args.project, False, None)
    _print(digest.recent(database, days=args.days, projects=projects), args.json, render.recent_markdown)
    return 0


@command("maintain")
def cmd_maintain(args) -> int:
    from total_recall import maintain

    _print(maintain.maintain(_store(), config.load()), args.json, _kv)
    return 0


@command("note")
def cmd_note(args) -> int:
    from total_recall import note

    result = note.note(
        _store(),
        " ".join(args.text),
        intent=args.intent,
        pin=args.pin,
        session=args.session,
        project=args.project,
        settings=config.load(),
    )
    _print(result, args.json, _kv)
    return 0


@command("export")
def cmd_export(args) -> int:
    _require_home()
    from total_recall import exchange, search

    database = _store()
    projects = search.resolve_projects(database, args.project, False, None) if args.project else None
    machine = config.load().machine_name()
    counts = exchange.export(
        database, sys.stdout, projects=projects, since=args.since, with_vectors=args.vectors, machine=machine
    )
    print(f"total-recall: exported {_kv(counts).replace(chr(10), ', ')}", file=sys.stderr)
    return 0


@command("import")
def cmd_import(args) -> int:
    from total_recall import exchange

    _print(exchange.import_file(_store(), config.load(), Path(args.file)), args.json, _kv)
    return 0


@command("migrate-store")
def cmd_migrate_store(args) -> int:
    from total_recall import exchange

    _print(exchange.migrate_store(_db(), config.load(), args.url), args.json, _kv)
    return 0


@command("mcp")
def cmd_mcp(args) -> int:
    from total_recall import mcp_server

    return mcp_server.serve()


@command("ui")
def cmd_ui(args) -> int:
    from total_recall.ui import app

    def announce(url: str) -> None:
        print(f"total-recall ui: {url}", flush=True)
        print("(it holds this run's token; Ctrl+C stops the server)", flush=True)

    return app.serve(port=args.port, open_browser=not args.no_open, announce=announce)


class _Unused:
    """Stands in for the parser of a command this run does not need (see build_parser)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        pass


def _formatter() -> type:
    """argparse's help formatter, the terminal's width found without `shutil`.

    argparse makes a formatter for every add_argument (to check its metavar), and the stock one
    imports shutil, with zlib, bz2 and lzma, for the width: 1.6 ms of every command."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        def __init__(self, prog: str, **kwargs) -> None:
            kwargs.setdefault("width", _columns() - 2)  # as the stock formatter narrows it
            super().__init__(prog, **kwargs)

    return Formatter


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size tells it: $COLUMNS, else stdout's, else 80."""
    try:
        if int(os.environ.get("COLUMNS", "")) > 0:
            return int(os.environ["COLUMNS"])
    except ValueError:
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


MAX_DAYS = 36_500  # a century: further back overflows no calendar, and nothing is older


def _days(text: str) -> int:
    """`recent --days`: a whole number of days from 1 to MAX_DAYS (a bigger one overflowed the
    calendar; 0 or a negative listed nothing and said nothing)."""
    import argparse

    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"takes a number of days from 1 to {MAX_DAYS}, not {text!r}")
    return days


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, that one command's parser and no other.

    `main` passes the command named on the command line: `total-recall search` (what /remember
    runs) then builds one subparser instead of 35, a few milliseconds of every call.
    """
    import argparse

    formatter = _formatter()
    parser = argparse.ArgumentParser(
        prog="total-recall", description="Long-term memory for Claude Code.", formatter_class=formatter
    )
    parser.add_argument("--version", action="version", version=f"total-recall {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        if only is not None and name != only:
            return _Unused()  # type: ignore[return-value]
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=formatter)
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        return p

    add("init", "create the home folder, config.toml and the database")
    p = add("up", "set everything up on the embedded default: init, hooks, skills, service, backfill")
    p.add_argument("--no-backfill", action="store_true", help="do not queue existing transcripts")
    p.add_argument("--no-service", action="store_true", help="start no background daemon")
    add(
        "recover",
        "salvage a damaged database into a new one (the old one is kept) and re-queue every transcript",
    )
    p = add("doctor", "check SQLite, FTS5, sqlite-vec, the embedder, the endpoint, hooks and the daemon")
    p.add_argument("--fast", action="store_true", help="do not load the embedding model")
    add("stats", "counts of memories, queue, LLM usage and database size")
    add("status", "whether the daemon runs, its queue and last error")
    p = add("topics", "the span tree (topics) of one session or of recent sessions")
    p.add_argument("session", nargs="?", help="a session id (default: recent sessions)")
    p = add("daemon", "run the indexing daemon in the foreground")
    p.add_argument("--once", action="store_true", help="drain the queue and exit")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")
    add("install", "add the hooks to Claude Code's settings.json and install the skills")
    add("uninstall", "remove exactly what install added, the service, and stop the daemon")
    p = add("stop", "stop the daemon of this home, however it was started; remove a stale socket")
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to let it finish a batch (then SIGKILL)"
    )
    p = add("restart", "stop the daemon and start it again (as a service when one is installed)")
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to let it finish a batch (then SIGKILL)"
    )
    p = add("service", "manage the systemd user service / launchd agent that runs the daemon")
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p = add("backfill", "queue transcripts for indexing: the current session, a file, a folder or --all")
    p.add_argument("path", nargs="?", help="a transcript file or a folder of transcripts")
    p.add_argument("--all", action="store_true", help="every transcript under $CLAUDE_CONFIG_DIR/projects")
    p.add_argument("--session", help="the transcript of this session id")
    p.add_argument(
        "--wait", action="store_true", help="wait until indexed (drains in-process without a daemon)"
    )
    add("retry", "put parked queue items back in the queue")
    add("reembed", "rebuild every vector with the configured embedding model (resumable)")
    p = add("search", "search the memory (what /remember uses)")
    p.add_argument("query", nargs="*", help="what to look for")
    p.add_argument("-k", type=int, default=None, help="how many results (default from settings)")
    p.add_argument(
        "--project", help="a project directory or its short name (default: the current directory's)"
    )
    p.add_argument("--all-projects", action="store_true", help="search every project")
    p.add_argument("--hyde", action="store_true", help="also search a hypothetical answer written by the LLM")
    p.add_argument("--session", help="only memories of this session (full id or the short id printed)")
    p.add_argument(
        "--current-session",
        help="the session asking (the /remember skill passes it): "
        '"where did we leave off" asks about the one before',
    )
    p.add_argument("--queries", help="a JSONL file of {query, project, k}; prints one JSON line per query")
    p = add("pin", "pin a memory: core tier, never changed by the extractor, listed first at session start")
    p.add_argument("id", type=int)
    p = add("unpin", "unpin a memory")
    p.add_argument("id", type=int)
    p = add("edit", "correct the text of a memory (the change is logged)")
    p.add_argument("id", type=int)
    p.add_argument("text")
    p = add(
        "forget",
        "remove memories and every copy of their text; tombstones keep re-indexing from restoring them",
    )
    p.add_argument("id", type=int, nargs="?", help="one memory")
    p.add_argument("--session", help="everything of this session (also what is not indexed yet)")
    p.add_argument(
        "--project", help="everything of this project (a full path when a short name matches several)"
    )
    p.add_argument("--before", help="every memory said before this date (YYYY-MM-DD)")
    p.add_argument("--dry-run", action="store_true", help="show what would be forgotten, change nothing")
    p = add("pause", "stop remembering: what is said from now on is never indexed, even by a later backfill")
    p.add_argument("--for", dest="for_", metavar="DURATION", help="resume by itself after e.g. 30m, 2h, 1d")
    add("resume", "remember again after `total-recall pause`")
    p = add("review", "list changes the extractor proposed to pinned memories; apply or reject them")
    p.add_argument("--apply", type=int, metavar="ID", help="apply proposal ID")
    p.add_argument("--reject", type=int, metavar="ID", help="reject proposal ID")
    p = add("digest", "print the readable digest of a project: decisions, conventions, open questions, fixes")
    p.add_argument("project", nargs="?", help="directory or short name (default: the current directory's)")
    p.add_argument("--branch", help="only memories from this git branch")
    p = add("recent", "what happened per project and day (a standup), in local time")
    p.add_argument("--days", type=_days, default=7, help=f"how many days back, 1 to {MAX_DAYS} (default 7)")
    p.add_argument("--project", help="directory or short name (default: the current directory's)")
    p.add_argument("--all-projects", action="store_true")
    p = add("note", "remember something now: stored with its session and project, searchable at once")
    p.add_argument("text", nargs="+", help="what to remember")
    p.add_argument(
        "--intent",
        default="context",
        metavar="INTENT",
        choices=("decision", "conclusion", "question", "problem", "solution", "todo", "context"),
        help="decision, conclusion, question, problem, solution, todo or context (default)",
    )
    p.add_argument("--pin", action="store_true", help="pin it (core tier, listed first at session start)")
    p.add_argument("--session", help="the session it was said in (default: none)")
    p.add_argument(
        "--project", help="directory or short name (default: the session's or the current directory's)"
    )
    p = add("export", "write memories as JSON lines to stdout (ideas, sources, spans, relations, tombstones)")
    p.add_argument("--project", help="only this project (a directory or its short name; default: all)")
    p.add_argument("--since", metavar="DATE", help="only memories said on or after DATE (YYYY-MM-DD)")
    p.add_argument("--vectors", action="store_true", help="include each idea's vector (and the model's name)")
    p = add(
        "import", "merge an export file into this memory: duplicates add mentions, forgotten stays forgotten"
    )
    p.add_argument("file", help="a file written by `total-recall export`")
    p = add(
        "migrate-store",
        "copy this machine's memories into a PostgreSQL store and switch this setup to it ([store] url)",
    )
    p.add_argument("url", help="postgresql://user:password@host/database (the server needs pgvector)")
    add(
        "mcp",
        "run the MCP server on stdio (Claude Code starts it; tools: search, get, recent, digest, topics, "
        "note)",
    )
    p = add("ui", "open the local web view: timeline, search, memories, topics, entity graph, review")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-open", action="store_true", help="print the URL instead of opening a browser")
    add(
        "maintain",
        "merge duplicates, refresh summaries, embed what lacks vectors, check and optimise, archive",
    )
    return parser


# Commands that configure logging themselves, only on the paths that may log: the warm search
# path must not import structlog (and asyncio with it) before the daemon has answered.
SELF_CONFIGURING = {"search"}


def _configure_log() -> None:
    from total_recall import log

    log.configure("warning")  # stdout carries results only; the daemon reconfigures for itself


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# The search the /remember skill runs (`search --json -k 12 --current-session ID QUERY`), read
# without argparse, whose import and parser are ~2.5 ms of a ~40 ms warm search (I58). Anything
# else (--help, another or abbreviated option, --opt=value, a word starting with "-", words on
# both sides of an option) is argparse's, which reads every argv this accepts the same way.
SEARCH_SWITCHES = {"--json": "json", "--all-projects": "all_projects", "--hyde": "hyde"}
SEARCH_VALUES = {
    "-k": "k",
    "--project": "project",
    "--session": "session",
    "--current-session": "current_session",
}


def plain_search(argv: list[str]) -> SimpleNamespace | None:
    """The arguments of a plain `search` command line as argparse would give them, else None."""
    if not argv or argv[0] != "search":
        return None
    args: dict = {"command": "search", "query": [], "queries": None}
    args.update(dict.fromkeys(SEARCH_SWITCHES.values(), False))
    args.update(dict.fromkeys(SEARCH_VALUES.values(), None))
    runs, previous_was_word, tokens = 0, False, iter(argv[1:])
    for token in tokens:
        if token in SEARCH_SWITCHES:
            args[SEARCH_SWITCHES[token]], previous_was_word = True, False
        elif token in SEARCH_VALUES:
            value = next(tokens, None)
            if value is None or value.startswith("-") or (token == "-k" and not value.isdecimal()):
                return None
            args[SEARCH_VALUES[token]] = int(value) if token == "-k" else value
            previous_was_word = False
        elif token.startswith("-"):
            return None
        else:
            runs += not previous_was_word
            previous_was_word = True
            args["query"].append(token)
    return SimpleNamespace(**args) if runs <= 1 else None


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = plain_search(given)
    if args is None:
        parser = build_parser(only=given[0] if given and given[0] in COMMANDS else None)
        args = parser.parse_args(given)
        if not args.command:
            parser.print_help()
            return 2
    os.umask(0o077)  # whatever the user's umask, every file we create is private
    if args.command not in SELF_CONFIGURING:
        _configure_log()
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at exit
        return code
    except TotalRecallError as exc:
        print(f"total-recall: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Trigger: the reader went away (`total-recall status | head -2`). Why: that is not an
        # error of ours. Outcome: quiet exit; stdout goes to /dev/null so the final flush is silent.
        _silence_stdout()
        return 1
    except Exception as exc:
        if type(exc).__name__ in {"OperationalError", "DatabaseError"}:  # any DB-API driver's
            print(f"total-recall: database error: {exc}", file=sys.stderr)
            if any(w in str(exc).lower() for w in ("malformed", "not a database", "corrupt")):
                from total_recall.salvage import CORRUPT_HINT

                print(f"total-recall: {CORRUPT_HINT}", file=sys.stderr)
            return 1
        raise
