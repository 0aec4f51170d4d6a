"""Export and import: memories as JSON lines, the same on every store (DESIGN.md, "Export format").

`export` writes a header, then the spans, ideas (with every source, entities and optionally their
vectors), relations, the ideas' audit log and the tombstones. `import_file` reads such a file
whole, checks every line before it writes anything, and merges it through the store's own rules:
an idea this store already has (same project and intent, equal or near-equal text) gains the
imported sources as mentions instead of being stored twice; an idea a tombstone here covers is
not re-created; the file's tombstones are recorded and forget what they cover here. Ideas are
embedded before the write transaction: with the file's vectors when they were made by this
store's model, else with this store's embedder.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import structlog

from total_recall import config, erasure, memories, repoint, store, trust, vectors
from total_recall import projects as projects_mod
from total_recall.db import Database
from total_recall.errors import TotalRecallError
from total_recall.redact import redact_json_batch

log = structlog.get_logger(__name__)

FORMAT = "total-recall-export"
VERSION = 1
INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
RELATIONS = ("supersedes", "builds_on", "contradicts", "answers", "relates_to")
ENTITY_TYPES = ("project", "technology", "concept", "person", "file")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
EMBED_BATCH = 256
WORDS_BATCH = 1000  # rows of messages or chunks per transaction of migrate-store


# -- export ----------------------------------------------------------------------------------------
def export(
    db: Database,
    out: TextIO,
    *,
    projects: list[str] | None = None,
    since: str | None = None,
    with_vectors: bool = False,
    machine: str | None = None,
) -> dict:
    """Write the memories of these projects (None: all) said on or after `since` to `out`; counts."""
    if since is not None and not DATE.match(since):
        raise TotalRecallError(f"--since takes a date like 2026-03-01, not {since!r}")
    ideas = memories.export_ideas(db, projects, since)
    ids = [row["id"] for row in ideas]
    sources = memories.sources_of(db, ids)
    entities = memories.entities_of(db, ids)
    blobs = vectors.vectors_of(db, "ideas", ids) if with_vectors else {}
    spans = memories.spans_with_ancestors(db, [row["span_id"] for row in ideas])
    relations = memories.relations_among(db, ids)
    events = memories.idea_events(db, ids)
    since_unix = _unix(since) if since else None
    tombstones = memories.export_tombstones(db, projects, since_unix)
    scopes = memories.export_scopes(db, projects, since_unix)
    if projects:  # a forgotten line or transcript of another project is not named in this one's file
        tombstones = [
            t for t in tombstones if t["kind"] != "line" or _in_projects(t["source_file"], projects)
        ]
        scopes = [r for r in scopes if r["kind"] != "file" or _in_projects(r["value"], projects)]
        # A session is named by its transcript's file name: only those of this project's transcripts.
        ours = {Path(r["value"]).stem for r in scopes if r["kind"] == "file"}
        scopes = [r for r in scopes if r["kind"] != "session" or r["value"] in ours]
    paths = sorted({r["project"] for r in ideas if r["project"]})
    recorded = memories.identities_of(db, paths)
    header = {
        "kind": "header",
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        # each project's identity across machines (as the store recorded it, else projects.identity
        # here): import maps it to the project of the same remote in the importing store
        "projects": {p: recorded.get(p) or projects_mod.identity(p) for p in paths},
        "embed_model": db.get_meta("embed_model") if blobs else None,
        "embed_dim": int(db.get_meta("embed_dim") or 0) if blobs else None,
    }
    _write(out, header)
    for row in spans:
        _write(out, _span_record(row))
    for row in ideas:
        _write(out, _idea_record(row, sources.get(row["id"], []), entities.get(row["id"], []), blobs))
    for row in relations:
        _write(
            out,
            {"kind": "relation", "from": row["from_id"], "to": row["to_id"], "type": row["relation_type"]},
        )
    for row in events:
        _write(out, _event_record(row))
    for row in tombstones:
        fields = ("project", "content_hash", "source_file", "source_line", "reason")
        _write(out, {"kind": "tombstone", "of": row["kind"], **{k: row[k] for k in fields}})
    for row in scopes:  # a whole session, transcript or project forgotten: forgotten where it is imported
        scope = {"project": row["value"]} if row["kind"] == "project" else {"value": row["value"]}
        _write(out, {"kind": "tombstone", "of": row["kind"], **scope, "at": row["created_at"]})
    return {
        "ideas": len(ideas),
        "spans": len(spans),
        "relations": len(relations),
        "events": len(events),
        "tombstones": len(tombstones) + len(scopes),
        "vectors": len(blobs),
    }


def _write(out: TextIO, record: dict) -> None:
    out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def _unix(date: str) -> float:
    return datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()


def _in_projects(transcript_path: str, projects: list[str]) -> bool:
    """Whether a transcript lies in the Claude Code folder of one of these projects (its sessions')."""
    folders = {projects_mod.claude_folder(p) for p in projects}
    return any(part in folders for part in Path(transcript_path).parts)


def _span_record(row: Any) -> dict:
    keys = ("session_id", "project", "git_branch", "source_file", "depth", "name", "summary")
    keys += ("start_line", "end_line", "closed", "started_at", "ended_at")
    return {"kind": "span", "ref": row["id"], "parent": row["parent_id"], **{k: row[k] for k in keys}}


def _idea_record(row: Any, sources: list, entities: list, blobs: dict[int, bytes]) -> dict:
    primary = (row["source_file"], row["source_line"])
    ordered = sorted(sources, key=lambda s: (s["source_file"], s["source_line"]) != primary)
    record = {
        "kind": "idea",
        "ref": row["id"],
        "span": row["span_id"],
        "content": row["content"],
        "intent": row["intent"],
        "confidence": row["confidence"],
        "answered": bool(row["answered"]),
        "project": row["project"],
        "git_branch": row["git_branch"],
        "session_id": row["session_id"],
        "message_time": row["message_time"],
        "last_seen": row["last_seen"],
        "mention_count": row["mention_count"],
        "pinned": bool(row["pinned"]),
        "closed": (
            {"at": row["closed_at"], "file": row["closed_source_file"], "line": row["closed_source_line"]}
            if row["closed_source_line"] is not None
            else None
        ),
        "sources": [
            {
                "file": s["source_file"],
                "line": s["source_line"],
                "session_id": s["session_id"],
                "message_time": s["message_time"],
                "machine": s["machine"],
            }
            for s in ordered
        ],
        # sorted here, not by the store's collation (SQLite NOCASE, PostgreSQL's locale)
        "entities": sorted(({"name": e["name"], "type": e["type"]} for e in entities), key=_entity_order),
    }
    if row["id"] in blobs:
        record["vector"] = base64.b64encode(blobs[row["id"]]).decode("ascii")
    return record


def _entity_order(entity: dict) -> tuple:
    return (entity["name"].casefold(), entity["name"], entity["type"])


def _event_record(row: Any) -> dict:
    return {
        "kind": "event",
        "idea": row["object_id"],
        "at": row["at"],
        "action": row["action"],
        "old": json.loads(row["old"]) if row["old"] else None,
        "new": json.loads(row["new"]) if row["new"] else None,
        "cause": row["cause"],
    }


# -- reading and checking a file -----------------------------------------------------------------
@dataclass
class Bundle:
    """A whole export file, checked: every reference points at a record of the file."""

    header: dict
    spans: list[dict] = field(default_factory=list)
    ideas: list[dict] = field(default_factory=list)
    relations: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    tombstones: list[dict] = field(default_factory=list)


def read(path: Path) -> Bundle:
    """Parse and check an export file; a TotalRecallError naming the line for anything wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TotalRecallError(f"cannot read {path}: {exc}") from None
    bundle: Bundle | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise TotalRecallError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise TotalRecallError(f"{where}: expected a JSON object")
        if bundle is None:
            bundle = Bundle(header=_check_header(record, where))
            continue
        _add(bundle, record, where)
    if bundle is None:
        raise TotalRecallError(f"{path} is empty: not a total-recall export")
    _check_references(bundle, str(path))
    return bundle


def _check_header(record: dict, where: str) -> dict:
    if record.get("kind") != "header" or record.get("format") != FORMAT:
        raise TotalRecallError(f"{where}: not a total-recall export (its first line must be the header)")
    if record.get("version") != VERSION:
        raise TotalRecallError(
            f"{where}: export format version {record.get('version')!r}; this total-recall reads {VERSION}"
        )
    return record


CHECKS: dict[str, Callable[[dict], str | None]] = {}


def _check(kind: str):
    def register(fn):
        CHECKS[kind] = fn
        return fn

    return register


def _add(bundle: Bundle, record: dict, where: str) -> None:
    kind = record.get("kind")
    if kind not in CHECKS:
        raise TotalRecallError(f"{where}: unknown record kind {kind!r}")
    problem = CHECKS[kind](record)
    if problem:
        raise TotalRecallError(f"{where}: {kind} record: {problem}")
    record["_where"] = where
    getattr(bundle, {"idea": "ideas", "span": "spans", "relation": "relations"}.get(kind, kind + "s")).append(
        record
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


@_check("span")
def _check_span(r: dict) -> str | None:
    if not _is_int(r.get("ref")) or not (r.get("parent") is None or _is_int(r.get("parent"))):
        return "ref and parent must be integers"
    if not all(_text(r.get(k)) for k in ("session_id", "source_file", "name")):
        return "session_id, source_file and name are required"
    if not all(_is_int(r.get(k)) for k in ("depth", "start_line", "end_line")):
        return "depth, start_line and end_line must be integers"
    return None


@_check("idea")
def _check_idea(r: dict) -> str | None:
    if not _is_int(r.get("ref")) or not (r.get("span") is None or _is_int(r.get("span"))):
        return "ref and span must be integers"
    r.setdefault("span", None)  # an idea under no topic may leave it out
    if not _text(r.get("content")):
        return "content must be non-empty text"
    if r.get("intent") not in INTENTS:
        return f"intent must be one of {', '.join(INTENTS)}"
    conf = r.get("confidence")
    if not isinstance(conf, (int, float)) or isinstance(conf, bool) or not 0 <= conf <= 1:
        return "confidence must be a number from 0 to 1"
    sources = r.get("sources")
    if not isinstance(sources, list) or not sources:
        return "sources must be a non-empty list"
    for s in sources:
        if not isinstance(s, dict) or not _text(s.get("file")) or not _is_int(s.get("line")) or s["line"] < 0:
            return "every source needs a file and a line number"
    for e in r.get("entities") or []:
        if not isinstance(e, dict) or not _text(e.get("name")) or e.get("type") not in ENTITY_TYPES:
            return f"every entity needs a name and a type ({', '.join(ENTITY_TYPES)})"
    if "vector" in r:
        try:
            r["_blob"] = base64.b64decode(r["vector"], validate=True)
        except (ValueError, TypeError):
            return "vector must be base64"
    return None


@_check("relation")
def _check_relation(r: dict) -> str | None:
    if not _is_int(r.get("from")) or not _is_int(r.get("to")):
        return "from and to must be idea refs"
    return None if r.get("type") in RELATIONS else f"type must be one of {', '.join(RELATIONS)}"


@_check("event")
def _check_event(r: dict) -> str | None:
    if not _is_int(r.get("idea")) or not isinstance(r.get("at"), (int, float)):
        return "idea must be a ref and at a time"
    return None if _text(r.get("action")) and isinstance(r.get("cause"), str) else "action and cause required"


@_check("tombstone")
def _check_tombstone(r: dict) -> str | None:
    if r.get("of") == "content" and _text(r.get("content_hash")):
        return None
    if r.get("of") == "line" and _text(r.get("source_file")) and _is_int(r.get("source_line")):
        return None
    if r.get("of") in ("session", "file") and _text(r.get("value")):
        return None
    if r.get("of") == "project" and _text(r.get("project")):
        return None
    return (
        "of must be content (with content_hash), line (with source_file and source_line), session or "
        "file (with value) or project (with project)"
    )


def _check_references(bundle: Bundle, path: str) -> None:
    spans = {s["ref"] for s in bundle.spans}
    ideas = {i["ref"] for i in bundle.ideas}
    for s in bundle.spans:
        if s["parent"] is not None and s["parent"] not in spans:
            raise TotalRecallError(f"{s['_where']}: span record: parent {s['parent']} is not in the file")
    for i in bundle.ideas:
        if i["span"] is not None and i["span"] not in spans:
            raise TotalRecallError(f"{i['_where']}: idea record: span {i['span']} is not in the file")
    for r in bundle.relations:
        if r["from"] not in ideas or r["to"] not in ideas:
            raise TotalRecallError(f"{r['_where']}: relation record: an end is not an idea of the file")


# -- import ----------------------------------------------------------------------------------------
def import_file(db: Database, settings: config.Settings, path: Path, *, embedder: Any = None) -> dict:
    """Merge an export file into this store (module docstring); what happened, counted."""
    bundle = read(path)
    _redact(bundle)
    service = vectors.Vectors(db, settings, embedder=embedder)
    blobs, reembedded = _vectors_for(bundle, service)
    now = time.time()
    report = {"ideas_created": 0, "ideas_merged": 0, "ideas_tombstoned": 0, "sources_added": 0}
    report |= {"relations": 0, "tombstones": 0, "spans": 0, "reembedded": reembedded}
    with db.write():
        _map_projects(db, bundle, now)
        forgotten = _import_tombstones(db, bundle, now, report)
        span_ids = _import_spans(db, bundle, now, report)
        idea_ids, created = _import_ideas(db, bundle, span_ids, blobs, now, report)
        ctx = _context(bundle.header, None, {}, now)
        for rel in bundle.relations:
            a, b = idea_ids.get(rel["from"]), idea_ids.get(rel["to"])
            if a is not None and b is not None:
                report["relations"] += store.insert_relation(db, ctx, a, b, rel["type"])
        for idea in bundle.ideas:
            if idea["ref"] in created:
                memories.restore_idea(db, idea_ids[idea["ref"]], idea, now)
        for ev in bundle.events:
            if ev["idea"] in created:
                store.event(
                    db,
                    "idea",
                    idea_ids[ev["idea"]],
                    ev["action"],
                    ev["old"],
                    ev["new"],
                    ev["cause"],
                    ev["at"],
                )
    report["forgotten_here"] = _forget(db, forgotten)
    report["scopes_forgotten_here"] = _forget_scopes(db, bundle, now)
    if report["ideas_created"] or report["ideas_merged"]:
        from total_recall import maintain

        maintain.refresh_all_digests(db)
    log.info("imported", file=str(path), **report)
    return report


# The text of each kind of record, redacted on import as everything the indexer stores is: a file
# written by hand, or by a version that hid fewer forms of secrets, may hold one.
_TEXT_FIELDS = {"idea": ("content", "entities"), "span": ("name", "summary"), "event": ("old", "new")}


def _redact(bundle: Bundle) -> None:
    records = [*bundle.ideas, *bundle.spans, *bundle.events]
    values = [{k: r[k] for k in _TEXT_FIELDS[r["kind"]] if k in r} for r in records]
    for record, value, clean in zip(records, values, redact_json_batch(values)):
        if clean == value:
            continue
        if "entities" in value:  # a name that held a secret names no entity (as the extractor's, I192)
            kept = {json.dumps(e, sort_keys=True) for e in value["entities"] or []}
            clean["entities"] = [e for e in clean["entities"] or [] if json.dumps(e, sort_keys=True) in kept]
        record.update(clean)


def _map_projects(db: Database, bundle: Bundle, now: float) -> None:
    """Another machine's project paths become the project this store keeps that repository under:
    the one its checkouts already use (memories.project_for records the file's paths and their
    identities), else this machine's checkout of the same remote (projects.local_project)."""
    identities = bundle.header.get("projects") or {}
    if not isinstance(identities, dict):
        return
    identities = {
        p: i for p, i in identities.items() if isinstance(p, str) and p and isinstance(i, str) and i
    }
    known, machine = memories.projects(db), bundle.header.get("machine")
    machine = machine if isinstance(machine, str) else None
    recorded = memories.identities_of(db, sorted(identities))  # a path this store knows keeps its identity
    mapped = {
        p: memories.project_for(
            db, p, recorded.get(p, i), machine, now, projects_mod.local_project(known, p, i)
        )
        for p, i in identities.items()
    }
    for record in (*bundle.ideas, *bundle.spans, *bundle.tombstones):
        record["project"] = mapped.get(record.get("project"), record.get("project"))


def _vectors_for(bundle: Bundle, service: vectors.Vectors) -> tuple[dict[int, bytes], int]:
    """Each idea's vector before the write: the file's when this store's model made it, else a new
    one from this store's embedder (none when vectors are off: the repair pass embeds them later)."""
    if not bundle.ideas or not service.ok():
        return {}, 0
    from total_recall.embed import to_blob

    model, dim = service.embedder.model_id, service.embedder.dim
    same = bundle.header.get("embed_model") == model and bundle.header.get("embed_dim") == dim
    out = {i["ref"]: i["_blob"] for i in bundle.ideas if same and len(i.get("_blob", b"")) == 4 * dim}
    todo = [i for i in bundle.ideas if i["ref"] not in out]
    for start in range(0, len(todo), EMBED_BATCH):
        part = todo[start : start + EMBED_BATCH]
        for idea, vector in zip(
            part, service.embedder.embed([store.without_lead_in(i["content"]) for i in part])
        ):
            out[idea["ref"]] = to_blob(vector)
    return out, len(todo)


def _context(header: dict, idea: dict | None, source: dict, now: float) -> store.BatchContext:
    line = int(source.get("line") or 0)
    return store.BatchContext(
        source_file=source.get("file") or "total-recall-import",
        session_id=source.get("session_id") or (idea or {}).get("session_id") or "",
        project=(idea or {}).get("project"),
        git_branch=(idea or {}).get("git_branch"),
        line_times={line: source.get("message_time")},
        first_line=line,
        last_line=line,
        cause="import",
        now=now,
        machine=source.get("machine") or header.get("machine"),
    )


def _import_tombstones(db: Database, bundle: Bundle, now: float, report: dict) -> list[int]:
    """Record the file's tombstones (before any idea, so none they cover is created); the ids of
    ideas here that they say were forgotten."""
    forgotten: list[int] = []
    for t in bundle.tombstones:
        if t["of"] in SCOPES:
            continue  # forgotten after the write (_forget_scopes): a scope's forget is its own transaction
        row = {**t, "kind": t["of"]}
        report["tombstones"] += erasure.add_tombstone(db, row, now)
        forgotten += erasure.ideas_under_tombstone(db, row)
    return sorted(set(forgotten))


def _import_spans(db: Database, bundle: Bundle, now: float, report: dict) -> dict[int, int]:
    """The file's topics that a memory imported here sits under (a file holds a topic for its
    memories), none of a session, transcript or project forgotten here: an export taken before a
    forget holds the topics of what was forgotten, whose names and summaries say it."""
    by_ref = {s["ref"]: s for s in bundle.spans}
    needed: set[int] = set()
    for idea in bundle.ideas:
        first = idea["sources"][0]
        ctx = _context(bundle.header, idea, first, now)
        ref = idea["span"]
        if ref is None or store.tombstoned(db, ctx, int(first["line"]), store.idea_hash(idea["content"])):
            continue
        while ref is not None and ref not in needed:
            needed.add(ref)
            ref = by_ref[ref]["parent"]
    ids: dict[int, int] = {}
    for span in sorted(bundle.spans, key=lambda s: s["depth"]):
        if span["ref"] not in needed or (span["parent"] is not None and span["parent"] not in ids):
            continue
        if _span_forgotten(db, span, now):
            continue
        ids[span["ref"]] = store.import_span(db, span, ids.get(span["parent"]), now)
        report["spans"] += 1
    return ids


def _span_forgotten(db: Database, span: dict, now: float) -> bool:
    """A topic of a session or transcript forgotten here, or of a project forgotten here after it began."""
    if trust.forgotten(db, file=span["source_file"], session=span["session_id"]):
        return True
    cutoff = trust.project_cutoff(db, span.get("project"))
    return cutoff is not None and trust.said_at(span.get("started_at"), now) < cutoff


def _import_ideas(db, bundle, span_ids, blobs, now, report) -> tuple[dict[int, int], set[int]]:
    ids: dict[int, int] = {}
    created: set[int] = set()
    for idea in bundle.ideas:
        first, *rest = idea["sources"]
        item = {
            "type": idea["intent"],
            "content": idea["content"],
            "confidence": idea["confidence"],
            "answered": idea.get("answered"),
            "source_line": first["line"],
            "entities": idea.get("entities") or [],
        }
        ctx = _context(bundle.header, idea, first, now)
        idea_id, new = store.insert_idea(db, ctx, item, span_ids.get(idea["span"]), blobs.get(idea["ref"]))
        if idea_id is None:
            report["ideas_tombstoned"] += 1
            continue
        ids[idea["ref"]] = idea_id
        before = memories.mention_count(db, idea_id)
        for source in rest if new else idea["sources"]:
            store.merge_mention(db, _context(bundle.header, idea, source, now), idea_id, item, source["line"])
        if new:
            created.add(idea["ref"])
            report["ideas_created"] += 1
        else:
            report["ideas_merged"] += 1
            if idea.get("pinned"):
                memories.set_pinned(db, idea_id, True, now)
        report["sources_added"] += memories.mention_count(db, idea_id) - before + int(new)
    return ids, created


SCOPES = ("session", "file", "project")


def _forget_scopes(db: Database, bundle: Bundle, now: float) -> int:
    """A session the file says was forgotten is forgotten here as `forget --session` forgets it (every
    line, not only those its memories came from), and stays so; a transcript, or a session this store
    never indexed, gets its tombstone; a project gets its tombstone as of when it was forgotten there
    (what this store's transcripts said of it before then is never read again; its memories the file
    says were forgotten go by their own tombstones). How many scopes were new here."""
    from total_recall import curate, lookup

    new = 0
    for t in bundle.tombstones:
        kind = t["of"]
        if kind not in SCOPES:
            continue
        value = t["project"] if kind == "project" else t["value"]
        if trust.scope_forgotten(db, kind, value):
            continue
        new += 1
        if kind == "session" and value in lookup.sessions(db):
            curate.forget(db, session=value)
        else:
            at = t.get("at") if kind == "project" and isinstance(t.get("at"), (int, float)) else now
            with db.write():
                trust.tombstone_scope(db, kind, value, min(at, now))
    return new


def _forget(db: Database, idea_ids: list[int]) -> int:
    """Forget here what a tombstone of the file says was forgotten there (curate.forget's rules)."""
    from total_recall import curate

    for idea_id in idea_ids:
        curate.forget(db, idea_id)
    return len(idea_ids)


def _move_words(local: Database, remote: Database, settings: config.Settings) -> dict:
    """The words index (`messages`, `chunks`: what search finds a line by when it holds no memory)
    into the new store, WORDS_BATCH rows per transaction. A row the store holds already (the same
    file, line and hash; the same file, line and window) is left as it is, so a second run adds
    nothing. Each row's project is the one the import stored its repository under; a chunk keeps
    its vector when both stores use one model, else the repair pass embeds it there."""
    model = (local.get_meta("embed_model"), local.get_meta("embed_dim"))
    same_model = model[0] is not None and model == (
        remote.get_meta("embed_model"),
        remote.get_meta("embed_dim"),
    )
    # A vector made by an older recipe (db.EMBED_VERSION) is not carried over: the store's repair
    # pass embeds that chunk as it embeds the rest.
    same_model = same_model and not vectors.stale(local)
    projects: dict[str | None, str | None] = {}

    def project(path: str | None) -> str | None:
        if path and path not in projects:
            projects[path] = memories.stored_as(remote, path)
        return projects.get(path, path)

    before = memories.words_count(remote)
    for table in ("messages", "chunks"):
        after = 0
        while rows := memories.words_after(local, table, after, WORDS_BATCH):
            after = rows[-1]["id"]
            blobs = vectors.vectors_of(local, "chunks", [r["id"] for r in rows]) if table == "chunks" else {}
            with remote.write():
                if table == "messages":
                    store.insert_messages(
                        remote,
                        [
                            tuple(project(r[c]) if c == "project" else r[c] for c in store.MESSAGE_COLUMNS)
                            for r in rows
                        ],
                    )
                    continue
                for r in rows:
                    row = dict(r) | {"project": project(r["project"])}
                    row["machine"] = row["machine"] or settings.machine_name()
                    if r["id"] in blobs:  # embedded here: the vector moves, or is made again there
                        row["needs_embedding"] = 1
                    store.insert_chunk(remote, row, blobs.get(r["id"]) if same_model else None)
    after_counts = memories.words_count(remote)
    return {table: after_counts[table] - before[table] for table in after_counts}


def migrate_store(local: Database, settings: config.Settings, url: str) -> dict:
    """`total-recall migrate-store URL`: this machine's memories (with their vectors) into the
    PostgreSQL store at `url`, merged with what other machines put there, then `[store] url` in
    config.toml so this setup uses it. The local memory.db is left as it was (a backup)."""
    import os
    import tempfile

    from total_recall import pg

    if not pg.is_url(url):
        raise TotalRecallError(
            f"migrate-store takes a postgresql:// URL, not {config.without_password(url)!r}"
        )
    # Rows copied as an older indexer pointed them would stay so there (repoint.py reads this
    # machine's transcripts for its own store): the pass is finished here first.
    repoint.finish(local, settings)
    remote = pg.connect(url)
    home = config.ensure_home()
    fd, name = tempfile.mkstemp(prefix=".migrate-", suffix=".jsonl", dir=home)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            exported = export(local, out, with_vectors=True, machine=settings.machine_name())
        imported = import_file(remote, settings, Path(name))
        words = _move_words(local, remote, settings)
    finally:
        Path(name).unlink(missing_ok=True)
        remote.close()
    written = config.set_store_url(url)
    return {
        "store": config.without_password(url),
        "exported": exported,
        "imported": imported,
        "words": words,
        "config": str(written),
        "next": "total-recall restart (the daemon then indexes into the PostgreSQL store)",
    }
