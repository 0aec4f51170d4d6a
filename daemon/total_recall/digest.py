"""Digests: the budgeted context printed at session start, the readable per-project digest,
and the per-day "standup" of `total-recall recent`.

The daemon writes digests/<key>.md after each batch; the SessionStart hook only reads that file,
so it stays as fast as the enqueue shim. <key> follows the hook's rule (hooks/session_start.py).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from total_recall import config
from total_recall.db import Database
from total_recall.projects import digest_key
from total_recall.projects import short_name as project_name

CONVENTION = re.compile(r"\b(always|never|convention|prefer|we use|must not|style|naming)\b", re.I)


def _branch_key(branch: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", branch)[:80] + "-" + digest_key(branch)[-10:]


def _short(text: str, n: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _where(project: str, branch: str | None) -> tuple[str, tuple]:
    return ("project = ? AND git_branch = ?", (project, branch)) if branch else ("project = ?", (project,))


def _ideas(db: Database, where: str, params: tuple, extra: str, limit: int) -> list[tuple]:
    return db.execute(
        f"SELECT id, content, message_time, source_file, source_line, intent FROM ideas WHERE {where} {extra} "
        f"ORDER BY message_time DESC, id DESC LIMIT ?", (*params, limit)).fetchall()


# A decision another one superseded is history, not the current state.
CURRENT = "id NOT IN (SELECT to_id FROM relations WHERE relation_type = 'supersedes')"


def _bullets(rows: list[tuple], with_source: bool | str) -> list[str]:
    """One line per memory with its date and id; with_source "short" names the file, not its path."""
    out = []
    for r in rows:
        where = Path(r[3]).name if with_source == "short" else r[3]
        src = f" ({where}:{r[4]})" if with_source else ""
        out.append(f"- {_short(r[1])} [{(r[2] or '')[:10]}, #{r[0]}]{src}")
    return out


def _last_session_topics(db: Database, project: str) -> tuple[str | None, list[str]]:
    row = db.one("SELECT session_id, max(ended_at) FROM spans WHERE project = ? AND depth = 0 "
                 "GROUP BY session_id ORDER BY max(ended_at) DESC LIMIT 1", (project,))
    if not row:
        return None, []
    topics = db.execute("SELECT name, summary FROM spans WHERE session_id = ? AND depth = 1 ORDER BY start_line",
                        (row[0],)).fetchall()
    return row[1], [f"- {_short(t[0], 80)}" + (f": {_short(t[1], 160)}" if t[1] else "") for t in topics]


def _remember_command() -> str:
    from total_recall import install

    return install.remember_command()


def context_digest(db: Database, project: str, per_section: int = 6) -> str:
    """What Claude gets at session start, most important first (the hook cuts at its budget)."""
    where, params = _where(project, None)
    sections = [
        ("Pinned", _ideas(db, where, params, "AND pinned = 1", per_section)),
        ("Open questions", _ideas(db, where, params, "AND intent = 'question' AND answered = 0", per_section)),
        ("Todos", _ideas(db, where, params, "AND intent = 'todo' AND closed_source_line IS NULL", per_section)),
        ("Latest decisions", _ideas(db, where, params, f"AND intent = 'decision' AND {CURRENT}", per_section)),
    ]
    lines = [f"# Memory of project {project_name(project) or project} (total-recall)",
             f"Use {_remember_command()} <query> for more."]
    for title, rows in sections:
        if rows:
            lines += [f"## {title}", *_bullets(rows, with_source="short")]
    when, topics = _last_session_topics(db, project)
    if topics:
        lines += [f"## Last session ({(when or '')[:10]}) topics", *topics[:per_section]]
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def project_digest(db: Database, project: str, branch: str | None = None, limit: int = 15) -> str:
    """The human-readable digest: summary, decisions, conventions, open questions, problems and fixes."""
    where, params = _where(project, branch)
    title = project_name(project) + (f" @ {branch}" if branch else "")
    stats = db.one(f"SELECT count(*), count(DISTINCT session_id), min(message_time), max(message_time) "
                   f"FROM ideas WHERE {where}", params)
    out = [f"# {title}", "",
           f"{stats[0]} memories from {stats[1]} sessions, {(stats[2] or '')[:10]} to {(stats[3] or '')[:10]}.", ""]
    decisions = _ideas(db, where, params, f"AND intent = 'decision' AND {CURRENT}", limit)
    conventions = [r for r in _ideas(db, where, params, "AND intent IN ('decision', 'conclusion', 'context')", 300)
                   if CONVENTION.search(r[1])][:limit]
    sections = [
        ("Pinned", _ideas(db, where, params, "AND pinned = 1", limit)),
        ("Decisions", decisions),
        ("Conventions", conventions),
        ("Open questions", _ideas(db, where, params, "AND intent = 'question' AND answered = 0", limit)),
        ("Open todos", _ideas(db, where, params, "AND intent = 'todo' AND closed_source_line IS NULL", limit)),
        ("Conclusions", _ideas(db, where, params, "AND intent = 'conclusion'", limit)),
    ]
    for name, rows in sections:
        if rows:
            out += [f"## {name}", *_bullets(rows, with_source=True), ""]
    fixes = _problems_and_fixes(db, where, params, limit)
    if fixes:
        out += ["## Known problems and their fixes", *fixes, ""]
    return "\n".join(out)


def _problems_and_fixes(db: Database, where: str, params: tuple, limit: int) -> list[str]:
    problems = _ideas(db, where, params, "AND intent = 'problem'", limit)
    out = []
    for p in problems:
        out.append(f"- problem: {_short(p[1])} ({p[3]}:{p[4]})")
        for fix in db.execute("SELECT i.content, i.source_file, i.source_line FROM relations r JOIN ideas i "
                              "ON i.id = r.from_id WHERE r.to_id = ? AND r.relation_type = 'answers'", (p[0],)):
            out.append(f"  - fix: {_short(fix[0])} ({fix[1]}:{fix[2]})")
    return out


def write_digests(db: Database, projects: list[str]) -> list[Path]:
    """Refresh digests/<key>.md (context) and <key>.full.md (+ one per git branch)."""
    folder = config.paths().digests
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    for project in {p for p in projects if p}:
        key = digest_key(project)
        written.append(_write(folder / f"{key}.md", context_digest(db, project)))
        written.append(_write(folder / f"{key}.full.md", project_digest(db, project)))
        for (branch,) in db.execute("SELECT DISTINCT git_branch FROM ideas WHERE project = ? AND git_branch != ''",
                                    (project,)):
            written.append(_write(folder / f"{key}@{_branch_key(branch)}.full.md",
                                  project_digest(db, project, branch)))
    return written


def _write(path: Path, text: str) -> Path:
    config.write_private(path, text)
    return path


def _local_day(stamp: str | None) -> str:
    if not stamp:
        return "undated"
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp[:10]
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone().strftime("%Y-%m-%d")


def recent(db: Database, *, days: int = 7, projects: list[str] | None = None, now: datetime | None = None) -> list[dict]:
    """What happened per project and (local) day: topics and the ideas worth a standup."""
    now = now or datetime.now(timezone.utc)
    since = (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S")
    psql = f" AND project IN ({','.join('?' * len(projects))})" if projects else ""
    rows = db.execute(
        f"SELECT project, message_time, intent, content, id FROM ideas WHERE substr(message_time, 1, 19) >= ?{psql} "
        f"AND intent != 'context' ORDER BY message_time", (since, *(projects or []))).fetchall()
    spans = db.execute(
        f"SELECT project, started_at, name FROM spans WHERE depth = 1 AND substr(started_at, 1, 19) >= ?{psql} "
        f"ORDER BY started_at", (since, *(projects or []))).fetchall()
    days_out: OrderedDict[tuple[str, str], dict] = OrderedDict()
    for project, stamp, name in spans:
        entry = days_out.setdefault((project, _local_day(stamp)), {"topics": [], "ideas": []})
        entry["topics"].append(name)
    for project, stamp, intent, content, idea_id in rows:
        entry = days_out.setdefault((project, _local_day(stamp)), {"topics": [], "ideas": []})
        entry["ideas"].append({"id": idea_id, "intent": intent, "content": _short(content, 160)})
    return [{"project": p, "name": project_name(p), "day": d, **v} for (p, d), v in
            sorted(days_out.items(), key=lambda kv: (kv[0][1], kv[0][0]), reverse=True)]
