"""Read-only views of the memory for the MCP server and the web view.

One memory with everything around it (sources with the transcript lines near them, relations,
its evolution chain, its change log), the entity graph, and the projects' list. Writes never
happen here: they go through memory.py and note.py like the CLI's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from total_recall import config
from total_recall.db import Database
from total_recall.errors import NotFound, TotalRecallError

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
CONTEXT_LINES = 3
MAX_CHAIN = 20


def _date(value: str | None, name: str) -> str | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).strftime("%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise TotalRecallError(
            f"{name} takes a date like 2025-05-01 or 2025-05-01T14:00, not {value!r}"
        ) from None


def _in_range(stamp: str | None, since: str | None, until: str | None) -> bool:
    day = (stamp or "")[:19]
    return (not since or (bool(day) and day >= since)) and (not until or (bool(day) and day < until))


def search(
    db: Database,
    settings: config.Settings,
    embedder: Callable[[], Any],
    query: str,
    *,
    project: str | None = None,
    session: str | None = None,
    since: str | None = None,
    until: str | None = None,
    intent: str | None = None,
    k: int = 10,
    all_projects: bool = False,
    cwd: str | None = None,
) -> dict:
    """The CLI's search (daemon socket first, else in-process) plus session, date and intent filters.

    The filters apply to a deeper candidate list (5 × k), so a filtered search still fills k.
    `embedder` is called only when the search runs in this process.
    """
    from total_recall import search as searchmod
    from total_recall import server
    from total_recall.extract.protocol import INTENTS

    if not (query or "").strip():
        raise TotalRecallError("search needs a query")
    if intent and intent not in INTENTS:
        raise TotalRecallError(f"intent is one of {', '.join(INTENTS)}, not {intent!r}")
    k = max(1, int(k))
    since_s, until_s = _date(since, "since"), _date(until, "until")
    filtered = bool(session or since_s or until_s or intent)
    request = {
        "query": query,
        "k": k * 5 if filtered else k,
        "project": project or None,
        "all_projects": all_projects,
        "cwd": cwd,
    }
    answer = server.ask(config.paths().socket, {"op": "search", **request})
    if answer is None or answer.get("error"):
        # Trigger: no daemon, or it answered with an error. Why: search must not depend on it.
        # Outcome: the same function in-process (its error, if any, reaches the caller).
        answer = searchmod.run(db, settings, embedder(), request)
    results = [
        r
        for r in answer["results"]
        if (not session or r.get("session") == session)
        and (not intent or r.get("intent") == intent)
        and _in_range(r.get("timestamp"), since_s, until_s)
    ][:k]
    return {"results": results, "notes": answer.get("notes", [])}


def idea_row(db: Database, idea_id: int) -> dict:
    row = db.one(f"SELECT {', '.join(IDEA_FIELDS)} FROM ideas WHERE id = ?", (idea_id,))
    if row is None:
        raise NotFound(f"no memory with id {idea_id}")
    out = dict(zip(IDEA_FIELDS, row))
    out["pinned"], out["answered"] = bool(out["pinned"]), bool(out["answered"])
    return out


def get_memory(db: Database, idea_id: int, context_lines: int = CONTEXT_LINES) -> dict:
    """One memory: content, sources with transcript excerpts, relations, evolution chain, events."""
    memory = idea_row(db, idea_id)
    sources = db.execute(
        "SELECT source_file, source_line, message_time FROM idea_sources WHERE idea_id = ? "
        "ORDER BY message_time, source_line",
        (idea_id,),
    ).fetchall() or [(memory["source_file"], memory["source_line"], memory["message_time"])]
    memory["sources"] = [
        {
            "source_file": f,
            "source_line": line,
            "timestamp": t,
            "excerpt": excerpt(db, f, line, context_lines),
        }
        for f, line, t in sources
    ]
    memory["entities"] = [
        r[0]
        for r in db.execute(
            "SELECT e.name FROM idea_entities ie JOIN entities e ON e.id = ie.entity_id WHERE ie.idea_id = ? "
            "ORDER BY e.name",
            (idea_id,),
        )
    ]
    memory["relations"] = relations(db, idea_id)
    memory["chain"] = evolution_chain(db, idea_id)
    memory["topic"] = None
    if memory["span_id"]:
        span = db.one("SELECT id, name, summary, session_id FROM spans WHERE id = ?", (memory["span_id"],))
        if span:
            memory["topic"] = {"id": span[0], "name": span[1], "summary": span[2], "session": span[3]}
    memory["events"] = events(db, idea_id)
    return memory


def excerpt(db: Database, source_file: str, line: int, around: int) -> list[dict]:
    """The stored (redacted) conversation lines around one source line."""
    rows = db.execute(
        "SELECT source_line, role, content, timestamp FROM messages "
        "WHERE source_file = ? AND source_line BETWEEN ? "
        "AND ? AND skip_reason IS NULL ORDER BY source_line",
        (source_file, line - around, line + around),
    ).fetchall()
    return [
        {"line": r[0], "role": r[1], "content": r[2][:1200], "timestamp": r[3], "is_source": r[0] == line}
        for r in rows
    ]


def relations(db: Database, idea_id: int) -> list[dict]:
    rows = db.execute(
        "SELECT r.relation_type, 'out', r.to_id, i.content, i.intent "
        "FROM relations r JOIN ideas i ON i.id = r.to_id "
        "WHERE r.from_id = ?1 UNION ALL "
        "SELECT r.relation_type, 'in', r.from_id, i.content, i.intent "
        "FROM relations r JOIN ideas i ON i.id = r.from_id "
        "WHERE r.to_id = ?1",
        (idea_id,),
    ).fetchall()
    return [{"type": r[0], "direction": r[1], "id": r[2], "content": r[3], "intent": r[4]} for r in rows]


def evolution_chain(db: Database, idea_id: int) -> list[dict]:
    """Oldest to newest: the ideas this one superseded (recursively), itself, the ideas that superseded it."""

    def walk(start: int, column: str, other: str) -> list[int]:
        out, seen, current = [], {start}, start
        while len(out) < MAX_CHAIN:
            row = db.one(
                f"SELECT {other} FROM relations WHERE {column} = ? AND relation_type = 'supersedes' "
                f"ORDER BY created_at DESC LIMIT 1",
                (current,),
            )
            if row is None or row[0] in seen:
                break
            seen.add(row[0])
            out.append(row[0])
            current = row[0]
        return out

    older = walk(idea_id, "from_id", "to_id")
    newer = walk(idea_id, "to_id", "from_id")
    ids = list(reversed(older)) + [idea_id] + newer
    if len(ids) == 1:
        return []
    rows = {
        r[0]: r
        for r in db.execute(
            f"SELECT id, content, intent, message_time FROM ideas WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        )
    }
    return [
        {
            "id": i,
            "content": rows[i][1],
            "intent": rows[i][2],
            "timestamp": rows[i][3],
            "current": i == idea_id,
        }
        for i in ids
        if i in rows
    ]


def events(db: Database, idea_id: int) -> list[dict]:
    rows = db.execute(
        "SELECT at, action, old, new, cause FROM memory_events WHERE kind = 'idea' AND object_id = ? "
        "ORDER BY id",
        (idea_id,),
    ).fetchall()
    return [{"at": r[0], "action": r[1], "old": _json(r[2]), "new": _json(r[3]), "cause": r[4]} for r in rows]


def _json(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


GRAPH_IDEAS = 5000  # the graph is drawn from the latest memories in scope: a bounded, recent picture


def entity_graph(
    db: Database, projects: list[str] | None = None, limit: int = 120, ideas: int = GRAPH_IDEAS
) -> dict:
    """The entities the latest `ideas` memories name most, and how often two are named together.

    Bounded by the latest memories (by id) so that the co-occurrence join stays small on a
    100k-memory database; `ideas` widens the window. The joins are pinned to run from those
    memories outwards (CROSS JOIN, `+` on the entity filter): left to itself the planner starts
    from the entity index and walks every link of the popular entities.
    """
    psql = f"WHERE project IN ({','.join('?' * len(projects))})" if projects else ""
    params = tuple(projects or ())
    recent = f"SELECT id FROM ideas {psql} ORDER BY id DESC LIMIT ?"
    nodes = db.execute(
        f"WITH recent(id) AS ({recent}) "
        f"SELECT e.id, e.name, e.type, count(*) AS n FROM recent r "
        f"CROSS JOIN idea_entities ie ON ie.idea_id = r.id CROSS JOIN entities e ON e.id = ie.entity_id "
        f"GROUP BY e.id ORDER BY n DESC, e.name LIMIT ?",
        (*params, ideas, limit),
    ).fetchall()
    ids = [n[0] for n in nodes]
    edges = []
    if ids:
        marks = ",".join("?" * len(ids))
        edges = db.execute(
            f"WITH recent(id) AS ({recent}) "
            f"SELECT a.entity_id, b.entity_id, count(*) FROM recent r "
            f"CROSS JOIN idea_entities a ON a.idea_id = r.id "
            f"CROSS JOIN idea_entities b ON b.idea_id = r.id AND a.entity_id < b.entity_id "
            f"WHERE +a.entity_id IN ({marks}) AND +b.entity_id IN ({marks}) "
            f"GROUP BY a.entity_id, b.entity_id ORDER BY count(*) DESC LIMIT ?",
            (*params, ideas, *ids, *ids, limit * 4),
        ).fetchall()
    return {
        "nodes": [{"id": n[0], "name": n[1], "type": n[2], "memories": n[3]} for n in nodes],
        "edges": [{"source": e[0], "target": e[1], "weight": e[2]} for e in edges],
    }


def entity_memories(db: Database, entity_id: int, limit: int = 50) -> dict:
    row = db.one("SELECT id, name, type FROM entities WHERE id = ?", (entity_id,))
    if row is None:
        raise NotFound(f"no entity with id {entity_id}")
    ideas = db.execute(
        "SELECT i.id, i.content, i.intent, i.message_time, i.project FROM idea_entities ie JOIN ideas i "
        "ON i.id = ie.idea_id WHERE ie.entity_id = ? ORDER BY i.message_time DESC LIMIT ?",
        (entity_id, limit),
    )
    return {
        "id": row[0],
        "name": row[1],
        "type": row[2],
        "memories": [
            {"id": r[0], "content": r[1], "intent": r[2], "timestamp": r[3], "project": r[4]} for r in ideas
        ],
    }


def forget_preview(db: Database, idea_id: int) -> dict:
    """What `forget` of one memory removes: the memory, its sources, relations and vectors."""
    memory = idea_row(db, idea_id)
    memory["sources"] = db.scalar("SELECT count(*) FROM idea_sources WHERE idea_id = ?", (idea_id,), 0)
    memory["relations"] = relations(db, idea_id)
    memory["entities"] = [
        r[0]
        for r in db.execute(
            "SELECT e.name FROM idea_entities ie JOIN entities e ON e.id = ie.entity_id WHERE ie.idea_id = ?",
            (idea_id,),
        )
    ]
    return memory
