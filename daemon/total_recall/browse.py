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

from total_recall import config, memories, store
from total_recall.db import Database
from total_recall.errors import NotFound, TotalRecallError

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
        "intent": intent,
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
    row = memories.idea_fields(db, idea_id)
    if row is None:
        raise NotFound(f"no memory with id {idea_id}")
    out = dict(row)
    out["pinned"], out["answered"] = bool(out["pinned"]), bool(out["answered"])
    return out


def get_memory(db: Database, idea_id: int, context_lines: int = CONTEXT_LINES) -> dict:
    """One memory: content, sources with transcript excerpts, relations, evolution chain, events."""
    memory = idea_row(db, idea_id)
    sources = memories.idea_sources(db, idea_id) or [memory]
    memory["sources"] = [
        {
            "source_file": s["source_file"],
            "source_line": s["source_line"],
            "timestamp": s["message_time"],
            "excerpt": excerpt(db, s["source_file"], s["source_line"], context_lines),
        }
        for s in sources
    ]
    memory["entities"] = memories.entity_names(db, idea_id)
    memory["relations"] = relations(db, idea_id)
    memory["chain"] = evolution_chain(db, idea_id)
    memory["topic"] = None
    if memory["span_id"]:
        span = memories.span(db, memory["span_id"])
        if span:
            memory["topic"] = {
                "id": span["id"],
                "name": span["name"],
                "summary": span["summary"],
                "session": span["session_id"],
            }
    memory["events"] = events(db, idea_id)
    return memory


def excerpt(db: Database, source_file: str, line: int, around: int) -> list[dict]:
    """The stored (redacted) conversation lines around one source line."""
    return [
        {
            "line": r["source_line"],
            "role": r["role"],
            "content": r["content"][:1200],
            "timestamp": r["timestamp"],
            "is_source": r["source_line"] == line,
        }
        for r in memories.messages_between(db, source_file, line - around, line + around)
    ]


def relations(db: Database, idea_id: int) -> list[dict]:
    return [dict(r) for r in memories.relations_of(db, idea_id)]


def evolution_chain(db: Database, idea_id: int) -> list[dict]:
    """Oldest to newest: the ideas this one superseded (recursively), itself, the ideas that superseded it."""

    def walk(start: int, newer: bool) -> list[int]:
        out, seen, current = [], {start}, start
        while len(out) < MAX_CHAIN:
            step = memories.superseded_step(db, current, newer)
            if step is None or step in seen:
                break
            seen.add(step)
            out.append(step)
            current = step
        return out

    ids = list(reversed(walk(idea_id, newer=False))) + [idea_id] + walk(idea_id, newer=True)
    if len(ids) == 1:
        return []
    rows = {r["id"]: r for r in memories.ideas_brief(db, ids)}
    return [
        {
            "id": i,
            "content": rows[i]["content"],
            "intent": rows[i]["intent"],
            "timestamp": rows[i]["message_time"],
            "current": i == idea_id,
        }
        for i in ids
        if i in rows
    ]


def events(db: Database, idea_id: int) -> list[dict]:
    return [
        {
            "at": r["at"],
            "action": r["action"],
            "old": _json(r["old"]),
            "new": _json(r["new"]),
            "cause": r["cause"],
        }
        for r in store.events_of(db, "idea", idea_id)
    ]


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
    100k-memory database; `ideas` widens the window (memories.top_entities says how).
    """
    nodes = memories.top_entities(db, projects, ideas, limit)
    ids = [n["id"] for n in nodes]
    edges = memories.entity_pairs(db, projects, ideas, ids, limit * 4) if ids else []
    return {
        "nodes": [{"id": n["id"], "name": n["name"], "type": n["type"], "memories": n["n"]} for n in nodes],
        "edges": [dict(e) for e in edges],
    }


def entity_memories(db: Database, entity_id: int, limit: int = 50) -> dict:
    row = memories.entity(db, entity_id)
    if row is None:
        raise NotFound(f"no entity with id {entity_id}")
    return {
        "id": row["id"],
        "name": row["name"],
        "type": row["type"],
        "memories": [
            {
                "id": r["id"],
                "content": r["content"],
                "intent": r["intent"],
                "timestamp": r["message_time"],
                "project": r["project"],
            }
            for r in memories.entity_ideas(db, entity_id, limit)
        ],
    }


def forget_preview(db: Database, idea_id: int) -> dict:
    """What `forget` of one memory removes: the memory, its sources, relations and vectors."""
    memory = idea_row(db, idea_id)
    memory["sources"] = memories.source_count(db, idea_id)
    memory["relations"] = relations(db, idea_id)
    memory["entities"] = memories.entity_names(db, idea_id)
    return memory
