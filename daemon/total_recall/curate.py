"""Corrections by the user: pin, unpin, edit, forget, review proposals.

Every change is written to memory_events with the old and new content. Forgetting removes a
memory and every derived copy of its text from everything stored (see ``forget`` and
SOURCE_TABLES) and leaves tombstones so that re-indexing never brings it back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import structlog

from total_recall import config, erasure, maintain, memories, store, vectors
from total_recall.db import Database
from total_recall.errors import NotFound, TotalRecallError
from total_recall.render import shorten

log = structlog.get_logger(__name__)

DRY_RUN_SHOWN = 50  # memories a dry run of forget lists by id and text
DRY_RUN_CHARS = 120  # of each one's text


def _idea(db: Database, idea_id: int) -> dict:
    row = memories.idea(db, idea_id)
    if row is None:
        raise NotFound(f"no memory with id {idea_id}")
    return dict(row)


def _event(db: Database, object_id: int | None, action: str, old, new, cause: str = "user") -> None:
    store.event(db, "idea", object_id, action, old, new, cause, time.time())


def refresh_digests(db: Database, projects) -> None:
    """Rewrite the digests (and so the next SessionStart output) of these projects right now.

    Trigger: a user changed memory (pin, unpin, edit, forget, review). Why: the next session must
    see the change, not wait for the next indexed turn. Outcome: digests/<key>.md rewritten.
    """
    from total_recall import digest

    digest.write_digests(db, [p for p in projects if p])


def pin(db: Database, idea_id: int, pinned: bool = True) -> dict:
    with db.write():
        idea = _idea(db, idea_id)
        memories.set_pinned(db, idea_id, pinned, time.time())
        _event(
            db, idea_id, "pin" if pinned else "unpin", {"pinned": bool(idea["pinned"])}, {"pinned": pinned}
        )
    refresh_digests(db, [idea["project"]])
    return {"id": idea_id, "pinned": pinned, "content": idea["content"]}


def edit(db: Database, idea_id: int, text: str) -> dict:
    from total_recall.redact import redact

    text = text.strip()
    if not text:
        raise TotalRecallError("the new text is empty; use `total-recall forget` to remove a memory")
    # Redacted as a note is: the new text is stored, logged in the event and embedded at once,
    # at the embedding endpoint when one is configured.
    text = redact(text)
    with db.write():
        idea = _idea(db, idea_id)
        memories.set_content(db, idea_id, text, store.content_hash(text), time.time())
        vectors.delete(db, "ideas", [idea_id])
        _event(db, idea_id, "edit", {"content": idea["content"]}, {"content": text})
        erasure.rename_spans_after_edit(db, idea_id, idea["content"])
    refresh_digests(db, [idea["project"]])
    return {"id": idea_id, "old": idea["content"], "new": text}


def _resolve_forget_project(db: Database, project: str) -> list[str]:
    """The one project a --project argument names, with every checkout of it (the same repository
    on every machine: its memories may be stored under another checkout's path); several
    different projects are listed and refused."""
    from total_recall import projects as projects_mod
    from total_recall.search import known_projects

    try:
        hits = projects_mod.resolve(known_projects(db), project, False, None) or []
    except TotalRecallError:
        hits = []
    as_path = os.path.abspath(os.path.expanduser(project))
    exact = [h for h in hits if h in (project, as_path, project.rstrip("/"), as_path.rstrip("/"))]
    if exact:
        return memories.same_projects(db, exact[:1])
    same = memories.same_projects(db, hits[:1])
    if any(h not in same for h in hits):
        listed = "\n  ".join(sorted(hits))
        raise TotalRecallError(
            f"--project {project!r} matches {len(hits)} projects; give one full path:\n  {listed}"
        )
    return same if hits else []


def forget(
    db: Database,
    idea_id: int | None = None,
    *,
    session: str | None = None,
    project: str | None = None,
    before: str | None = None,
    dry_run: bool = False,
) -> dict:
    """Forget one memory, or everything of a session / project / before a date, everywhere.

    Removes the memories, their sources, relations, vectors and full-text entries; the messages
    they came from (blanked for one memory, deleted for a scope); span names and summaries that
    drew on them (re-derived from what remains, or deleted); the text of their change events;
    entities nothing else uses; archive copies (deleted, or rewritten without the forgotten lines),
    the database copies `recover` kept, and digests (rewritten at once). Session and project
    forgets tombstone the whole scope, so later hooks and backfills never bring it back.
    With ``dry_run`` nothing changes and the report says what would go.
    """
    if idea_id is None and not (session or project or before):
        raise TotalRecallError("forget needs an ID, --session, --project or --before")
    before = erasure.before_day(before) if before else None
    projects = _resolve_forget_project(db, project) if project else None
    if project and not projects:
        raise TotalRecallError(f"no indexed project matches {project!r}")
    now = time.time()
    with db.write(commit=not dry_run):  # a dry run computes the same report, then rolls back
        report = erasure.erase(db, idea_id, session, projects, before, now, DRY_RUN_SHOWN if dry_run else 0)
    archived, preview = report.pop("_archived_transcripts"), report.pop("_preview")
    # Trigger: `recover` kept a damaged database (or stopped while filling a new one). Why: such a
    # copy holds everything the database held, forgotten text included, in a file nothing can
    # rewrite safely; its readable rows were salvaged and the rest rebuilt from the transcripts.
    # Outcome: every forget deletes it and says so.
    copies = config.paths().database_copies()
    report["database_copies_removed"] = [str(c) for c in copies]
    if dry_run:
        # What would go, not only how much: the memories themselves, the first DRY_RUN_SHOWN of them.
        report["dry_run"] = True
        report["would_forget"] = [
            f"#{m['id']} [{m['intent']}] {shorten(m['content'], DRY_RUN_CHARS)} "
            f"(session {str(m['session_id'] or '-')[:8]})"
            for m in preview
        ] + (
            [f"... and {report['forgotten'] - len(preview)} more"]
            if report["forgotten"] > len(preview)
            else []
        )
        return report
    _after_forget(db, report, archived, before, now)
    return report


def _after_forget(db: Database, report: dict, archived: list[str], before: str | None, now: float) -> None:
    """Outside the transaction: rebuild full-text indexes, delete the archive copies of forgotten
    transcripts (and rewrite the others without the forgotten lines) and the database copies
    `recover` kept, rewrite digests, and checkpoint the WAL so no forgotten byte stays in it
    (secure_delete zeroed freed pages)."""
    erasure.rebuild_fts(db)
    for path in report["archives"] + report["database_copies_removed"]:
        Path(path).unlink(missing_ok=True)
    for source in archived:
        maintain.scrub_archive(db, source, before, now)
    report["digests_removed"] = maintain.refresh_all_digests(db)
    report["wal_checkpointed"] = maintain.checkpoint(db)


def proposals(db: Database, state: str = "pending") -> list[dict]:
    return memories.proposals(db, state)


def decide(db: Database, proposal_id: int, apply: bool) -> dict:
    """Apply (the new idea supersedes the pinned one and takes its pin) or reject a proposal."""
    with db.write():
        row = memories.proposal(db, proposal_id)
        if row is None:
            raise NotFound(f"no proposal with id {proposal_id}")
        if row["state"] != "pending":
            raise TotalRecallError(f"proposal {proposal_id} is already {row['state']}")
        kind, target, new_id = row["kind"], row["target_id"], row["new_idea_id"]
        now = time.time()
        if apply and new_id is not None:
            memories.apply_proposal(db, kind, target, new_id, now)
        state = "applied" if apply else "rejected"
        memories.decide_proposal(db, proposal_id, state, now)
        store.event(
            db, "proposal", proposal_id, state, {"state": "pending"}, {"state": state}, "user: review", now
        )
        touched = memories.projects_of(db, [target, new_id])
    refresh_digests(db, touched)
    return {"id": proposal_id, "state": state}


def embed_now(db: Database, settings: config.Settings, idea_id: int) -> bool:
    """Give an edited memory its new vector at once (vectors.Vectors.embed_idea)."""
    return vectors.Vectors(db, settings).embed_idea(idea_id)
