"""Reads and small writes of what is remembered: ideas, spans, entities, relations, sources,
messages and proposals.

The storage owner of these tables for every module above storage (browse, digest, note,
curate, maintain, report, the web view); applying extractor output is `store.py`'s, vectors are
`vectors.py`'s, forgetting is `erasure.py`'s. Rows come back as sqlite3.Row (by column name).
"""

from __future__ import annotations

import itertools
from typing import Any

from total_recall import projects as projects_mod
from total_recall.db import Database
from total_recall.state import FILE_ID, path_of, select_list


def marks(values) -> str:
    """'?,?,?' for an IN (...) list of these values."""
    return ",".join("?" * len(values))


# --- counts (stats) -----------------------------------------------------------------------------


def ideas_by_intent(db: Database) -> dict[str, int]:
    return {r["intent"]: r["n"] for r in db.all("SELECT intent, count(*) AS n FROM ideas GROUP BY intent")}


# An open memory: a question no answer followed, a problem no solution answered, a todo nothing closed.
OPEN = "answered = 0 AND closed_source_line IS NULL"


def open_counts(db: Database) -> dict[str, int]:
    """How many questions, todos and problems are still open (OPEN)."""
    found = {
        r["intent"]: r["n"]
        for r in db.all(
            f"SELECT intent, count(*) AS n FROM ideas WHERE intent IN ('question', 'todo', 'problem') "
            f"AND {OPEN} GROUP BY intent"
        )
    }
    return {kind + "s": found.get(kind, 0) for kind in ("question", "todo", "problem")}


def counts(db: Database) -> dict[str, int]:
    """How many spans, entities, relations, sessions, projects and messages are stored."""
    return {
        "spans": db.scalar("SELECT count(*) FROM spans", default=0),
        "entities": db.scalar("SELECT count(*) FROM entities", default=0),
        "relations": db.scalar("SELECT count(*) FROM relations", default=0),
        "sessions": db.scalar("SELECT count(DISTINCT session_id) FROM spans", default=0),
        "projects": db.scalar("SELECT count(DISTINCT project) FROM ideas", default=0),
        "messages": db.scalar("SELECT count(*) FROM messages", default=0),
    }


def words_count(db: Database) -> dict[str, int]:
    """How many rows the words index holds: messages and chunks."""
    return {
        "messages": db.scalar("SELECT count(*) FROM messages", default=0),
        "chunks": db.scalar("SELECT count(*) FROM chunks", default=0),
    }


# The columns migrate-store reads of each table of the words index (its id aside).
WORDS_COLUMNS = {
    "messages": f"{path_of('messages')}, source_line, session_id, project, git_branch, role, kind, content, "
    "content_hash, timestamp, skip_reason, indexed_at, uuid",
    "chunks": f"{path_of('chunks')}, source_line, message_line, seq, session_id, project, role, kind, "
    "timestamp, content, context, needs_embedding, machine",
}


def words_after(db: Database, table: str, after_id: int, limit: int) -> list:
    """The next rows of the words index (`messages` or `chunks`) in id order, after `after_id`:
    id and WORDS_COLUMNS (migrate-store reads it batch by batch)."""
    return db.all(
        f"SELECT id, {WORDS_COLUMNS[table]} FROM {table} WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
    )


def skipped_messages(db: Database) -> dict[str, int]:
    rows = db.all(
        "SELECT skip_reason, count(*) AS n FROM messages WHERE skip_reason IS NOT NULL GROUP BY skip_reason"
    )
    return {r["skip_reason"]: r["n"] for r in rows}


def without_vectors(db: Database) -> dict[str, int]:
    return {
        "ideas": db.scalar("SELECT count(*) FROM ideas WHERE needs_embedding = 1", default=0),
        "spans": db.scalar("SELECT count(*) FROM spans WHERE needs_embedding = 1", default=0),
    }


# --- spans ----------------------------------------------------------------------------------------


def recent_sessions(db: Database, session: str | None, limit: int) -> list[str]:
    """Sessions with spans, newest first (only `session` when given)."""
    where, params = ("WHERE s.session_id = ?", (session,)) if session else ("", ())
    # GROUP BY, not DISTINCT ... ORDER BY another column, which PostgreSQL refuses.
    return db.column(
        f"SELECT s.session_id FROM spans s {where} GROUP BY s.session_id "
        "ORDER BY max(s.created_at) DESC LIMIT ?",
        (*params, limit),
    )


def session_spans(db: Database, session: str) -> list:
    """A session's spans, parents first, each with its idea count (`ideas`)."""
    return db.all(
        "SELECT s.id, s.parent_id, s.depth, s.name, s.summary, s.start_line, s.end_line, s.source_file, "
        "s.project, s.started_at, (SELECT count(*) FROM ideas i WHERE i.span_id = s.id) AS ideas "
        "FROM spans s WHERE s.session_id = ? ORDER BY s.depth, s.start_line, s.id",
        (session,),
    )


def session_titles(db: Database, sessions: list[str]) -> dict[str, str]:
    """Each session's title, as Claude Code's /resume picker shows it: the one the user gave, else the
    one Claude Code generated (`transcript.TITLE_KINDS`); the latest of its kind. A title line
    forgotten or read while paused was stored without its text, and names nothing."""
    from total_recall.transcript import TITLE_KINDS

    rank = {kind: n for n, kind in enumerate(TITLE_KINDS)}
    best: dict[str, tuple[int, int, str]] = {}
    for chunk in _chunks(sorted(set(sessions))):
        rows = db.all(
            "SELECT session_id, kind, source_line, content FROM messages "
            f"WHERE session_id IN ({marks(chunk)}) AND skip_reason = 'title' AND content != ''",
            chunk,
        )
        for row in rows:
            key = (rank.get(row["kind"], len(rank)), -int(row["source_line"]), row["content"])
            if row["session_id"] not in best or key < best[row["session_id"]]:
                best[row["session_id"]] = key
    return {session: key[2] for session, key in best.items()}


def session_prs(db: Database, sessions: list[str]) -> dict[str, list[str]]:
    """Each session's pull requests, oldest first, each once: the text of its PR link lines
    (`transcript.PR_LINK`: "PR #42 (pull request) in acme/shop: <url>"). A line forgotten or read while
    paused was stored without its text, and names none."""
    out: dict[str, list[str]] = {}
    for chunk in _chunks(sorted(set(sessions))):
        rows = db.all(
            "SELECT session_id, content FROM messages "
            f"WHERE session_id IN ({marks(chunk)}) AND skip_reason = 'pr_link' AND content != '' "
            "ORDER BY session_id, timestamp, source_line",
            chunk,
        )
        for row in rows:
            links = out.setdefault(row["session_id"], [])
            if row["content"] not in links:
                links.append(row["content"])
    return out


def span(db: Database, span_id: int) -> Any:
    return db.one("SELECT * FROM spans WHERE id = ?", (span_id,))


# --- digests --------------------------------------------------------------------------------------

# A decision another one superseded is history, not the current state.
CURRENT = "id NOT IN (SELECT to_id FROM relations WHERE relation_type = 'supersedes')"
# The kinds of a project's ideas a digest lists, newest first.
IDEA_KINDS = {
    "pinned": "AND pinned = 1",
    "open questions": f"AND intent = 'question' AND {OPEN}",
    "open todos": f"AND intent = 'todo' AND {OPEN}",
    "current decisions": f"AND intent = 'decision' AND {CURRENT}",
    "convention candidates": "AND intent IN ('decision', 'conclusion', 'context')",
    "conclusions": "AND intent = 'conclusion'",
    "problems": "AND intent = 'problem'",
}


def _project_where(projects: list[str], branch: str | None) -> tuple[str, tuple]:
    """The rows of these projects (the checkouts of one project, same_projects) or of one branch."""
    where = f"project IN ({marks(projects)})"
    return (f"{where} AND git_branch = ?", (*projects, branch)) if branch else (where, tuple(projects))


def project_ideas(db: Database, projects: list[str], branch: str | None, kind: str, limit: int) -> list:
    """A project's (or branch's) ideas of one IDEA_KINDS kind, newest first: id, content,
    message_time, source_file, source_line, intent. `projects`: the paths of that project."""
    where, params = _project_where(projects, branch)
    return db.all(
        f"SELECT id, content, message_time, {path_of('ideas')}, source_line, intent FROM ideas WHERE {where} "
        f"{IDEA_KINDS[kind]} ORDER BY message_time DESC, id DESC LIMIT ?",
        (*params, limit),
    )


def project_summary(db: Database, projects: list[str], branch: str | None) -> Any:
    """ideas, sessions, first, last (message times) of a project (its paths) or branch."""
    where, params = _project_where(projects, branch)
    return db.one(
        "SELECT count(*) AS ideas, count(DISTINCT session_id) AS sessions, min(message_time) AS first, "
        f"max(message_time) AS last FROM ideas WHERE {where}",
        params,
    )


def fixes_of(db: Database, problem_id: int) -> list:
    """The ideas that answer a problem: content, source_file, source_line."""
    return db.all(
        f"SELECT i.content, {path_of('i')}, i.source_line FROM relations r JOIN ideas i "
        "ON i.id = r.from_id WHERE r.to_id = ? AND r.relation_type = 'answers'",
        (problem_id,),
    )


def branches(db: Database, projects: list[str]) -> list[str]:
    return db.column(
        f"SELECT DISTINCT git_branch FROM ideas WHERE project IN ({marks(projects)}) AND git_branch != '' "
        "ORDER BY git_branch",
        projects,
    )


def last_session(db: Database, projects: list[str]) -> Any:
    """The project's latest session (of any of its paths): session_id, ended (its last span end, or
    its start when no span has ended: a session of one summary line), or None."""
    return db.one(
        "SELECT session_id, max(coalesce(ended_at, started_at)) AS ended FROM spans "
        f"WHERE project IN ({marks(projects)}) AND depth = 0 GROUP BY session_id "
        "ORDER BY max(coalesce(ended_at, started_at)) DESC LIMIT 1",
        projects,
    )


def session_topics(db: Database, session: str) -> list:
    """A session's top-level topics in order: name, summary."""
    return db.all(
        "SELECT name, summary FROM spans WHERE session_id = ? AND depth = 1 ORDER BY start_line", (session,)
    )


def ideas_since(db: Database, since: str, projects: list[str] | None) -> list:
    """Non-context ideas from `since` on (of these projects), oldest first: project, message_time,
    intent, content, id."""
    psql = f" AND project IN ({marks(projects)})" if projects else ""
    return db.all(
        "SELECT project, message_time, intent, content, id FROM ideas WHERE substr(message_time, 1, 19) >= "
        f"?{psql} "
        f"AND intent != 'context' ORDER BY message_time",
        (since, *(projects or [])),
    )


def topics_since(db: Database, since: str, projects: list[str] | None) -> list:
    """Top-level topics started from `since` on: project, started_at, name."""
    psql = f" AND project IN ({marks(projects)})" if projects else ""
    return db.all(
        "SELECT project, started_at, name FROM spans WHERE depth = 1 AND substr(started_at, 1, 19) >= "
        f"?{psql} "
        f"ORDER BY started_at",
        (since, *(projects or [])),
    )


# --- ideas: corrections by the user ---------------------------------------------------------------


def idea(db: Database, idea_id: int) -> Any:
    """id, content, intent, pinned, project, confidence of one idea, or None."""
    return db.one(
        "SELECT id, content, intent, pinned, project, confidence FROM ideas WHERE id = ?", (idea_id,)
    )


def set_pinned(db: Database, idea_id: int, pinned: bool, now: float) -> None:
    db.execute("UPDATE ideas SET pinned = ?, updated_at = ? WHERE id = ?", (int(pinned), now, idea_id))


def set_content(db: Database, idea_id: int, text: str, content_hash: str, now: float) -> None:
    """New text for an idea; its vector is stale until re-embedded."""
    db.execute(
        "UPDATE ideas SET content = ?, content_hash = ?, needs_embedding = 1, updated_at = ? WHERE id = ?",
        (text, content_hash, now, idea_id),
    )


def projects_of(db: Database, idea_ids: list[int]) -> list[str]:
    return db.column(f"SELECT project FROM ideas WHERE id IN ({marks(idea_ids)})", idea_ids)


# --- proposals (the extractor's suggested changes to pinned ideas) -------------------------------


def proposals(db: Database, state: str) -> list[dict]:
    rows = db.all(
        "SELECT p.id, p.kind, p.target_id, t.content AS target, p.new_idea_id, n.content AS new, "
        "p.created_at, "
        "p.state FROM proposals p JOIN ideas t ON t.id = p.target_id LEFT JOIN ideas n ON n.id = "
        "p.new_idea_id "
        "WHERE p.state = ? ORDER BY p.id",
        (state,),
    )
    return [dict(r) for r in rows]


def proposal(db: Database, proposal_id: int) -> Any:
    """kind, target_id, new_idea_id, state of one proposal, or None."""
    return db.one("SELECT kind, target_id, new_idea_id, state FROM proposals WHERE id = ?", (proposal_id,))


def apply_proposal(db: Database, kind: str, target: int, new_id: int, now: float) -> None:
    """The new idea relates to the target; one that supersedes it also takes its pin."""
    db.execute(
        "INSERT OR IGNORE INTO relations (from_id, to_id, relation_type, created_at) VALUES (?, ?, ?, ?)",
        (new_id, target, kind, now),
    )
    if kind == "supersedes":
        db.execute("UPDATE ideas SET pinned = 0 WHERE id = ?", (target,))
        db.execute("UPDATE ideas SET pinned = 1 WHERE id = ?", (new_id,))


def decide_proposal(db: Database, proposal_id: int, state: str, now: float) -> None:
    db.execute("UPDATE proposals SET state = ?, decided_at = ? WHERE id = ?", (state, now, proposal_id))


# --- maintenance ----------------------------------------------------------------------------------


def duplicate_groups(db: Database) -> list[list[int]]:
    """Ids of ideas with the same project, intent and normalised text, per group (sorted)."""
    rows = db.all(
        "SELECT project, intent, content_hash, group_concat(id) AS ids FROM ideas "
        "GROUP BY project, intent, content_hash HAVING count(*) > 1"
    )
    return [sorted(int(i) for i in r["ids"].split(",")) for r in rows]


def merge_idea(db: Database, keep: int, dup: int) -> None:
    """Fold `dup` into `keep`: its sources, relations and pin; the row goes (its vector is the caller's)."""
    db.execute(
        "INSERT OR IGNORE INTO idea_sources (idea_id, file_id, source_line, session_id, "
        "message_time, machine) SELECT ?, file_id, source_line, session_id, message_time, machine "
        "FROM idea_sources WHERE idea_id = ?",
        (keep, dup),
    )
    # dup's relations move to keep, but for those keep already has (they go with dup's row): the
    # portable form of SQLite's UPDATE OR IGNORE, which PostgreSQL lacks.
    for end, other in (("from_id", "to_id"), ("to_id", "from_id")):
        db.execute(
            f"DELETE FROM relations WHERE {end} = ? AND EXISTS (SELECT 1 FROM relations r "
            f"WHERE r.{end} = ? AND r.{other} = relations.{other} "
            "AND r.relation_type = relations.relation_type)",
            (dup, keep),
        )
        db.execute(f"UPDATE relations SET {end} = ? WHERE {end} = ?", (keep, dup))
    db.execute(
        "UPDATE ideas SET mention_count = (SELECT count(*) FROM idea_sources WHERE idea_id = ?), "
        "pinned = CASE WHEN (SELECT pinned FROM ideas WHERE id = ?) = 1 THEN 1 ELSE pinned END WHERE id = ?",
        (keep, dup, keep),
    )
    db.execute("DELETE FROM ideas WHERE id = ?", (dup,))


def spans_without_summary(db: Database) -> list[int]:
    return db.column("SELECT id FROM spans WHERE depth > 0 AND closed = 1 AND summary = ''")


def best_ideas_of_span(db: Database, span_id: int, limit: int = 2) -> list[str]:
    return db.column(
        "SELECT content FROM ideas WHERE span_id = ? ORDER BY confidence DESC, id LIMIT ?", (span_id, limit)
    )


def set_span_summary(db: Database, span_id: int, summary: str) -> None:
    db.execute("UPDATE spans SET summary = ?, needs_embedding = 1 WHERE id = ?", (summary, span_id))


def projects(db: Database) -> list[str]:
    return db.column("SELECT DISTINCT project FROM ideas WHERE project != ''")


# --- project identities (the same project on every machine, 0008) --------------------------------


def project_for(
    db: Database, project: str, identity: str, machine: str | None, now: float, stored_as: str | None = None
) -> str:
    """Record that the checkout `project` is `identity` (projects.identity), seen now on `machine`,
    and return the project its memories are stored under: the one every path of that identity
    already uses (chosen once, by the first path recorded), else `stored_as` (import's mapping to a
    checkout here), else the path itself. Two checkouts of one repository so store a fact under
    one project, where dedup (project, intent, content_hash) meets it."""
    with db.write():
        db.lock("project identity", identity)  # two machines recording one repository take turns
        row = db.one("SELECT identity, stored_as FROM project_identities WHERE project = ?", (project,))
        if row and row["identity"] == identity:
            db.execute(
                "UPDATE project_identities SET machine = ?, seen_at = ? WHERE project = ?",
                (machine, now, project),
            )
            return row["stored_as"]
        chosen = (
            db.scalar(
                "SELECT stored_as FROM project_identities WHERE identity = ? AND project != ? "
                "ORDER BY seen_at, project LIMIT 1",
                (identity, project),
            )
            or stored_as
            or project
        )
        db.execute(
            "INSERT INTO project_identities (project, identity, stored_as, machine, seen_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (project) DO UPDATE SET identity = excluded.identity, "
            "stored_as = excluded.stored_as, machine = excluded.machine, seen_at = excluded.seen_at",
            (project, identity, chosen, machine, now),
        )
        return chosen


def stored_as(db: Database, project: str) -> str:
    """The project a checkout's memories are stored under (itself when none is recorded)."""
    return db.scalar("SELECT stored_as FROM project_identities WHERE project = ?", (project,)) or project


def checkouts(db: Database) -> list[str]:
    """Every checkout path the store recorded an identity for."""
    return db.column("SELECT project FROM project_identities ORDER BY project")


def identities_of(db: Database, paths: list[str]) -> dict[str, str]:
    """The recorded identity of each of these paths that has one, as a checkout or as the project
    another checkout's memories are stored under."""
    if not paths:
        return {}
    rows = db.all(
        f"SELECT project, stored_as, identity FROM project_identities WHERE project IN ({marks(paths)}) "
        f"OR stored_as IN ({marks(paths)})",
        (*paths, *paths),
    )
    out = {r["stored_as"]: r["identity"] for r in rows if r["stored_as"] in paths}
    return out | {r["project"]: r["identity"] for r in rows if r["project"] in paths}


def same_projects(db: Database, paths: list[str]) -> list[str]:
    """These projects and every other path that is the same project: the checkouts of the same
    repository on every machine, as the store recorded them (these first, then the others sorted).

    A path the store has no identity for yet (indexed before 0008) is its identity here when it is
    a checkout on this machine; a project without a remote is only its own path, so an unrelated
    project is never included."""
    recorded = identities_of(db, paths)
    wanted = {recorded.get(p) or projects_mod.identity(p) for p in paths if p}
    return [*paths, *(p for p in paths_of(db, sorted(wanted)) if p not in paths)]


def paths_of(db: Database, identities: list[str]) -> list[str]:
    """Every path recorded for these identities: the checkouts, and the projects they are stored under."""
    if not identities:
        return []
    rows = db.all(
        f"SELECT project, stored_as FROM project_identities WHERE identity IN ({marks(identities)})",
        identities,
    )
    return sorted({r["project"] for r in rows} | {r["stored_as"] for r in rows})


def optimize_fts(db: Database) -> None:
    if db.dialect == "postgres":  # GIN indexes on generated tsvector columns need no merge step
        return
    db.execute("INSERT INTO ideas_fts (ideas_fts) VALUES ('optimize')")
    db.execute("INSERT INTO spans_fts (spans_fts) VALUES ('optimize')")


def decay_activation(db: Database, factor: float, floor: float) -> None:
    """Multiply every activation by `factor`; values under `floor` become 0."""
    for table in ("ideas", "spans"):
        db.execute(
            f"UPDATE {table} SET activation = CASE WHEN activation * ? < ? THEN 0 ELSE activation * ? END "
            f"WHERE activation > 0",
            (factor, floor, factor),
        )


def session_ideas(db: Database, session: str) -> list:
    """A session's ideas in line order: id, span_id, intent, content, source_line."""
    return db.all(
        "SELECT id, span_id, intent, content, source_line FROM ideas WHERE session_id = ? ORDER BY "
        "source_line, id",
        (session,),
    )


SESSION_LINES = 500


def session_lines(db: Database, session: str) -> list:
    """A session's lines in order, each by its first window (at most SESSION_LINES): source_line,
    role, kind, content, timestamp. What a session with no topics shows (tool-only, summaries)."""
    return db.all(
        "SELECT source_line, role, kind, content, timestamp FROM chunks WHERE session_id = ? AND seq = 0 "
        "ORDER BY file_id, source_line LIMIT ?",
        (session, SESSION_LINES),
    )


# --- explicit notes -------------------------------------------------------------------------------


def noted(db: Database, idea_id: int) -> Any:
    """What a note stored: content, intent, pinned, project, session_id, source_file, source_line,
    needs_embedding."""
    return db.one(
        f"SELECT content, intent, pinned, project, session_id, {path_of('ideas')}, source_line, "
        "needs_embedding FROM ideas WHERE id = ?",
        (idea_id,),
    )


def latest_branch(db: Database, source_file: str) -> str | None:
    """The git branch of a transcript's latest message that names one."""
    return db.scalar(
        f"SELECT git_branch FROM messages WHERE file_id = {FILE_ID} AND git_branch != '' "
        "ORDER BY source_line DESC LIMIT 1",
        (source_file,),
    )


def open_span(db: Database, session: str, source_file: str) -> int | None:
    """The deepest open span of a session's transcript, or None."""
    return db.scalar(
        "SELECT id FROM spans WHERE session_id = ? AND source_file = ? AND closed = 0 "
        "ORDER BY depth DESC, id DESC LIMIT 1",
        (session, source_file),
    )


def next_line(db: Database, source_file: str) -> int:
    """One past the last line any idea of this (pseudo-)source cites."""
    return int(
        db.scalar(
            f"SELECT coalesce(max(source_line), 0) + 1 FROM ideas WHERE file_id = {FILE_ID}",
            (source_file,),
            1,
        )
    )


# --- export (exchange.py writes them as JSON lines) ---------------------------------------------


def export_ideas(db: Database, projects: list[str] | None, since: str | None) -> list:
    """Every idea of these projects (None: all) last said on or after `since` (YYYY-MM-DD), by id."""
    where, params = ["1 = 1"], []
    if projects:
        where.append(f"project IN ({marks(projects)})")
        params += projects
    if since:
        where.append("substr(coalesce(last_seen, message_time, ''), 1, 10) >= ?")
        params.append(since)
    return db.all(
        "SELECT id, span_id, content, content_hash, intent, confidence, answered, "
        f"{path_of('ideas')}, source_line, "
        "session_id, project, git_branch, message_time, last_seen, mention_count, pinned, closed_at, "
        f"closed_source_file, closed_source_line FROM ideas WHERE {' AND '.join(where)} ORDER BY id",
        params,
    )


def sources_of(db: Database, idea_ids: list[int]) -> dict[int, list]:
    """Every place each idea was said: source_file, source_line, session_id, message_time, in order."""
    return _by_idea(
        db,
        f"SELECT idea_id, {path_of('idea_sources')}, source_line, session_id, message_time, machine "
        "FROM idea_sources WHERE idea_id IN ({}) ORDER BY idea_id, message_time, source_file, source_line",
        idea_ids,
    )


def entities_of(db: Database, idea_ids: list[int]) -> dict[int, list]:
    """name, type of each idea's entities, by name."""
    return _by_idea(
        db,
        "SELECT l.idea_id, e.name, e.type FROM idea_entities l JOIN entities e ON e.id = l.entity_id "
        "WHERE l.idea_id IN ({}) ORDER BY l.idea_id, e.name",
        idea_ids,
    )


def _by_idea(db: Database, sql: str, idea_ids: list[int]) -> dict[int, list]:
    """The rows of `sql` (its `IN ({})` filled with one batch of ids at a time) by their idea_id."""
    out: dict[int, list] = {}
    for chunk in _chunks(idea_ids):
        for row in db.all(sql.format(marks(chunk)), chunk):
            out.setdefault(row["idea_id"], []).append(row)
    return out


def relations_among(db: Database, idea_ids: list[int]) -> list:
    """from_id, to_id, relation_type of the relations whose two ends are both among these ideas."""
    ids = set(idea_ids)
    rows = db.all("SELECT from_id, to_id, relation_type FROM relations ORDER BY id")
    return [r for r in rows if r["from_id"] in ids and r["to_id"] in ids]


def spans_with_ancestors(db: Database, span_ids: list[int]) -> list:
    """These spans and every span above them, parents before children."""
    found: dict[int, Any] = {}
    todo = {s for s in span_ids if s is not None}
    while todo:
        chunk = sorted(todo - set(found))
        todo = set()
        for part in _chunks(chunk):
            for row in db.all(f"SELECT * FROM spans WHERE id IN ({marks(part)})", part):
                found[row["id"]] = row
                if row["parent_id"] is not None and row["parent_id"] not in found:
                    todo.add(row["parent_id"])
    return sorted(found.values(), key=lambda r: (r["depth"], r["id"]))


def export_tombstones(db: Database, projects: list[str] | None, since_unix: float | None) -> list:
    """Content tombstones (of these projects) and line tombstones, oldest first."""
    where, params = _exported("(kind = 'line' OR project IN ({}))", projects, since_unix)
    return db.all(
        "SELECT kind, project, content_hash, source_file, source_line, reason FROM tombstones "
        f"WHERE {where} ORDER BY id",
        params,
    )


def export_scopes(db: Database, projects: list[str] | None, since_unix: float | None) -> list:
    """The forgotten sessions and transcripts, and the forgotten projects (of these projects), oldest
    first: kind, value, created_at."""
    where, params = _exported("(kind != 'project' OR value IN ({}))", projects, since_unix)
    return db.all(
        f"SELECT kind, value, created_at FROM forgotten_scopes WHERE {where} "
        "ORDER BY created_at, kind, value",
        params,
    )


def _exported(of_projects: str, projects: list[str] | None, since_unix: float | None) -> tuple[str, list]:
    """The WHERE clause and parameters of an export's tombstones: `of_projects` (its `{}` takes the
    projects' marks) when projects are named, made since `since_unix` when given."""
    where, params = ["1 = 1"], []
    if projects:
        where.append(of_projects.format(marks(projects)))
        params += projects
    if since_unix is not None:
        where.append("created_at >= ?")
        params.append(since_unix)
    return " AND ".join(where), params


def idea_events(db: Database, idea_ids: list[int]) -> list:
    """The audit log of these ideas: object_id, at, action, old, new, cause, oldest first."""
    out: list = []
    for chunk in _chunks(idea_ids):
        out += db.all(
            "SELECT object_id, at, action, old, new, cause FROM memory_events "
            f"WHERE kind = 'idea' AND object_id IN ({marks(chunk)}) ORDER BY id",
            chunk,
        )
    return sorted(out, key=lambda r: (r["at"], r["object_id"]))


def _chunks(values: list, size: int = 500) -> list[list]:
    """SQLite binds at most a few thousand parameters per statement."""
    values = list(values)
    return [values[i : i + size] for i in range(0, len(values), size)]


def restore_idea(db: Database, idea_id: int, record: dict, now: float) -> None:
    """An imported idea takes the state it had where it was exported: pin, confidence, answered,
    the time it was last said, and the line that closed it (a todo). An answer the file's relations
    gave it on import stays: an export made before a problem a solution answers had a fix given
    (I186) says answered false for it."""
    closed = record.get("closed") or {}
    db.execute(
        "UPDATE ideas SET pinned = ?, confidence = ?, answered = CASE WHEN ? = 1 THEN 1 ELSE answered END, "
        "last_seen = coalesce(?, last_seen), "
        "closed_at = ?, closed_source_file = ?, closed_source_line = ?, updated_at = ? WHERE id = ?",
        (
            int(bool(record.get("pinned"))),
            float(record["confidence"]),
            int(bool(record.get("answered"))),
            record.get("last_seen"),
            closed.get("at"),
            closed.get("file"),
            closed.get("line"),
            now,
            idea_id,
        ),
    )


def mention_count(db: Database, idea_id: int) -> int:
    return int(db.scalar("SELECT mention_count FROM ideas WHERE id = ?", (idea_id,), 0))


def last_event(db: Database) -> int:
    """The id of the latest change to any memory (0: none): a cheap "did anything change?"."""
    return int(db.scalar("SELECT max(id) FROM memory_events", default=0))


# --- one memory in full, the entity graph (browse, the web view) ---------------------------------

# The columns of one memory as the read-only views show it.
IDEA_FIELDS = (
    "id",
    "content",
    "intent",
    "confidence",
    "answered",
    "pinned",
    "mention_count",
    "project",
    "session_id",
    "git_branch",
    "message_time",
    "source_file",
    "source_line",
    "span_id",
    "created_at",
    "updated_at",
)


def idea_fields(db: Database, idea_id: int) -> Any:
    """One idea's IDEA_FIELDS, or None."""
    return db.one(f"SELECT {select_list('ideas', IDEA_FIELDS)} FROM ideas WHERE id = ?", (idea_id,))


def idea_sources(db: Database, idea_id: int) -> list:
    """Every place an idea was said, oldest first: source_file, source_line, message_time."""
    return db.all(
        f"SELECT {path_of('idea_sources')}, source_line, message_time FROM idea_sources WHERE idea_id = ? "
        "ORDER BY message_time, source_line",
        (idea_id,),
    )


def source_count(db: Database, idea_id: int) -> int:
    return db.scalar("SELECT count(*) FROM idea_sources WHERE idea_id = ?", (idea_id,), 0)


def entity_names(db: Database, idea_id: int) -> list[str]:
    """The names of the entities an idea mentions, alphabetically."""
    return db.column(
        "SELECT e.name FROM idea_entities ie JOIN entities e ON e.id = ie.entity_id WHERE ie.idea_id = ? "
        "ORDER BY e.name",
        (idea_id,),
    )


def messages_between(db: Database, source_file: str, first: int, last: int) -> list:
    """The stored (redacted) conversation lines first..last of a transcript, skipped ones left out:
    source_line, role, content, timestamp."""
    return db.all(
        "SELECT source_line, role, content, timestamp FROM messages "
        f"WHERE file_id = {FILE_ID} AND source_line BETWEEN ? "
        "AND ? AND skip_reason IS NULL ORDER BY source_line",
        (source_file, first, last),
    )


def relations_of(db: Database, idea_id: int) -> list:
    """An idea's relations both ways: type, direction ('out'/'in'), id, content, intent of the other."""
    return db.all(
        "SELECT r.relation_type AS type, 'out' AS direction, r.to_id AS id, i.content, i.intent "
        "FROM relations r JOIN ideas i ON i.id = r.to_id "
        "WHERE r.from_id = ?1 UNION ALL "
        "SELECT r.relation_type, 'in', r.from_id, i.content, i.intent "
        "FROM relations r JOIN ideas i ON i.id = r.from_id "
        "WHERE r.to_id = ?1",
        (idea_id,),
    )


def superseded_step(db: Database, idea_id: int, newer: bool) -> int | None:
    """The idea that superseded this one (newer) or that this one superseded (older); the latest
    such relation, or None."""
    column, other = ("to_id", "from_id") if newer else ("from_id", "to_id")
    return db.scalar(
        f"SELECT {other} FROM relations WHERE {column} = ? AND relation_type = 'supersedes' "
        f"ORDER BY created_at DESC LIMIT 1",
        (idea_id,),
    )


def ideas_brief(db: Database, idea_ids: list[int]) -> list:
    """id, content, intent, message_time of these ideas (any order)."""
    return db.all(
        f"SELECT id, content, intent, message_time FROM ideas WHERE id IN ({marks(idea_ids)})", idea_ids
    )


def top_entities(db: Database, projects: list[str] | None, ideas: int, limit: int) -> list:
    """The entities the latest `ideas` ideas (of these projects) name most: id, name, type, n.

    Bounded by the latest ideas (by id) so that the join stays small on a 100k-memory database.
    The joins are pinned to run from those ideas outwards (CROSS JOIN): left to itself the
    planner starts from the entity index and walks every link of the popular entities.
    """
    recent, params = _recent_ideas(projects)
    join = _pinned_join(db)
    return db.all(
        f"WITH recent(id) AS ({recent}) "
        f"SELECT e.id, e.name, e.type, count(*) AS n FROM recent r "
        f"{join} idea_entities ie ON ie.idea_id = r.id {join} entities e ON e.id = ie.entity_id "
        f"GROUP BY e.id ORDER BY n DESC, e.name LIMIT ?",
        (*params, ideas, limit),
    )


def entity_pairs(
    db: Database, projects: list[str] | None, ideas: int, entity_ids: list[int], limit: int
) -> list:
    """How often two of these entities are named by the same idea among the latest `ideas`:
    source, target, weight (most often first). `+` on the entity filter keeps the planner
    starting from the recent ideas."""
    recent, params = _recent_ideas(projects)
    ids = marks(entity_ids)
    join = _pinned_join(db)
    return db.all(
        f"WITH recent(id) AS ({recent}) "
        f"SELECT a.entity_id AS source, b.entity_id AS target, count(*) AS weight FROM recent r "
        f"{join} idea_entities a ON a.idea_id = r.id "
        f"{join} idea_entities b ON b.idea_id = r.id AND a.entity_id < b.entity_id "
        f"WHERE +a.entity_id IN ({ids}) AND +b.entity_id IN ({ids}) "
        f"GROUP BY a.entity_id, b.entity_id ORDER BY count(*) DESC LIMIT ?",
        (*params, ideas, *entity_ids, *entity_ids, limit),
    )


def _pinned_join(db: Database) -> str:
    """SQLite's CROSS JOIN keeps the join order as written; PostgreSQL has no CROSS JOIN ... ON
    (a syntax error there) and its planner starts from the small side by itself."""
    return "JOIN" if db.dialect == "postgres" else "CROSS JOIN"


def _recent_ideas(projects: list[str] | None) -> tuple[str, tuple]:
    """The query of the latest ideas' ids (of these projects; LIMIT is the caller's last
    parameter before its own) and its parameters."""
    psql = f"WHERE project IN ({marks(projects)})" if projects else ""
    return f"SELECT id FROM ideas {psql} ORDER BY id DESC LIMIT ?", tuple(projects or ())


def entity(db: Database, entity_id: int) -> Any:
    """id, name, type of one entity, or None."""
    return db.one("SELECT id, name, type FROM entities WHERE id = ?", (entity_id,))


def entity_ideas(db: Database, entity_id: int, limit: int) -> list:
    """The ideas that name an entity, newest first: id, content, intent, message_time, project."""
    return db.all(
        "SELECT i.id, i.content, i.intent, i.message_time, i.project FROM idea_entities ie JOIN ideas i "
        "ON i.id = ie.idea_id WHERE ie.entity_id = ? ORDER BY i.message_time DESC LIMIT ?",
        (entity_id, limit),
    )


# --- what the indexer reads around a batch --------------------------------------------------------


def last_turn_text(db: Database, source_file: str, before_line: int, kinds: list[str]) -> str | None:
    """The stored text of the last message of these kinds before a line (not empty), or None."""
    return db.scalar(
        f"SELECT content FROM messages WHERE file_id = {FILE_ID} AND source_line < ? AND kind IN "
        f"({marks(kinds)}) AND content != '' ORDER BY source_line DESC LIMIT 1",
        (source_file, before_line, *kinds),
    )


def message_hashes(db: Database, source_file: str, first: int, last: int) -> set[tuple[int, str]]:
    """(source_line, content_hash) of the stored lines first..last of a transcript."""
    rows = db.all(
        f"SELECT source_line, content_hash FROM messages WHERE file_id = {FILE_ID} "
        "AND source_line BETWEEN ? AND ?",
        (source_file, first, last),
    )
    return {(r["source_line"], r["content_hash"]) for r in rows}


def edited_at(db: Database, source_file: str, line: int, uuid: str, content_hash: str) -> bool:
    """Whether this line holds a stored row of this record with other words than `content_hash`."""
    return (
        db.one(
            f"SELECT 1 FROM messages WHERE file_id = {FILE_ID} AND source_line = ? AND uuid = ? "
            "AND content_hash != ? AND (skip_reason IS NULL OR skip_reason NOT IN ('forgotten', 'copied'))",
            (source_file, line, uuid, content_hash),
        )
        is not None
    )


def last_window(db: Database, source_file: str, line: int) -> int:
    """The highest window number stored for this line (-1 when none)."""
    found = db.scalar(
        f"SELECT max(seq) FROM chunks WHERE file_id = {FILE_ID} AND source_line = ?", (source_file, line)
    )
    return -1 if found is None else int(found)


def record_counts(db: Database, source_file: str) -> tuple[int, int]:
    """How many of this transcript's stored lines with a record uuid were kept, and forgotten."""
    row = db.one(
        "SELECT count(*) AS n, sum(CASE WHEN skip_reason = 'forgotten' THEN 1 ELSE 0 END) AS gone "
        f"FROM messages WHERE file_id = {FILE_ID} AND uuid IS NOT NULL",
        (source_file,),
    )
    gone = int(row["gone"] or 0)
    return int(row["n"]) - gone, gone


def stored_uuids(db: Database, source_file: str) -> list[tuple[int, str]]:
    """(line, record uuid) of this transcript's stored lines that have one, by line."""
    return [
        (r["source_line"], r["uuid"])
        for r in db.all(
            f"SELECT source_line, uuid FROM messages WHERE file_id = {FILE_ID} AND uuid IS NOT NULL "
            "ORDER BY source_line",
            (source_file,),
        )
    ]


def forgotten_records(db: Database, uuids: list[str]) -> set[str]:
    """Of these record uuids (and title records, trust.title_record), those of lines the user forgot."""
    found: set[str] = set()
    for part in _chunks(uuids):
        found.update(db.column(f"SELECT uuid FROM forgotten_records WHERE uuid IN ({marks(part)})", part))
    return found


def copied_uuids(db: Database, source_file: str, uuids: list[str]) -> dict[str, str]:
    """Of these record uuids, those another transcript's stored lines hold already (a forked
    session's copies of the lines it started from), each with the text its stored line holds now
    (without what the user forgot of it)."""
    found: dict[str, str] = {}
    for part in _chunks(uuids):
        for r in db.all(
            f"SELECT uuid, content FROM messages WHERE uuid IN ({marks(part)}) "
            f"AND file_id != coalesce({FILE_ID}, 0) ORDER BY id",
            (*part, source_file),
        ):
            found.setdefault(r["uuid"], r["content"])
    return found


def title_lines(db: Database, files: set[str]) -> list[tuple[str, int]]:
    """(path, line) of the session titles stored from these transcripts (transcript.TITLE_FIELDS)."""
    return _lines_skipped_as(db, "title", "file_id IN (SELECT id FROM files WHERE path IN ({}))", files)


def _lines_skipped_as(db: Database, reason: str, where: str, values) -> list[tuple[str, int]]:
    """(path, line) of the messages stored as skipped for `reason` whose `where` holds (a clause whose
    `{}` takes the marks of a chunk of `values`)."""
    found: list[tuple[str, int]] = []
    for part in _chunks(sorted(values)):
        found += [
            (r["source_file"], r["source_line"])
            for r in db.all(
                f"SELECT {path_of('messages')}, source_line FROM messages WHERE skip_reason = ? AND "
                + where.format(marks(part)),
                (reason, *part),
            )
        ]
    return found


def copies_of(db: Database, lines: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(path, line) of the copies other transcripts hold of these lines' records: rows stored as
    `copied` under the uuid of the row holding each line (its own, or its response's first line)."""
    uuids: set[str] = set()
    for f, same_file in itertools.groupby(sorted(lines), key=lambda pair: pair[0]):
        for part in _chunks([ln for _, ln in same_file], 400):  # bound twice per statement
            uuids.update(
                db.column(
                    f"SELECT uuid FROM messages WHERE file_id = {FILE_ID} AND uuid IS NOT NULL "
                    f"AND (source_line IN ({marks(part)}) OR source_line IN (SELECT message_line FROM chunks "
                    f"WHERE file_id = {FILE_ID} AND source_line IN ({marks(part)})))",
                    (f, *part, f, *part),
                )
            )
    return _lines_skipped_as(db, "copied", "uuid IN ({})", uuids)


def messages_at(db: Database, source_file: str, lines: list[int]) -> list:
    """The stored messages on these lines, in line order: role, content, timestamp, source_line."""
    return db.all(
        f"SELECT role, content, timestamp, source_line FROM messages WHERE file_id = {FILE_ID} "
        f"AND source_line IN ({marks(lines)}) ORDER BY source_line",
        (source_file, *lines),
    )


def messages_before(db: Database, session: str, source_file: str, line: int, limit: int) -> list:
    """The last `limit` conversational messages of a session's transcript before a line, newest
    first: role, content, timestamp, source_line."""
    return db.all(
        "SELECT role, content, timestamp, source_line FROM messages WHERE session_id = ? AND "
        f"file_id = {FILE_ID} "
        "AND skip_reason IS NULL AND source_line < ? ORDER BY source_line DESC LIMIT ?",
        (session, source_file, line, limit),
    )


def chunk_keys(db: Database, source_file: str, first: int, last: int) -> set[tuple[int, int]]:
    """(source_line, seq) of the chunks stored for lines first..last of a transcript."""
    rows = db.all(
        f"SELECT source_line, seq FROM chunks WHERE file_id = {FILE_ID} AND source_line BETWEEN ? AND ?",
        (source_file, first, last),
    )
    return {(r["source_line"], r["seq"]) for r in rows}


def message_pieces(db: Database, source_file: str, message_line: int) -> list[tuple[int, str]]:
    """(source_line, content) of a message's chunks, in line order: its pieces as stored."""
    rows = db.all(
        f"SELECT source_line, content FROM chunks WHERE file_id = {FILE_ID} AND message_line = ? "
        "ORDER BY source_line, seq",
        (source_file, message_line),
    )
    return [(r["source_line"], r["content"]) for r in rows]


def ideas_said_only_on(db: Database, source_file: str, lines: list[int]) -> list[int]:
    """Ideas of these (message) lines that nothing else holds: unpinned, said once."""
    return db.column(
        f"SELECT id FROM ideas WHERE file_id = {FILE_ID} AND (source_line IN ({marks(lines)}) OR "
        "source_line IN "
        f"(SELECT source_line FROM chunks WHERE file_id = {FILE_ID} AND message_line IN ({marks(lines)}))) "
        f"AND pinned = 0 AND mention_count = 1",
        (source_file, *lines, source_file, *lines),
    )


def open_topic(db: Database, session: str, source_file: str) -> Any:
    """The latest open top-level topic of a session's transcript: id, name, summary; or None."""
    return db.one(
        "SELECT id, name, summary FROM spans WHERE session_id = ? AND source_file = ? AND depth = 1 AND "
        "closed = 0 "
        "ORDER BY id DESC LIMIT 1",
        (session, source_file),
    )


def open_subspan(db: Database, topic_id: int) -> Any:
    """The latest open sub-span of a topic: name, summary; or None."""
    return db.one(
        "SELECT name, summary FROM spans WHERE parent_id = ? AND depth = 2 AND closed = 0 ORDER BY id DESC "
        "LIMIT 1",
        (topic_id,),
    )


def latest_ideas(db: Database, project: str, limit: int) -> list:
    """A project's newest ideas: id, intent, content."""
    return db.all(
        "SELECT id, intent, content FROM ideas WHERE project = ? ORDER BY id DESC LIMIT ?", (project, limit)
    )
