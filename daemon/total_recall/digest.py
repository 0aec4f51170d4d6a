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

from total_recall import config, memories, transcript
from total_recall.db import Database
from total_recall.projects import digest_key
from total_recall.projects import short_name as project_name
from total_recall.render import shorten

CONVENTION = re.compile(r"\b(always|never|convention|prefer|we use|must not|style|naming)\b", re.I)


def _branch_key(branch: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", branch)[:80] + "-" + digest_key(branch)[-10:]


def _bullets(rows: list, with_source: bool | str) -> list[str]:
    """One line per memory with its date and id; with_source "short" names the file, not its path."""
    out = []
    for r in rows:
        where = Path(r["source_file"]).name if with_source == "short" else r["source_file"]
        src = f" ({where}:{r['source_line']})" if with_source else ""
        out.append(f"- {shorten(r['content'], 220)} [{(r['message_time'] or '')[:10]}, #{r['id']}]{src}")
    return out


# A label that opens a memory ("Task 1:", "Epic spotter-0p7:", "Description:"): not what it says.
_LEAD_LABEL = re.compile(r"^[\w#.\- ]{1,30}:\s+")
_WORDS = re.compile(r"[a-z0-9]+")
SAME_WORDS = 0.8  # share of the smaller memory's words the other holds: one item said twice


def _distinct(rows: list, limit: int) -> list:
    """The first `limit` rows, a row left out when an earlier one says the same words (a plan's task
    listed as "Task 1: Install the tools" and again as "Install the tools", "Epic: X" and "Epic 0p7: X")."""
    kept: list = []
    seen: list[set[str]] = []
    for r in rows:
        words = set(_WORDS.findall(_LEAD_LABEL.sub("", r["content"]).lower()))
        if any(
            min(len(words), len(other)) >= 3
            and len(words & other) >= SAME_WORDS * min(len(words), len(other))
            for other in seen
        ):
            continue
        kept.append(r)
        seen.append(words)
        if len(kept) == limit:
            break
    return kept


def _last_session_topics(db: Database, paths: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(when the project's last session ended, what names it: its title and the pull requests it
    opened, its topics as bullets)."""
    row = memories.last_session(db, paths)
    if not row:
        return None, None, []
    sid = row["session_id"]
    topics = memories.session_topics(db, sid)
    title = memories.session_titles(db, [sid]).get(sid)
    names = ([shorten(title, 80)] if title else []) + [
        transcript.pr_short(p) for p in memories.session_prs(db, [sid]).get(sid, [])
    ]
    return (
        row["ended"],
        ", ".join(names) or None,
        [
            f"- {shorten(t['name'], 80)}" + (f": {shorten(t['summary'], 160)}" if t["summary"] else "")
            for t in topics
        ],
    )


def _count(n: int, one: str, many: str = "") -> str:
    """ "1 session", "3 sessions"."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def _remember_command() -> str:
    from total_recall import install

    return install.remember_command()


def context_digest(db: Database, project: str, per_section: int = 6, paths: list[str] | None = None) -> str:
    """What Claude gets at session start, most important first (the hook cuts at its budget): the
    memories of every checkout of the project (`paths`, memories.same_projects when not given),
    whichever machine said them."""
    paths = paths or memories.same_projects(db, [project])

    def ideas(kind: str) -> list:  # read more than is shown: the same item said twice is shown once
        return _distinct(memories.project_ideas(db, paths, None, kind, per_section * 3), per_section)

    sections = [
        ("Pinned", ideas("pinned")),
        ("Open questions", ideas("open questions")),
        ("Todos", ideas("open todos")),
        ("Latest decisions", ideas("current decisions")),
    ]
    lines = [
        f"# Memory of project {project_name(project) or project} (total-recall)",
        f"Use {_remember_command()} <query> for more.",
    ]
    for title, rows in sections:
        if rows:
            lines += [f"## {title}", *_bullets(rows, with_source="short")]
    when, title, topics = _last_session_topics(db, paths)
    if topics:
        named = ", ".join(n for n in ((when or "")[:10], title) if n)
        lines += [
            f"## Last session ({named}) topics" if named else "## Last session topics",
            *topics[:per_section],
        ]
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def project_digest(
    db: Database, project: str, branch: str | None = None, limit: int = 15, paths: list[str] | None = None
) -> str:
    """The human-readable digest: summary, decisions, conventions, open questions, problems and
    fixes, of every checkout of the project (`paths`, memories.same_projects when not given)."""
    paths = paths or memories.same_projects(db, [project])
    title = project_name(project) + (f" @ {branch}" if branch else "")
    stats = memories.project_summary(db, paths, branch)
    out = [
        f"# {title}",
        "",
        f"{_count(stats['ideas'], 'memory', 'memories')} from {_count(stats['sessions'], 'session')}, "
        f"{(stats['first'] or '')[:10]} to {(stats['last'] or '')[:10]}.",
        "",
    ]

    def ideas(kind: str, n: int = limit) -> list:
        return _distinct(memories.project_ideas(db, paths, branch, kind, n * 3), n)

    candidates = memories.project_ideas(db, paths, branch, "convention candidates", 300)
    conventions = _distinct([r for r in candidates if CONVENTION.search(r["content"])], limit)
    sections = [
        ("Pinned", ideas("pinned")),
        ("Decisions", ideas("current decisions")),
        ("Conventions", conventions),
        ("Open questions", ideas("open questions")),
        ("Open todos", ideas("open todos")),
        ("Conclusions", ideas("conclusions")),
    ]
    for name, rows in sections:
        if rows:
            out += [f"## {name}", *_bullets(rows, with_source=True), ""]
    fixes = _problems_and_fixes(db, paths, branch, limit)
    if fixes:
        out += ["## Known problems and their fixes", *fixes, ""]
    return "\n".join(out)


def _problems_and_fixes(db: Database, paths: list[str], branch: str | None, limit: int) -> list[str]:
    out = []
    for p in memories.project_ideas(db, paths, branch, "problems", limit):
        out.append(f"- problem: {shorten(p['content'], 220)} ({p['source_file']}:{p['source_line']})")
        for fix in memories.fixes_of(db, p["id"]):
            out.append(f"  - fix: {shorten(fix['content'], 220)} ({fix['source_file']}:{fix['source_line']})")
    return out


def write_digests(db: Database, projects: list[str]) -> list[Path]:
    """Refresh digests/<key>.md (context) and <key>.full.md (+ one per git branch)."""
    folder = config.paths().digests
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    for project in {p for p in projects if p}:
        key = digest_key(project)
        paths = memories.same_projects(db, [project])  # once per project, for every digest of it
        written.append(_write(folder / f"{key}.md", context_digest(db, project, paths=paths)))
        written.append(_write(folder / f"{key}.full.md", project_digest(db, project, paths=paths)))
        for branch in memories.branches(db, paths):
            written.append(
                _write(
                    folder / f"{key}@{_branch_key(branch)}.full.md",
                    project_digest(db, project, branch, paths=paths),
                )
            )
    return written


def digests_of(db: Database, projects: list[str], branch: str | None = None) -> str:
    """The digest of each project among these paths, once per project: checkouts of the same
    repository (a scope search widened to them) share one digest."""
    done: set[str] = set()
    out = []
    for project in projects:
        if project not in done:
            paths = memories.same_projects(db, [project])
            done |= set(paths)
            out.append(project_digest(db, project, branch, paths=paths))
    return "\n".join(out)


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


def recent(
    db: Database, *, days: int = 7, projects: list[str] | None = None, now: datetime | None = None
) -> list[dict]:
    """What happened per project and (local) day: topics and the ideas worth a standup."""
    now = now or datetime.now(timezone.utc)
    since = (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S")
    rows = memories.ideas_since(db, since, projects)
    spans = memories.topics_since(db, since, projects)
    days_out: OrderedDict[tuple[str, str], dict] = OrderedDict()
    for s in spans:
        entry = days_out.setdefault((s["project"], _local_day(s["started_at"])), {"topics": [], "ideas": []})
        entry["topics"].append(s["name"])
    for r in rows:
        entry = days_out.setdefault(
            (r["project"], _local_day(r["message_time"])), {"topics": [], "ideas": []}
        )
        entry["ideas"].append({"id": r["id"], "intent": r["intent"], "content": shorten(r["content"], 160)})
    return [
        {"project": p, "name": project_name(p), "day": d, **v}
        for (p, d), v in sorted(days_out.items(), key=lambda kv: (kv[0][1], kv[0][0]), reverse=True)
    ]
