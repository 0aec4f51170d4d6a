"""Forgetting, in storage: remove memories and every derived copy of their text from every
table, leave tombstones, scrub the audit log. The SQL of `curate.forget` (which resolves the
scope, runs this in one transaction and cleans up after it).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path

from total_recall import config, memories, state, store, trust, vectors
from total_recall.db import Database, table_exists
from total_recall.errors import NotFound, TotalRecallError

# Every table that holds text derived from a conversation, with the columns that tie a row to
# where it was said (None: the table has no such column). `forget` removes rows by these columns;
# a table added later that stores conversation text (for example an index of messages) belongs
# here. Full-text tables follow their owner and are rebuilt after a forget (FTS_TABLES); vector
# tables are keyed by their owner's id (vectors.TABLES). memory_events keeps its rows, not their text.
# "file" is the column naming the transcript: `file_id` (a `files` row, 0009) or a path (spans).
# "time" is the conversation time; "read" when the row was stored, the time of a line that carries
# none (a line without a time counts as said when it is read, as for pauses); a table without one
# loses its untimed rows by their lines.
SOURCE_TABLES: dict[str, dict[str, str | None]] = {
    "ideas": {
        "file": "file_id",
        "line": "source_line",
        "session": "session_id",
        "project": "project",
        "time": "message_time",
        "read": "created_at",
    },
    "messages": {
        "file": "file_id",
        "line": "source_line",
        "session": "session_id",
        "project": "project",
        "time": "timestamp",
        "read": "indexed_at",
    },
    "spans": {
        "file": "source_file",
        "line": None,
        "session": "session_id",
        "project": "project",
        "time": "started_at",
        "read": "created_at",
    },
    # Search chunks of the conversation's own lines (the recall work); skipped while absent.
    # "quotes": a column holding the end of an earlier turn, blanked where it quotes what went.
    "chunks": {
        "file": "file_id",
        "line": "source_line",
        "also_line": "message_line",
        "session": "session_id",
        "project": "project",
        "time": "timestamp",
        "quotes": "context",
    },
}
SOURCE_OF = state.path_of("idea_sources")
FTS_TABLES = ("ideas_fts", "spans_fts", "messages_fts", "chunks_fts")
HANDLED_TABLES = ("ideas", "messages", "spans")  # own rules below; every other table by line and scope


def _in(values) -> str:
    return ",".join("?" * len(values))


def _file_is(cols: dict, param: str = "?") -> str:
    """The clause picking a table's rows of the transcript whose path `param` binds."""
    if cols["file"] == "file_id":
        return f"file_id = (SELECT id FROM files WHERE path = {param})"
    return f"{cols['file']} = {param}"


def _lines(db: Database, sql: str, params) -> list[tuple[str, int]]:
    """(source_file, source_line) pairs: plain tuples, so they sort and compare."""
    return [(r["source_file"], r["source_line"]) for r in db.execute(sql, params)]


def rebuild_fts(db: Database) -> None:
    """Rebuild every full-text index, so no forgotten term stays in one."""
    with db.write():
        for fts in FTS_TABLES:
            if table_exists(db, fts):
                db.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")


def erase(db: Database, idea_id, session, projects, before, now, preview: int = 0) -> dict:
    """Forget one memory, or a session / projects / before a date, inside the caller's transaction;
    the report of what went (curate.forget documents the rules). With `preview`, the report's
    `_preview` lists up to that many of the memories that go (id, intent, session, text), for a
    dry run to show."""
    # A batch the indexer extracted meanwhile writes after this commits and sees it (Indexer.
    # _forget_marks); on PostgreSQL its writers take this lock shared (SQLite has one writer).
    db.lock("forget")
    scope_files: list[str] = []
    plan: dict[int, tuple] = {}
    if idea_id is not None:
        if db.one("SELECT id FROM ideas WHERE id = ?", (idea_id,)) is None:
            raise NotFound(f"no memory with id {idea_id}")
        ids = [idea_id]
        lines = _lines(db, f"SELECT {SOURCE_OF}, source_line FROM idea_sources WHERE idea_id = ?", (idea_id,))
        # A note attached to a session cites the line the conversation had reached (note._where): that
        # line said something else, and stays; the note's own words (its chunk) go.
        noted = _noted_lines(db, idea_id)
        lines = [pair for pair in lines if pair not in noted]
        scoped_spans: list[int] = []
        touched_projects = db.column("SELECT project FROM ideas WHERE id = ?", (idea_id,))
    else:
        ids, lines, scoped_spans, touched_projects, scope_files = _select_scope(db, session, projects, before)
        plan, source_lines = _said_elsewhere(db, ids, set(lines), set(scope_files), session, before)
        ids = [i for i in ids if i not in plan]
        lines += source_lines
    # A forked session's copies of these lines are the same records: they go with them (I152).
    lines = sorted(set(lines) | set(memories.copies_of(db, lines)))
    # A session's title (Claude Code's summary of the session, or the user's name for it) may name
    # what is forgotten: its line goes with the lines of its transcript that go, kept out on a
    # re-read by their tombstones as they are (I164).
    lines = sorted(set(lines) | set(memories.title_lines(db, {f for f, _ in lines})))
    texts = db.column(f"SELECT content FROM ideas WHERE id IN ({_in(ids)})", ids)
    span_ids = _spans_drawing_on(db, ids + sorted(plan), lines)
    replaced = _replaced_from(db, lines)
    # Lines an earlier forget took already: their words are out of every row.
    forgotten_before = {(f, ln) for f, ln in lines if ln in trust.forgotten_lines(db, f, ln, ln)}

    first = ids[:preview]
    shown = (
        [
            dict(r)
            for r in db.all(
                f"SELECT id, intent, session_id, content FROM ideas WHERE id IN ({_in(first)}) ORDER BY id",
                first,
            )
        ]
        if first
        else []
    )
    cause = "user: forget id" if idea_id is not None else "user: forget scope"
    _bury(db, ids, lines, cause, now, keep_notes=idea_id is not None)
    # A memory of the scope also said outside it now cites a line that remains, in its words.
    reworded, old_texts = _repoint(db, plan, cause, time.time())
    texts += old_texts
    span_ids = sorted(set(span_ids) | set(_spans_drawing_on(db, reworded, [])))

    # Any other table of conversation text: rows of a forgotten line, and a scope's rows, go (the
    # rows are chosen first: a merged response's row is cut by its chunks, read before they go).
    scope = None if idea_id is not None else (session, projects, before)
    other = {t: _rows_to_remove(db, t, cols, lines, scope) for t, cols in _other_tables(db)}
    if scope is None and other.get("chunks"):
        # A note written at a forgotten line is not that line's words: its window stays (I209).
        other["chunks"] = [c for c in other["chunks"] if not _note_window_kept(db, c, texts)]
    quoting = _files_keeping_quotes(db, {f for f, _ in lines}, other)
    message_ids, turns = _forget_messages(db, lines, scope is not None, forgotten_before, quoting)
    for table, gone in other.items():
        vectors.delete(db, table, gone)
        db.executemany(f"DELETE FROM {table} WHERE id = ?", [(i,) for i in gone])
        if SOURCE_TABLES[table].get("quotes"):
            _blank_quotes(db, table, SOURCE_TABLES[table], quoting, turns, texts if scope is None else [])
    other_rows = {table: len(gone) for table, gone in other.items()}

    # Spans: a scope's spans go (with their sub-spans); others that drew on what went are re-derived.
    gone_spans = _with_descendants(db, scoped_spans)
    rederived, emptied = _rederive_spans(db, [s for s in span_ids if s not in gone_spans])
    gone_spans |= _with_descendants(db, emptied)
    vectors.delete(db, "spans", sorted(gone_spans))
    db.executemany("DELETE FROM spans WHERE id = ?", [(s,) for s in sorted(gone_spans)])

    # Events keep what happened, never the forgotten text.
    scrubbed = _scrub_events(db, ids + replaced, sorted(gone_spans | set(rederived)), texts)
    # Entities no memory names any more: the forgotten memories', and those left by memories an
    # extractor replaced before (their names came from the same words).
    orphans = db.column("SELECT id FROM entities WHERE id NOT IN (SELECT entity_id FROM idea_entities)")
    db.executemany("DELETE FROM entities WHERE id = ?", [(e,) for e in orphans])
    state.drop_unused_files(db)

    kept_files = sorted({f for f, _ in lines} - set(scope_files))
    for value, kind in ([(session, "session")] if session else []) + [(p, "project") for p in projects or []]:
        trust.tombstone_scope(db, kind, value, now)
    for f in scope_files:
        trust.tombstone_scope(db, "file", f, now)
    return {
        "forgotten": len(ids),
        "messages": len(message_ids),
        "spans_removed": len(gone_spans),
        "spans_rederived": len(rederived),
        "entities_removed": len(orphans),
        "events_scrubbed": scrubbed,
        **{f"{table}_removed": n for table, n in other_rows.items()},
        "sessions_tombstoned": [session] if session else [],
        "projects_tombstoned": list(projects or []),
        "transcripts_tombstoned": scope_files,
        "archives": [str(a) for a in archive_copies(scope_files)],
        # archive copies of the other transcripts with forgotten lines: rewritten without them
        "archives_scrubbed": [str(a) for a in archive_copies(kept_files)],
        "_archived_transcripts": [f for f in kept_files if archive_copies([f])],
        "projects": sorted({p for p in touched_projects if p}),
        "_preview": shown,
    }


def _noted_lines(db: Database, idea_id: int) -> set[tuple[str, int]]:
    """(file, line) where this memory was noted (`note`: the line the conversation had reached, not
    what said it), whose note windows holding its words are deleted here: a note's own line, and any
    line with a `note` window holding its words."""
    content = memories.idea(db, idea_id)["content"]
    found = db.all(
        f"SELECT c.id, {state.path_of('c')}, c.source_line, c.content FROM chunks c "
        "JOIN idea_sources s ON s.file_id = c.file_id AND s.source_line = c.source_line "
        "WHERE s.idea_id = ? AND c.kind = 'note'",
        (idea_id,),
    )
    # A note's window holds what the user wrote ("Remember: X"), the memory its words ("X").
    found = [r for r in found if content.casefold() in r["content"].casefold()]
    vectors.delete(db, "chunks", [r["id"] for r in found])
    db.executemany("DELETE FROM chunks WHERE id = ?", [(r["id"],) for r in found])
    noted = {(r["source_file"], r["source_line"]) for r in found}
    if db.scalar(f"SELECT {store.MADE_BY_NOTE.format(idea='?')}", (idea_id,)):
        noted |= set(
            _lines(db, f"SELECT {state.path_of('ideas')}, source_line FROM ideas WHERE id = ?", (idea_id,))
        )
    return noted


def _note_window_kept(db: Database, chunk_id: int, texts: list[str]) -> bool:
    """Whether this window is a note's holding none of the forgotten memories' words."""
    row = db.one("SELECT kind, content FROM chunks WHERE id = ?", (chunk_id,))
    return (
        bool(row)
        and row["kind"] == "note"
        and not any(t.casefold() in row["content"].casefold() for t in texts)
    )


def _bury(
    db: Database,
    ids: list[int],
    lines: list[tuple[str, int]],
    cause: str,
    now: float,
    keep_notes: bool = False,
) -> None:
    """Tombstone the memories' content and the lines, log each forget (intent and project only),
    delete the memories, and take the lines from every memory also said elsewhere (with
    `keep_notes`, not from a note written at one of the lines: I209)."""
    for iid in ids:
        row = db.one("SELECT content_hash, project, intent FROM ideas WHERE id = ?", (iid,))
        db.execute(
            "INSERT INTO tombstones (kind, project, content_hash, created_at, reason) VALUES "
            "('content', ?, ?, ?, ?)",
            (row["project"], row["content_hash"], now, cause),
        )
        store.event(
            db,
            "idea",
            iid,
            "forget",
            {"intent": row["intent"], "project": row["project"]},
            None,
            cause,
            time.time(),
        )
    for f, same_file in itertools.groupby(lines, key=lambda pair: pair[0]):
        trust.tombstone_lines(db, f, [ln for _, ln in same_file], now, cause)
    vectors.delete(db, "ideas", ids)
    if ids:
        db.execute(f"DELETE FROM ideas WHERE id IN ({_in(ids)})", ids)
    # A memory also said elsewhere stays, but no longer cites a forgotten line.
    cited = set()
    notes = " AND NOT " + store.MADE_BY_NOTE.format(idea="idea_sources.idea_id") if keep_notes else ""
    for f, ln in lines:
        cited |= set(
            db.column(
                f"SELECT idea_id FROM idea_sources WHERE file_id = {state.FILE_ID} "
                f"AND source_line = ?{notes}",
                (f, ln),
            )
        )
        db.execute(
            f"DELETE FROM idea_sources WHERE file_id = {state.FILE_ID} AND source_line = ?{notes}", (f, ln)
        )
    db.executemany(
        "UPDATE ideas SET mention_count = max(1, (SELECT count(*) FROM idea_sources "
        "WHERE idea_id = ideas.id)) WHERE id = ?",
        [(i,) for i in sorted(cited)],
    )


def _select_scope(db: Database, session, projects, before) -> tuple[list, list, list, list, list]:
    """A scope's memories, message lines, spans, touched projects and (session, project) files."""
    where, params = _scope(session, projects, before, SOURCE_TABLES["ideas"])
    ids = db.column(f"SELECT id FROM ideas WHERE {where}", params)
    mwhere, mparams = _scope(session, projects, before, SOURCE_TABLES["messages"])
    lines = _lines(
        db, f"SELECT {state.path_of('messages')}, source_line FROM messages WHERE {mwhere}", mparams
    )
    swhere, sparams = _scope(session, projects, before, SOURCE_TABLES["spans"])
    scoped_spans = db.column(f"SELECT id FROM spans WHERE {swhere}", sparams)
    touched_projects = list(projects or []) + db.column(
        f"SELECT DISTINCT project FROM messages WHERE {mwhere}", mparams
    )
    scope_files: list[str] = []
    if session or projects:
        fwhere = " OR ".join(
            (["session_id = ?"] if session else []) + ([f"project IN ({_in(projects)})"] if projects else [])
        )
        fparams = ([session] if session else []) + list(projects or [])
        scope_files = sorted(
            set(
                db.column(
                    f"SELECT source_file FROM index_state WHERE {fwhere} UNION "
                    f"SELECT path FROM files WHERE id IN (SELECT file_id FROM messages WHERE {fwhere})",
                    fparams * 2,
                )
            )
        )
    return ids, lines, scoped_spans, touched_projects, scope_files


def _said_elsewhere(
    db: Database, ids: list[int], scope_lines: set, scope_files: set, session, before
) -> tuple[dict, list]:
    """Of a scope's memories, those also said outside it stay, citing only what remains.

    A source (a place the memory was said) is in the scope when its line is one of the scope's, its
    transcript is forgotten whole, it is the memory's own line, or its session and time match the
    forget (a project forget covers every source of its memories). A memory with a source outside
    stays in that source's words: its text when the line says it, else the line's sentence closest
    to it (DESIGN "Forgetting"); a memory whose other lines do not say it is forgotten itself, and
    those lines keep theirs. Returns ({memory: (source it now cites, its text)}, the in-scope
    source lines of every memory)."""
    day = before_day(before) if before else None
    plan: dict[int, tuple] = {}
    in_scope: list[tuple[str, int]] = []
    for part in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        rows = db.all(
            f"SELECT s.idea_id, {state.path_of('s')}, s.source_line, s.session_id, s.message_time, "
            "s.machine, i.content, CASE WHEN s.file_id = i.file_id AND s.source_line = i.source_line "
            "THEN 1 ELSE 0 END AS own FROM idea_sources s JOIN ideas i ON i.id = s.idea_id "
            f"WHERE s.idea_id IN ({_in(part)}) ORDER BY s.idea_id, s.message_time, s.source_line",
            part,
        )
        for idea, sources in itertools.groupby(rows, key=lambda r: r["idea_id"]):
            outside = []
            for r in sources:
                where = (r["source_file"], r["source_line"])
                scoped = where in scope_lines or r["source_file"] in scope_files or r["own"]
                if not scoped and (session or day):
                    scoped = (not session or r["session_id"] == session) and (
                        not day or (r["message_time"] is not None and r["message_time"][:10] < day)
                    )
                if scoped or not (session or day):
                    in_scope.append(where)
                else:
                    outside.append(r)
            if not outside:
                continue
            words = _words_at(db, outside[0], outside[0]["content"])
            if words is not None:
                plan[idea] = (outside[0], words)
    return plan, in_scope


def _words_at(db: Database, source, content: str) -> str | None:
    """A memory's text in the words of one line it was said on: its own text when the line says it
    (case and punctuation aside), else the line's sentence that shares most of its words (at least
    half, the duplicate rule's share), else None."""
    f, ln = source["source_file"], source["source_line"]
    text = db.scalar(
        f"SELECT content FROM messages WHERE file_id = {state.FILE_ID} AND source_line = ? AND content != '' "
        "ORDER BY id LIMIT 1",
        (f, ln),
    ) or " ".join(
        db.column(
            f"SELECT content FROM chunks WHERE file_id = {state.FILE_ID} AND source_line = ? ORDER BY seq",
            (f, ln),
        )
    )
    if not text.strip():
        return None
    if store.normalise(content) in store.normalise(text):
        return content
    words = set(store.normalise(content).split())
    scored = [
        (store.jaccard(words, set(store.normalise(sentence).split())), sentence.strip())
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", text)
        if sentence.strip()
    ]
    share, best = max(scored, default=(0.0, ""))
    return store.without_lead_in(best) if share >= 0.5 else None


def _repoint(db: Database, plan: dict, cause: str, now: float) -> tuple[list[int], list[str]]:
    """A memory that stays after its own line was forgotten cites the earliest line it was said on
    that remains (file, line, session, time, machine, branch, the span there) and, when that line says
    it in other words, takes them: its vector is made again, entities its new words do not name are
    unlinked, and its old text is returned for the events to lose. A memory whose new words another
    memory of its project already holds is merged into that one. Returns (reworded, old texts)."""
    reworded, old_texts = [], []
    for idea_id, (src, words) in sorted(plan.items()):
        row = db.one("SELECT content, project, intent FROM ideas WHERE id = ?", (idea_id,))
        f, ln = src["source_file"], src["source_line"]
        # The line's own row, or, for a later line of a response written over several lines (its
        # row is at the response's first line), the row its windows name.
        branch = db.scalar(
            f"SELECT git_branch FROM messages WHERE file_id = {state.FILE_ID} AND source_line IN (?, "
            f"(SELECT message_line FROM chunks WHERE file_id = {state.FILE_ID} AND source_line = ? LIMIT 1)) "
            "ORDER BY source_line DESC LIMIT 1",
            (f, ln, f, ln),
        )
        span = db.scalar(
            "SELECT id FROM spans WHERE source_file = ? AND start_line <= ? AND end_line >= ? "
            "ORDER BY depth DESC, id DESC LIMIT 1",
            (f, ln, ln),
        )
        db.execute(
            f"UPDATE ideas SET file_id = {state.FILE_ID}, source_line = ?, session_id = ?, message_time = ?, "
            "machine = ?, git_branch = ?, span_id = ?, updated_at = ? WHERE id = ?",
            (f, ln, src["session_id"], src["message_time"], src["machine"], branch, span, now, idea_id),
        )
        if words == row["content"]:
            continue
        old_texts.append(row["content"])
        chash = store.content_hash(words)
        twin = db.scalar(
            "SELECT id FROM ideas WHERE project IS ? AND intent = ? AND content_hash = ? AND id != ?",
            (row["project"], row["intent"], chash, idea_id),
        )
        vectors.delete(db, "ideas", [idea_id])
        if twin is not None:
            memories.merge_idea(db, twin, idea_id)
            store.event(db, "idea", idea_id, "merge", None, {"into": twin}, cause, now)
            continue
        db.execute(
            "UPDATE ideas SET content = ?, content_hash = ?, needs_embedding = 1 WHERE id = ?",
            (words, chash, idea_id),
        )
        lowered = words.lower()
        db.executemany(
            "DELETE FROM idea_entities WHERE idea_id = ? AND entity_id = ?",
            [
                (idea_id, e["id"])
                for e in db.all(
                    "SELECT e.id, e.name FROM entities e JOIN idea_entities l ON l.entity_id = e.id "
                    "WHERE l.idea_id = ?",
                    (idea_id,),
                )
                if e["name"].lower() not in lowered
            ],
        )
        store.event(db, "idea", idea_id, "edit", None, {"content": words}, cause, now)
        reworded.append(idea_id)
    return reworded, old_texts


def _other_tables(db: Database) -> list[tuple[str, dict]]:
    """The listed tables of conversation text without rules of their own, that this store has."""
    return [(t, cols) for t, cols in SOURCE_TABLES.items() if t not in HANDLED_TABLES and table_exists(db, t)]


def _rows_to_remove(db: Database, table: str, cols: dict, lines: list[tuple[str, int]], scope) -> list[int]:
    """A table's rows of the forgotten lines (and, for a scope, of the scope)."""
    gone: set[int] = set()
    also = f" OR {cols['also_line']} = ?2" if cols.get("also_line") else ""
    for f, ln in lines:
        gone |= set(
            db.column(
                f"SELECT id FROM {table} WHERE {_file_is(cols, '?1')} AND ({cols['line']} = ?2{also})",
                (f, ln),
            )
        )
    if scope is not None:
        twhere, tparams = _scope(*scope, cols)
        gone |= set(db.column(f"SELECT id FROM {table} WHERE {twhere}", tparams))
    return sorted(gone)


def _files_keeping_quotes(db: Database, files: set[str], other: dict[str, list[int]]) -> set[str]:
    """The transcripts with forgotten lines where a row that quotes an earlier turn stays: only
    there can a quote of a forgotten turn be left behind."""
    out = set()
    for table, gone in other.items():
        cols = SOURCE_TABLES[table]
        if not cols.get("quotes"):
            continue
        removed = set(gone)
        for f in files - out:
            quoting = db.column(
                f"SELECT id FROM {table} WHERE {_file_is(cols)} AND {cols['quotes']} != ''", (f,)
            )
            if any(i not in removed for i in quoting):
                out.add(f)
    return out


def _forget_messages(
    db: Database, lines: list[tuple[str, int]], scope: bool, forgotten_before: set, quoting: set[str]
) -> tuple[list[int], dict[str, list[tuple[str, str]]]]:
    """The messages rows of the forgotten lines: a scope's go, one memory's keep their place, not
    their text; a later line of a merged response loses its words from the response's row. Returns
    the rows changed and, per transcript in `quoting`, each changed turn's text before and after."""
    rows = [
        (f, r)
        for f, ln in lines
        for r in db.all(
            f"SELECT id, content, uuid, skip_reason FROM messages WHERE file_id = {state.FILE_ID} "
            "AND source_line = ?",
            (f, ln),
        )
    ]
    ids = [r["id"] for _, r in rows]
    records = {r["uuid"] for _, r in rows if r["uuid"]}
    # A session's title has no uuid: it is known by its words (a fork copies it, I212).
    records |= {
        trust.title_record(r["content"]) for _, r in rows if r["skip_reason"] == "title" and r["content"]
    }
    vectors.delete(db, "messages", ids)
    turns: dict[str, list[tuple[str, str]]] = {}
    for f, r in rows:
        if f in quoting:
            turns.setdefault(f, []).append((r["content"], ""))
        if scope:
            db.execute("DELETE FROM messages WHERE id = ?", (r["id"],))
        else:
            _set_message_text(db, r["id"], "")
    for f, message_id, was, kept in _strip_merged_lines(db, sorted(set(lines) - forgotten_before), set(ids)):
        ids.append(message_id)
        if f in quoting:
            turns.setdefault(f, []).append((was, kept))
        if not kept:
            records |= set(db.column(UUID_OF, (message_id,)))
    # A session forked later copies these records with their uuids: a copy is forgotten as it
    # arrives, also when no row of the session is left (indexer._mark_copies, I202).
    trust.forget_records(db, sorted(records), time.time())
    return ids, turns


UUID_OF = "SELECT uuid FROM messages WHERE id = ? AND uuid IS NOT NULL"


def _strip_merged_lines(
    db: Database, lines: list[tuple[str, int]], done: set[int]
) -> list[tuple[str, int, str, str]]:
    """Forgotten lines that have no messages row of their own are later lines of a merged response
    (one `message.id` over several physical lines, stored as one row at its first line): each
    such row loses the words of those lines (its other lines keep theirs) and is blanked when none
    remain or when a forgotten line's words cannot be told apart in it. Returns (file, row, text
    before, text after) of each row changed."""
    gone: dict[tuple[str, int], set[int]] = {}
    for f, ln in lines:
        if db.one(f"SELECT 1 FROM messages WHERE file_id = {state.FILE_ID} AND source_line = ?", (f, ln)):
            continue
        first = db.column(
            f"SELECT DISTINCT message_line FROM chunks WHERE file_id = {state.FILE_ID} AND source_line = ? "
            "AND message_line < ?",
            (f, ln, ln),
        )
        if not first:
            # Trigger: the line's words were never cut into chunks (or are gone already). Why: its
            # words cannot be located. Outcome: the response before it, which holds them, is blanked.
            first = db.column(
                f"SELECT max(source_line) FROM messages WHERE file_id = {state.FILE_ID} AND source_line < ? "
                "AND kind IN ('response', 'subagent_response')",
                (f, ln),
            )
        for m in first:
            if m is not None:
                gone.setdefault((f, int(m)), set()).add(ln)
    changed = []
    for (f, first_line), forgotten in sorted(gone.items()):
        pieces = db.all(
            f"SELECT source_line, content FROM chunks WHERE file_id = {state.FILE_ID} AND message_line = ? "
            "ORDER BY source_line, seq",
            (f, first_line),
        )
        for row in db.all(
            f"SELECT id, content FROM messages WHERE file_id = {state.FILE_ID} AND source_line = ?",
            (f, first_line),
        ):
            if row["id"] in done:
                continue
            kept = _without_pieces(row["content"], pieces, forgotten)
            _set_message_text(db, row["id"], kept)
            changed.append((f, row["id"], row["content"], kept))
    return changed


def _without_pieces(text: str, pieces: list, forgotten: set[int]) -> str:
    """A merged response's text without the pieces (chunks: source_line, content) of the forgotten
    lines; "" when nothing else is left or a forgotten line's words are not found in it."""
    kept_lines = {p["source_line"] for p in pieces} - forgotten
    if not kept_lines or forgotten - {p["source_line"] for p in pieces}:
        return ""
    spans = []
    for p in pieces:
        if p["source_line"] in forgotten:
            # A window is the piece's words joined by single spaces; in the row they keep their
            # own spacing and line breaks.
            found = re.search(r"\s+".join(map(re.escape, p["content"].split())), text)
            if found is None:
                return ""
            spans.append(found.span())
    out, at = [], 0
    for start, end in _merged(spans):
        # the "\n" that joined the piece to its neighbour goes with it
        if end < len(text) and text[end] == "\n":
            end += 1
        elif start > at and text[start - 1] == "\n":
            start -= 1
        out.append(text[at:start])
        at = max(at, end)
    out.append(text[at:])
    return "".join(out).strip()


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _set_message_text(db: Database, message_id: int, text: str) -> None:
    """A message row's new text with its hash (a re-read of the line then finds the same row); a
    row left empty is marked forgotten. A row of that line already holding this text makes this
    one redundant: it goes."""
    row = db.one("SELECT file_id, source_line FROM messages WHERE id = ?", (message_id,))
    chash = store.content_hash(text)
    twin = db.scalar(
        "SELECT id FROM messages WHERE file_id = ? AND source_line = ? AND content_hash = ? AND id != ?",
        (row["file_id"], row["source_line"], chash, message_id),
    )
    if twin is not None:
        db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
    elif text:
        db.execute(
            "UPDATE messages SET content = ?, content_hash = ? WHERE id = ?", (text, chash, message_id)
        )
    else:
        db.execute(
            "UPDATE messages SET content = '', content_hash = ?, skip_reason = 'forgotten' WHERE id = ?",
            (chash, message_id),
        )


def _blank_quotes(
    db: Database,
    table: str,
    cols: dict,
    files: set[str],
    turns: dict[str, list[tuple[str, str]]],
    texts: list[str],
) -> None:
    """Rows that carry the end of an earlier turn (a chunk's context) lose it where it quotes a
    forgotten turn: the quote is the turn's last words (store.quote), a short turn's too; a quote
    of a turn that kept some of its words quotes what is left. A turn of three words or more is
    also recognised by its last 12 words, and so is a forgotten memory's text (`texts`)."""
    for f in sorted(files):
        quotes: dict[str, str] = {}
        needles = [" ".join(t.split()[-12:]) for t in texts if len(t.split()) >= 3]
        for was, kept in turns.get(f, []):
            if was.strip():
                quotes[store.quote(was)] = store.quote(kept)
            if not kept and len(was.split()) >= 3:
                needles.append(" ".join(was.split()[-12:]))
        if not quotes and not needles:
            continue
        q = cols["quotes"]
        for row in db.all(f"SELECT id, {q} FROM {table} WHERE {_file_is(cols)} AND {q} != ''", (f,)):
            said = row[q]
            now = quotes[said] if said in quotes else "" if any(n in said for n in needles) else said
            if now != said:
                db.execute(f"UPDATE {table} SET {q} = ? WHERE id = ?", (now, row["id"]))


def _spans_drawing_on(db: Database, ids: list[int], lines: list[tuple]) -> list[int]:
    """Spans whose name or summary may repeat what is forgotten: the memories' spans and their
    ancestors, and every span whose line range covers a forgotten line."""
    found: set[int] = set()
    if ids:
        found |= set(
            db.column(f"SELECT span_id FROM ideas WHERE id IN ({_in(ids)}) AND span_id IS NOT NULL", ids)
        )
    for f, ln in lines:
        found |= set(
            db.column(
                "SELECT id FROM spans WHERE source_file = ? AND start_line <= ? AND end_line >= ?",
                (f, ln, ln),
            )
        )
    frontier = set(found)
    while frontier:
        parents = set(
            db.column(
                f"SELECT parent_id FROM spans WHERE id IN ({_in(frontier)}) AND parent_id IS NOT NULL",
                sorted(frontier),
            )
        )
        frontier = parents - found
        found |= parents
    return sorted(found)


def rename_spans_after_edit(db: Database, idea_id: int, old_text: str) -> list[int]:
    """The topics of an edited memory (and their ancestors) whose name or summary still says its old
    text are named again from the memories in them (curate.edit; in the caller's transaction): the
    session-start digest and topic results show what the user wrote, not what they replaced."""
    said = " ".join(old_text.split())[:60]
    stale = [
        span_id
        for span_id in _spans_drawing_on(db, [idea_id], [])
        if (row := db.one("SELECT name, summary FROM spans WHERE id = ?", (span_id,)))
        and said in " ".join(f"{row['name']} {row['summary']}".split())
    ]
    return _rederive_spans(db, stale)[0]


def _with_descendants(db: Database, span_ids) -> set[int]:
    out = set(span_ids)
    frontier = set(span_ids)
    while frontier:
        children = set(
            db.column(f"SELECT id FROM spans WHERE parent_id IN ({_in(frontier)})", sorted(frontier))
        )
        frontier = children - out
        out |= children
    return out


def _rederive_spans(db: Database, span_ids: list[int]) -> tuple[list[int], list[int]]:
    """Rewrite each span's name and summary from the memories that remain in it (extractive), so
    an LLM paraphrase of a forgotten memory cannot survive there. Spans left with no memory are
    returned as emptied (the caller deletes them); session spans (named by id) are kept."""
    rederived, emptied = [], []
    for span_id in span_ids:
        row = db.one("SELECT depth FROM spans WHERE id = ?", (span_id,))
        if row is None:
            continue
        tree = sorted(_with_descendants(db, [span_id]))
        # What the conversation said names its topic before a note added to the session later (a
        # note's confidence of 1.0 made "Remember to buy milk" the name of a topic about a server).
        best = db.column(
            f"SELECT content FROM ideas WHERE span_id IN ({_in(tree)}) "
            f"ORDER BY {store.MADE_BY_NOTE.format(idea='ideas.id')}, confidence DESC, id LIMIT 2",
            tree,
        )
        if row["depth"] == 0:
            db.execute("UPDATE spans SET summary = '', needs_embedding = 0 WHERE id = ?", (span_id,))
            rederived.append(span_id)
        elif best:
            name = " ".join(best[0].split())
            name = name if len(name) <= 80 else name[:79] + "…"
            db.execute(
                "UPDATE spans SET name = ?, summary = ?, needs_embedding = 1 WHERE id = ?",
                (name, " ".join(best)[:600], span_id),
            )
            vectors.delete(db, "spans", [span_id])
            rederived.append(span_id)
        else:
            emptied.append(span_id)
    return rederived, emptied


def _replaced_from(db: Database, lines: list[tuple[str, int]]) -> list[int]:
    """Ideas an extractor replaced (an offline idea the LLM re-extracted) that were said on a
    forgotten line: their events still hold the words. Their `replace` event names the lines; one
    written before it did is tied to its batch by the time the batch was done (fallback_batches)."""
    forgotten = set(lines)
    if not forgotten:
        return []
    out = []
    for row in db.all(
        "SELECT object_id, at, old FROM memory_events WHERE kind = 'idea' AND action = 'replace' "
        "AND old IS NOT NULL"
    ):
        try:
            sources = json.loads(row["old"]).get("sources")
        except (ValueError, AttributeError):
            sources = None
        if sources is None:
            sources = [
                (batch["source_file"], int(line))
                for batch in db.all(
                    "SELECT source_file, lines FROM fallback_batches WHERE done_at = ?", (row["at"],)
                )
                for line in json.loads(batch["lines"])
            ]
        if any((f, int(ln)) in forgotten for f, ln in sources):
            out.append(row["object_id"])
    return out


def _scrub_events(db: Database, idea_ids: list[int], span_ids: list[int], texts: list[str]) -> int:
    count = 0
    for kind, ids in (("idea", idea_ids), ("span", span_ids)):
        for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
            count += db.execute(
                "UPDATE memory_events SET old = NULL, new = NULL WHERE kind = ? AND action != 'forget' "
                f"AND object_id IN ({_in(chunk)}) AND (old IS NOT NULL OR new IS NOT NULL)",
                (kind, *chunk),
            ).rowcount
    for text in texts:
        quoted = json.dumps(text, ensure_ascii=False)[1:-1]
        count += db.execute(
            "UPDATE memory_events SET old = NULL, new = NULL WHERE instr(old, ?1) > 0 OR instr(new, ?1) > 0",
            (quoted,),
        ).rowcount
    return count


def archive_copies(files: list[str]) -> list[Path]:
    """The archive copies (`maintain.archive_expiring`) of these transcripts that exist."""
    archive = config.paths().archive
    out = []
    for f in files:
        candidates = [archive / trust.archive_name(f)]
        try:  # the layout before archive names were hashed: the transcript's own path
            candidates.append(archive / (Path(f).relative_to(Path(f).anchor).as_posix() + ".gz"))
        except ValueError:
            pass
        out += [c for c in candidates if c.is_file() and c.resolve().is_relative_to(archive.resolve())]
    return out


def before_day(before: str) -> str:
    """The day a `--before` argument names, as conversation times start (YYYY-MM-DD, UTC)."""
    try:
        return datetime.fromisoformat(before).date().isoformat()
    except ValueError:
        raise TotalRecallError(f"--before takes a date like 2025-05-01, not {before!r}") from None


def _scope(
    session: str | None, projects: list[str] | None, before: str | None, columns: dict[str, str | None]
) -> tuple[str, tuple]:
    clauses, params = [], []
    if session:
        clauses.append(f"{columns['session']} = ?")
        params.append(session)
    if projects is not None:
        clauses.append(f"{columns['project']} IN ({_in(projects) or 'NULL'})")
        params += projects
    if before:
        day = before_day(before)
        said = f"substr({columns['time']}, 1, 10) < ?"
        if columns.get("read"):
            read = datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()
            t = columns["time"]
            clauses.append(f"(({t} IS NOT NULL AND {said}) OR ({t} IS NULL AND {columns['read']} < ?))")
            params += [day, read]
        else:
            clauses.append(said)
            params.append(day)
    return " AND ".join(clauses), tuple(params)


def add_tombstone(db: Database, row: dict, now: float) -> bool:
    """Record a tombstone another store exported (kind content: project + content hash; kind line:
    source file + line) unless an equal one is here; whether it was added."""
    if row["kind"] == "content":
        known = db.scalar(
            "SELECT 1 FROM tombstones WHERE kind = 'content' AND project IS ? AND content_hash = ?",
            (row.get("project"), row["content_hash"]),
            0,
        )
    else:
        known = db.scalar(
            "SELECT 1 FROM tombstones WHERE kind = 'line' AND source_file = ? AND source_line = ?",
            (row["source_file"], row["source_line"]),
            0,
        )
    if known:
        return False
    db.execute(
        "INSERT INTO tombstones (kind, project, content_hash, source_file, source_line, created_at, reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            row["kind"],
            row.get("project"),
            row.get("content_hash"),
            row.get("source_file"),
            row.get("source_line"),
            now,
            row.get("reason") or "import",
        ),
    )
    return True


def ideas_under_tombstone(db: Database, row: dict) -> list[int]:
    """Ideas of this store that an imported content tombstone says were forgotten elsewhere."""
    if row["kind"] != "content":
        return []
    return db.column(
        "SELECT id FROM ideas WHERE project IS ? AND content_hash = ?",
        (row.get("project"), row["content_hash"]),
    )
