"""One transcript's new lines -> memories: read, batch, extract, apply with the offset, embed.

Invariant (DESIGN.md I1): the index_state offset of a transcript advances only in the same
transaction that writes the memories extracted from the lines before it. Vectors are derived
data written afterwards; a memory without a vector keeps needs_embedding = 1 until the repair
pass (embed_pending) gives it one, and is found by BM25 meanwhile.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, memories, projects, state, store, transcript, trust
from total_recall.db import Database
from total_recall.errors import (
    EmbeddingError,
    ExtractionError,
    TranscriptError,
    TranscriptRefused,
    TransientError,
)
from total_recall.redact import Seen, hide, redact_batch
from total_recall.vectors import Vectors, embed_text, similar_ideas, similar_topics

log = structlog.get_logger(__name__)

READ_CHUNK_BYTES = 4 * 1024 * 1024
LAST_LINE = 2**31 - 1  # "to the end of the transcript" in a line range
SCAN_SLICE_BYTES = 256 * 1024 * 1024  # most bytes of one endless line streamed per read (file_timeout)
RECENT_MESSAGES = 8
KNOWN_IDEAS = 15
CONTEXT_QUERY_CHARS = 600  # the batch's opening is enough to find related topics; longer costs embedding time
# Chunks: the conversation's own text as retrieval units (DESIGN.md "Search").
# Everything a reader of the transcript sees is found by its words; what a person or Claude said in
# the conversation (and compaction summaries of it) is found by meaning too.
NOT_CHUNKED = {"injected_context", "synthetic", "warmup", "empty", "thinking_only", "interrupt", "copied"}
EMBEDDED_KINDS = {"prompt", "response", "subagent_prompt", "subagent_response", "compact_summary"}
NOT_EMBEDDED = {"headless_summarizer", "compaction_prompt", "meta", "command"}
# A headless summariser's lines (a session another tool ran with `claude -p "Summarize this part of a
# conversation ..."`) are found by their words as "summariser_prompt" / "summariser_response", never
# as what the user or Claude said in a session of theirs.
SUMMARISER = "summariser"
WINDOW_WORDS = 160  # about the 256 tokens the local model reads
STRIDE_WORDS = 120  # windows overlap by 40 words, so a sentence cut by one is whole in the next


class _ForgottenMeanwhile(Exception):
    """A forget committed while a batch of these lines was extracted: the batch is not stored."""


@dataclass
class IndexReport:
    source_file: str
    lines: int = 0
    messages: int = 0
    batches: int = 0
    ideas_added: int = 0
    llm_calls: int = 0
    fallbacks: int = 0
    rewritten: bool = False
    missing: bool = False
    interrupted: bool = False  # stopped between batches (shutdown); the rest stays queued
    deferred: bool = False  # daemon.file_timeout reached; progress is saved, the rest comes next turn
    fallbacks_pending: bool = False  # a batch of this run fell back offline (the LLM is failing)
    refused: str | None = None  # why the file was not read (path rule, exclusion, forgotten scope)
    moved_from: str | None = None  # the path this transcript had when it was last read (Claude Code moved it)
    scrubbed: int = 0  # rows stored earlier in which a secret found by this read was hidden


@dataclass
class Chunk:
    messages: list[transcript.Message]
    end_offset: int
    end_line: int
    fresh: list[transcript.Message] = field(default_factory=list)  # substantive, not yet indexed
    units: list[dict] = field(default_factory=list)  # chunks of its messages (message_chunks)
    # compaction summaries not yet indexed: read as memories without the extractor (extract/summary.py)
    summaries: list[transcript.Message] = field(default_factory=list)


class Indexer:
    """Owns the extractor(s) and embedder for one daemon (or one in-process drain)."""

    def __init__(self, db: Database, settings: config.Settings, *, embedder: Any = None, clock=time.time):
        self.db = db
        self.settings = settings
        self.clock = clock
        self.vectors = Vectors(db, settings, embedder=embedder, clock=clock)
        self._offline = None
        self._llm = None
        self._pending_calls: list[dict] = []
        self._fallback_parts: list[list[int]] = []  # lines of this chunk's parts that fell back offline
        self._window_vectors = WindowVectors(self)  # the offline extractor's embedder (see there)
        # The secret values hidden in earlier reads, hidden where they recur with no name beside them
        # (kept as keyed digests in the home, never as values; redact.Seen).
        self.seen = Seen(config.paths().seen_secrets)

    # -- components, created on first use -------------------------------------------------
    @property
    def embedder(self):
        return self.vectors.embedder

    def vectors_ok(self) -> bool:
        """Whether vectors can be written now (vectors.Vectors.ok); the offline extractor is rebuilt
        with the embedder the first time they can, for similarity and topic shifts."""
        known = self.vectors.known_ok()
        ok = self.vectors.ok()
        if ok and not known:
            self._offline = None
        return ok

    def offline(self):
        if self._offline is None:
            from total_recall.extract.offline import OfflineExtractor

            self._offline = OfflineExtractor(self._window_vectors if self.vectors_ok() else None)
        return self._offline

    def llm(self):
        if self._llm is None and self.settings.llm_enabled():
            from total_recall.extract.llm import LLMExtractor

            self._llm = LLMExtractor(self.settings, record_call=self._pending_calls.append)
        return self._llm

    # -- the work ---------------------------------------------------------------------------
    def process(
        self,
        path: str,
        *,
        session_hint: str | None = None,
        cwd_hint: str | None = None,
        should_stop=lambda: False,
    ) -> IndexReport:
        report = IndexReport(path)
        report.refused = trust.refusal(path, self.settings)
        if report.refused:
            log.warning("transcript_refused", file=path, reason=report.refused)
            return report
        progress = self._state(path)
        if not os.path.isfile(path):  # also False for names the OS refuses (ENAMETOOLONG)
            report.missing = True
            return report
        try:
            # Opened once and read through this one descriptor to the end of the run: the name
            # is never opened again, so a symlink swapped after the check cannot be followed.
            fh = trust.open_transcript(path, self.settings)
        except TranscriptRefused as exc:
            # Trigger: the file opened is not what the path rule allowed a moment ago (a symlink
            # swapped to another file, a FIFO). Why: only the file opened counts. Outcome: refused
            # as a bad path is, nothing read.
            report.refused = exc.reason
            log.warning("transcript_refused", file=path, reason=report.refused)
            return report
        except TranscriptError:
            if os.path.lexists(path):
                raise
            report.missing = True  # gone between the check and the open
            return report
        with fh:
            if not progress["byte_offset"] and (moved := self._moved_from(path, fh)):
                report.moved_from, progress = moved, self._state(path)
            finished = self._read_all(path, fh, progress, report, session_hint, cwd_hint, should_stop)
        if finished and report.batches and not report.fallbacks_pending:
            self.reextract_fallbacks()
        return report

    def _moved_from(self, path: str, fh) -> str | None:
        """Trigger: a transcript read for the first time that an indexed one, whose path no longer
        exists, was moved to: the same file name (a session's `<id>.jsonl`, an agent's
        `agent-<id>.jsonl`), the same first bytes (its head hash) and a line end where that one was
        read up to (transcript.was_rewritten says no rewrite; Claude Code 2.1.332's
        EnterWorktree moves the session's transcript into the worktree's project folder mid-session).
        Why: read as new, its lines would be copies of lines stored under a path that no longer
        exists (I152), so every `file:line` of the session before the move would point nowhere.
        Outcome: what names the old path names this one (state.move); reading goes on from where
        the old one left off. None when no single transcript fits."""
        name = Path(path).name
        moved = [
            row
            for row in state.indexed_named(self.db, name)
            if row["source_file"] != path
            and row["byte_offset"]
            and not os.path.lexists(row["source_file"])
            and not transcript.was_rewritten(
                Path(path), row["byte_offset"], row["head_hash"], fh=fh, recorded_tail_hash=row["tail_hash"]
            )
        ]
        if len(moved) != 1:
            return None
        old = moved[0]["source_file"]
        with self.db.write():
            if not state.move(self.db, old, path):
                return None
        log.info("transcript_moved", old=old, new=path, offset=moved[0]["byte_offset"])
        return old

    def _read_all(self, path, fh, progress, report, session_hint, cwd_hint, should_stop) -> bool:
        """Read and index the open transcript from its saved offset on; False when it stopped early
        (refused by what it says, interrupted, or deferred by daemon.file_timeout mid-read)."""
        p = Path(path)
        file_session = transcript.session_of(p, fh)
        session = progress["session_id"] or session_hint or file_session
        report.refused = self._scope_refusal(path, session, progress["project"] or cwd_hint)
        if report.refused:
            return False
        offset, line, scan = progress["byte_offset"], progress["line_number"], progress["scan_offset"]
        if offset and transcript.was_rewritten(
            p, offset, progress["head_hash"], fh=fh, recorded_tail_hash=progress["tail_hash"]
        ):
            log.info("transcript_rewritten", file=path, old_offset=offset)
            self._follow_moved_records(path, fh, line)
            offset, line, scan, report.rewritten = 0, 0, 0, True
        if scan and scan > _open_size(fh):
            scan = 0  # the file shrank under the saved scan position: scan again
        # daemon.file_timeout: how long one transcript may hold the daemon in one step.
        deadline = self.clock() + self.settings.daemon.file_timeout
        while True:
            result = transcript.read_new(
                p,
                offset,
                line,
                fh=fh,
                max_bytes=READ_CHUNK_BYTES,
                scan_from=scan or None,
                max_scan_bytes=SCAN_SLICE_BYTES,
            )
            # Once, here: nothing below sees, stores or sends a secret or a <private> part; a
            # secret value found in one message of the read is hidden in all of them (and in the
            # pieces of merged responses, which chunks and source lines are made from).
            texts = [m.text for m in result.messages]
            pieces = [t for m in result.messages if len(m.parts) > 1 for _, t in m.parts]
            commands = [m.command for m in result.messages]
            clean = redact_batch(texts + pieces, commands=commands, seen=self.seen)
            self._scrub_earlier(report)
            it = iter(clean[len(texts) :])
            for msg, text in zip(result.messages, clean):
                msg.text = text
                # One piece keeps its own line: a reply whose thinking line comes first says its
                # words on the next.
                msg.parts = (
                    [(n, next(it)) for n, _ in msg.parts]
                    if len(msg.parts) > 1
                    else [(msg.parts[0][0] if msg.parts else msg.line, text)]
                )
            redact_metadata(result.messages, file_session)
            if result.end_offset <= offset:
                if report.rewritten or result.scanned_to > max(scan, offset):
                    self._save_offset_only(path, result, progress, fh)
                if result.scanned_to > max(scan, offset) and result.scanned_to < _open_size(fh):
                    # Trigger: one endless line (a sparse or runaway file). Why: scanning it
                    # must neither hold the daemon nor start over on every hook. Outcome: the
                    # scan position is saved; go on while time remains, else next turn.
                    scan = result.scanned_to
                    if self.clock() < deadline and not should_stop():
                        continue
                    report.deferred = True
                break
            report.lines += result.end_line - line
            ident = self._identity(path, progress, result, session_hint, cwd_hint, file_session)
            report.refused = self._scope_refusal(path, ident["session"], ident["project"])
            if report.refused:
                # Trigger: the transcript itself names a forgotten or excluded session/project.
                # Why: nothing of it may be kept. Outcome: only the offset moves on.
                self._save_offset_only(path, result, {"session_id": None, "project": ""}, fh)
                return False
            ident = self._stored_under(ident)
            self._withhold(path, result.messages, {ident["checkout"], ident["project"]})
            self._mark_copies(path, result.messages)
            if report.rewritten:
                self._replace_edited(path, result.messages)
            marks = self._forget_marks(
                path, ident, result.messages[0].line if result.messages else 0, result.end_line
            )
            units = message_chunks(result.messages, self._turn_before(path, result.messages))
            for number, chunk in enumerate(self._chunks(path, result)):
                chunk.units = [
                    u
                    for u in units
                    if chunk.messages
                    and chunk.messages[0].line <= u["message_line"] <= chunk.messages[-1].last_line
                ]
                if should_stop():
                    # Trigger: SIGTERM/SIGINT. Why: shutdown should wait for one batch, not a
                    # whole backfill. Outcome: committed batches stay, the rest is read next time.
                    report.interrupted = True
                    return False
                if number and self.clock() >= deadline:
                    report.deferred = True  # file_timeout: at least one batch per turn, then the others
                    return False
                try:
                    # The read's head hash and that of the bytes before the chunk's end, from the
                    # descriptor the lines came from (transcript.was_rewritten compares both).
                    hashes = (result.head_hash, transcript.tail_hash(fh, chunk.end_offset))
                    self._index_chunk(path, ident, chunk, hashes, report, marks)
                except _ForgottenMeanwhile:
                    self._forgotten_while_extracted(path, chunk, report)
                    return False
            offset, line, scan = result.end_offset, result.end_line, result.scanned_to
            if scan:
                self._save_offset_only(path, result, progress, fh)
            self.embed_pending()
            if self.clock() >= deadline and offset < _open_size(fh):
                # Trigger: daemon.file_timeout. Why: other transcripts are waiting. Outcome: the
                # committed offset is the resume point; the daemon queues the rest behind them.
                report.deferred = True
                break
        return True

    def _follow_moved_records(self, path: str, fh, last_line: int) -> None:
        """Trigger: a rewritten transcript that still holds records stored from it, on other lines (a
        hand edit removed or inserted lines before them). Why: read again from its start, each moved
        record was a new line: stored, extracted and mentioned twice, its old rows left where other
        records now are, and a forgotten line's words stored again at its new place. Outcome: the
        moved records' rows move with them (store.move_lines), so the read again finds them known."""
        stored = memories.stored_uuids(self.db, path)
        if not stored:
            return
        now_at = transcript.record_lines(fh)
        ranges, gone = moved_ranges(stored, now_at, last_line), removed_ranges(stored, now_at, last_line)
        if ranges or gone:
            with self.db.write():
                for first, last in gone:  # a record no longer in the file, where others now are
                    store.drop_lines(self.db, path, first, last, "transcript rewritten", self.clock())
                moved = store.move_lines(self.db, path, ranges, "transcript rewritten", self.clock())
            log.info("records_moved", file=path, ranges=len(ranges), removed=len(gone), rows=moved)

    def _scrub_earlier(self, report: IndexReport) -> None:
        """Trigger: this read hid a secret value no earlier read knew (its name beside it now,
        "DB_PASSWORD=Tulip-Gate-8842"). Why: an earlier read may have stored it said bare ("we use
        Tulip-Gate-8842"): a row, a window, a memory, a topic's name. Outcome: it is hidden there too,
        changed rows are embedded again, and the daemon rewrites the digests (report.scrubbed)."""
        fresh = self.seen.take_fresh()
        if fresh:
            with self.db.write():
                report.scrubbed += store.scrub_values(self.db, fresh, hide, self.clock())

    def _replace_edited(self, path: str, messages: list) -> None:
        """Trigger: in a rewritten transcript, a record on the line it was stored from whose words
        changed (edited by hand: the same uuid, other text). Why: read again, its new words were a
        second row beside the old ones, and the old memories kept citing the line. Outcome: the old
        row, its windows and its memories' sources on those lines go (a memory said nowhere else
        with them); the read stores and extracts the record as it now is."""
        edited = [
            m
            for m in messages
            if m.uuid
            and m.skip_reason != "forgotten"
            and memories.edited_at(self.db, path, m.line, m.uuid, store.content_hash(m.text))
        ]
        if edited:
            with self.db.write():
                for m in edited:
                    store.drop_lines(self.db, path, m.line, m.last_line, "transcript edited", self.clock())
            log.info("records_edited", file=path, lines=[m.line for m in edited])

    def _scope_refusal(self, path: str, session: str | None, project: str | None) -> str | None:
        """Why a transcript of an allowed path must still not be indexed, or None."""
        scope = trust.forgotten(self.db, file=path, session=session)
        if scope:
            log.info("transcript_forgotten", file=path, scope=scope)
            return f"forgotten {scope}"
        pattern = trust.excluded(self.settings, project, Path(path).parent.name)
        if pattern:
            log.info("transcript_excluded", file=path, pattern=pattern)
            return f"excluded by {pattern}"
        return None

    def _turn_before(self, path: str, messages: list) -> str:
        """The text of the last conversational message before this read, as stored: a chunk's
        context must not depend on where a read started (a restart, a 4 MB read boundary)."""
        if not messages:
            return ""
        return memories.last_turn_text(self.db, path, messages[0].line, sorted(EMBEDDED_KINDS)) or ""

    def _withhold(self, path: str, messages: list, project_paths: set[str]) -> None:
        """Lines said while paused, forgotten line by line, or said in a project (the checkout or
        the project it is stored under) before it was forgotten keep their place but not their text."""
        if not messages:
            return
        ranges = trust.paused_ranges(self.db)
        cutoffs = [c for p in sorted(project_paths) if (c := trust.project_cutoff(self.db, p)) is not None]
        cutoff = max(cutoffs, default=None)
        forgotten = trust.forgotten_lines(self.db, path, messages[0].line, messages[-1].last_line)
        now = self.clock()
        said = None  # the time of the last record with one: a record with none (a title) came after it
        for m in messages:
            said = m.timestamp or said
            reason = "forgotten" if m.line in forgotten else trust.withheld(said, ranges, cutoff, now)
            later = {n for n, _ in m.parts if n in forgotten}
            # A response begun before a pause and written on during it: the pieces said then go too.
            held = {
                n for n, _ in m.parts if (t := m.part_times.get(n)) and trust.withheld(t, ranges, cutoff, now)
            }
            if not reason and (later or held):
                # A later line of a merged response was forgotten: its pieces go, the others stay
                # (as forget left the stored row: erasure._strip_merged_lines).
                m.parts = [(n, t) for n, t in m.parts if n not in later | held]
                m.text = "\n".join(t for _, t in m.parts)
                if not m.parts:  # nothing left: forgotten, or withheld as its last piece was
                    last = m.part_times.get(max(held)) if held and not later else None
                    reason = trust.withheld(last, ranges, cutoff, now) if last else "forgotten"
            if reason:
                m.text, m.skip_reason = "", reason
                if getattr(m, "parts", None):  # per-line pieces of a merged response, where present
                    m.parts = []

    def _mark_copies(self, path: str, messages: list) -> None:
        """Trigger: a line whose record uuid another transcript's stored line holds (a session
        forked with --fork-session, or a resume that copied history, starts its new transcript with
        copies of the old one's records). Why: what was said once must count once: no second
        mention, no second source, no second window of the same words. Outcome: the line is
        stored as skipped (`copied`); the original keeps its memories (I152). A copy of a line the
        user forgot is forgotten too: its words are not stored (I201, I202)."""
        uuids = [m.uuid for m in messages if m.uuid and m.skip_reason != "forgotten"]
        forgotten = memories.forgotten_records(self.db, uuids) if uuids else set()
        # A copied tool call, tool output or compaction summary as much as a prompt or a reply: its
        # words are searchable once, and forgetting the original takes the copy (copies_of).
        copied = memories.copied_uuids(self.db, path, uuids) if uuids else {}
        for m in messages:
            if m.uuid in forgotten and m.skip_reason != "forgotten":
                m.text, m.skip_reason, m.parts = "", "forgotten", []
            elif m.skip_reason != "forgotten" and m.uuid in copied:
                # What the original line holds now: a piece the user forgot of it is not copied back.
                m.skip_reason = "copied"
                if copied[m.uuid] != m.text:
                    m.text, m.parts = copied[m.uuid], [(m.line, copied[m.uuid])] if copied[m.uuid] else []
        titles = [m for m in messages if m.skip_reason == "title"]
        if titles:  # a forgotten session's title, known by its words (I212)
            known = memories.forgotten_records(
                self.db, [trust.title_record(m.text) for m in titles if m.text]
            )
            for m in titles:
                if m.text and trust.title_record(m.text) in known:
                    m.text, m.skip_reason, m.parts = "", "forgotten", []
            titles = [m for m in titles if m.skip_reason == "title"]
        if titles:
            # A session's title (no uuid, no time) names what it holds: in a transcript whose every
            # record is a forgotten one's copy (a fork of a forgotten session), it is forgotten too.
            here = [m.skip_reason == "forgotten" for m in messages if m.uuid]
            kept, gone = memories.record_counts(self.db, path)
            if all(here) and not kept and (any(here) or gone):
                for m in titles:
                    m.text, m.skip_reason, m.parts = "", "forgotten", []

    def _state(self, path: str) -> dict:
        row = state.of(self.db, path)
        if row is None:
            return {
                "byte_offset": 0,
                "line_number": 0,
                "head_hash": None,
                "tail_hash": None,
                "session_id": None,
                "project": None,
                "scan_offset": 0,
            }
        return dict(row)

    def _identity(self, path, progress, result, session_hint, cwd_hint, file_session) -> dict:
        """Session, project and branch of a transcript: what it says first, then the hook's hints."""
        msgs = result.messages
        session = progress["session_id"] or next((m.session_id for m in msgs if m.session_id), None)
        session = session or session_hint or file_session
        project = progress["project"] or next((m.cwd for m in msgs if m.cwd), None) or cwd_hint or ""
        branch = next((m.git_branch for m in reversed(msgs) if m.git_branch), None)
        progress["session_id"], progress["project"] = session, project
        return {"session": session, "project": project, "branch": branch}

    def _stored_under(self, ident: dict) -> dict:
        """The transcript's checkout (`checkout`, what index_state keeps) and the project its
        memories are stored under (`project`): the one every checkout of the same repository
        uses, on every machine (memories.project_for records the checkout's identity)."""
        checkout = ident["project"]
        if not checkout:
            return ident | {"checkout": checkout}
        stored = memories.project_for(
            self.db, checkout, projects.identity(checkout), self.settings.machine_name(), self.clock()
        )
        return ident | {"checkout": checkout, "project": stored}

    def _chunks(self, path: str, result: transcript.ReadResult) -> list[Chunk]:
        """Cut the read into batches of at most max_batch_messages substantive new messages."""
        known = self._known_lines(path, result.messages)
        limit = max(1, self.settings.daemon.max_batch_messages)
        gap = 60.0 * self.settings.daemon.idle_gap_minutes
        chunks, current, previous = [], Chunk([], 0, 0), None
        for msg in result.messages:
            if (
                gap > 0
                and current.fresh
                and msg.skip_reason is None
                and store.seconds_between(previous, msg.timestamp) >= gap
            ):
                # An idle gap ends a batch, so each batch lies on one side of it (a new topic starts).
                current.end_offset, current.end_line = (
                    current.messages[-1].end_offset,
                    current.messages[-1].last_line,
                )
                chunks.append(current)
                current = Chunk([], 0, 0)
            previous = msg.timestamp or previous
            current.messages.append(msg)
            if (msg.line, store.content_hash(msg.text)) in known:
                pass
            elif msg.skip_reason is None:
                current.fresh.append(msg)
            elif msg.skip_reason == "compact_summary":
                current.summaries.append(msg)
            if len(current.fresh) >= limit:
                current.end_offset, current.end_line = msg.end_offset, msg.last_line
                chunks.append(current)
                current = Chunk([], 0, 0)
        current.end_offset, current.end_line = result.end_offset, result.end_line
        if current.messages or not chunks:
            chunks.append(current)
        else:
            chunks[-1].end_offset, chunks[-1].end_line = result.end_offset, result.end_line
        return chunks

    def _known_lines(self, path: str, messages: list) -> set[tuple[int, str]]:
        if not messages:
            return set()
        first, last = messages[0].line, messages[-1].last_line
        known = memories.message_hashes(self.db, path, first, last)
        # Lines the user forgot are never extracted again (nor sent to an endpoint).
        forgotten = trust.forgotten_lines(self.db, path, first, last)
        known |= {
            (m.line, store.content_hash(m.text))
            for m in messages
            if any(n in forgotten for n in range(m.line, m.last_line + 1))
        }
        return known

    def _forgotten_while_extracted(self, path: str, chunk: Chunk, report: IndexReport) -> None:
        """Trigger: a forget committed while this batch was extracted (a slow LLM call). Why:
        nothing it covers may be stored after it. Outcome: the batch is dropped (its LLM calls are
        recorded) and the rest is read again from the committed offset under the forget's rules (a
        forgotten session is refused, forgotten lines are withheld)."""
        with self.db.write():
            self._write_calls(self.clock())
        log.info("batch_forgotten_while_extracted", file=path, end_line=chunk.end_line)
        report.deferred = True

    def _forget_marks(self, path: str, ident: dict, first: int, last: int) -> tuple:
        """What forgets have said so far about lines first..last: the transcript's or its session's
        scope, its projects' cutoffs, its forgotten lines. Taken when they are read and again where
        a batch of them is written: a change means a forget came in between."""
        projects_of = sorted({p for p in (ident.get("checkout"), ident["project"]) if p})
        return (
            first,
            last,
            trust.forgotten(self.db, file=path, session=ident["session"]),
            tuple(trust.project_cutoff(self.db, p) for p in projects_of),
            frozenset(trust.forgotten_lines(self.db, path, first, last)),
        )

    def _still_unforgotten(self, path: str, ident: dict, marks: tuple) -> None:
        """Inside the write transaction: raise _ForgottenMeanwhile when a forget committed since the
        lines were read. On PostgreSQL the shared lock waits for a forget in progress (it holds the
        lock exclusively until it commits); SQLite's writer lock already does."""
        self.db.lock("forget", shared=True)
        if self._forget_marks(path, ident, marks[0], marks[1]) != marks:
            raise _ForgottenMeanwhile(path)

    def _index_chunk(
        self, path: str, ident: dict, chunk: Chunk, hashes: tuple, report: IndexReport, marks: tuple
    ) -> None:
        fresh = chunk.fresh
        units = self._new_units(path, chunk.units)
        query = self._batch_vector(units) if fresh else None
        self._window_vectors.windows = windows_of(units)
        try:
            outputs, extractor_name = self._extract(path, ident, fresh, query) if fresh else ([], "none")
        finally:
            self._window_vectors.windows = []
        if chunk.summaries:
            outputs += summary_outputs(chunk.summaries, ident["project"])
            extractor_name = extractor_name if fresh else "summary"
        now = self.clock()
        point_at_text_lines(outputs, fresh + chunk.summaries)
        times = {n: m.timestamp for m in chunk.messages for n in range(m.line, m.last_line + 1)}
        lines = [m.line for m in chunk.messages] or [chunk.end_line]
        ctx = store.BatchContext(
            source_file=path,
            session_id=ident["session"],
            project=ident["project"],
            git_branch=ident["branch"],
            line_times=times,
            first_line=min(lines),
            last_line=max(lines),
            cause=f"extract:{extractor_name}",
            now=now,
            idle_gap=60.0 * self.settings.daemon.idle_gap_minutes,
            machine=self.settings.machine_name(),
        )
        vectors = self._embed_batch(outputs, units)
        fell_back, self._fallback_parts = self._fallback_parts, []
        report.fallbacks_pending |= bool(fell_back)
        with self.db.write():
            self._still_unforgotten(path, ident, marks)
            covered, skips = set(), {}
            for output in outputs:
                applied = store.apply_output(self.db, ctx, output, vectors)
                report.ideas_added += len(applied.ideas_added)
                covered |= applied.lines_with_items
                skips.update({s["line"]: s["reason"] for s in output.get("skip_lines", [])})
            self._write_messages(path, ident, chunk, covered, skips, now)
            for m in chunk.summaries:  # after the messages rows: a summary of this batch is one of them
                close_dropped_todos(self.db, ctx, m, path)
            self._write_units(path, ident, units, vectors)
            self._write_calls(now)
            self._write_offset(path, ident, chunk, hashes, now)
            state.add_fallback_batches(self.db, path, ident["session"], ident["project"], fell_back, now)
        report.batches += bool(fresh)
        report.messages += len(fresh)
        report.llm_calls += extractor_name == "llm"

    def _new_units(self, path: str, units: list[dict]) -> list[dict]:
        """The chunks not stored yet, and not of a line the user forgot."""
        if not units:
            return []
        low, high = min(u["source_line"] for u in units), max(u["source_line"] for u in units)
        have = memories.chunk_keys(self.db, path, low, high)
        forgotten = trust.forgotten_lines(self.db, path, min(u["message_line"] for u in units), high)
        return [
            u
            for u in units
            if (u["source_line"], u["seq"]) not in have
            and u["source_line"] not in forgotten
            and u["message_line"] not in forgotten
        ]

    def _write_units(self, path: str, ident: dict, units: list[dict], vectors: dict[str, bytes]) -> None:
        for u in units:
            store.insert_chunk(
                self.db,
                {
                    **u,
                    "source_file": path,
                    "session_id": ident["session"],
                    "project": ident["project"],
                    "needs_embedding": u["embed"],
                    "machine": self.settings.machine_name(),
                },
                vectors.get(embed_text(u)) if u["embed"] else None,
            )

    def _embed_batch(self, outputs: list[dict], units: list[dict]) -> dict[str, bytes]:
        """Vectors for the batch's new items and chunks, made before the write transaction so it
        stays short, in one call (the embedder sorts by length).

        Trigger: the embedder fails. Why: vectors are derived data. Outcome: the ideas and chunks
        are stored with needs_embedding = 1 and the repair pass embeds them later.
        """
        shared = shared_windows(outputs, units)
        texts = {item["content"].strip() for out in outputs for item in out.get("items", [])} - shared.keys()
        texts |= {embed_text(u) for u in units if u["embed"]}
        texts = sorted(texts)
        if not texts or not self.vectors_ok():
            return {}
        from total_recall.embed import to_blob

        try:
            matrix = self.embedder.embed(texts)
        except (EmbeddingError, TransientError) as exc:
            log.warning("embedding_failed", count=len(texts), error=str(exc))
            return {}
        vectors = {text: to_blob(vec) for text, vec in zip(texts, matrix)}
        return vectors | {item: vectors[window] for item, window in shared.items()}

    def _batch_vector(self, units: list[dict]) -> bytes | None:
        """The batch's meaning for finding related topics and ideas: the mean of its chunks' vectors.

        They are needed anyway (the embedder's cache hands them to _embed_batch), so the batch is
        not embedded a second time as one long query text. None when nothing of it is embedded.
        """
        texts = [embed_text(u) for u in units if u["embed"]]
        if not texts or not self.vectors_ok():
            return None
        import numpy as np

        from total_recall.embed import to_blob

        try:
            mean = np.asarray(self.embedder.embed(texts), dtype="float32").mean(axis=0)
        except (EmbeddingError, TransientError):
            return None
        norm = float(np.linalg.norm(mean))
        return to_blob(mean / norm) if norm > 0 else None

    def _extract(
        self, path: str, ident: dict, fresh: list, query: bytes | None = None
    ) -> tuple[list[dict], str]:
        """One extraction call per batch: the LLM when configured and within budget, else offline.

        Trigger: the LLM fails after its retries, or today's token budget is spent. Why: memory
        must never stop or lose messages because an endpoint is down or costly. Outcome: the
        same batch goes through the offline extractor, and stats shows the fallback.
        """
        from total_recall.extract import protocol

        new = [{"role": m.role, "content": m.text, "timestamp": m.timestamp, "line": m.line} for m in fresh]
        context = self._context(path, ident, new, query)
        max_chars = self.settings.llm.max_prompt_chars
        outputs, name = [], "offline"
        for part in protocol.split_for_budget(new, max_chars):
            obj = protocol.build_input(
                context["hierarchy"],
                context["recent"],
                part,
                context["related"],
                context["known"],
                max_chars=max_chars,
            )
            raw, name = self._call_extractor(obj)
            lines = {m["line"] for m in part}
            if name == "fallback":
                self._fallback_parts.append(sorted(lines))
                name = "offline"
            validated = protocol.validate_output(raw, lines, {k["id"] for k in context["known"]})
            if validated.dropped:
                log.info(
                    "items_dropped", file=path, dropped=validated.dropped, problems=validated.problems[:5]
                )
            if validated.cut:
                log.warning(
                    "extractor_output_capped", file=path, cut=validated.cut, problems=validated.problems[-3:]
                )
            outputs.append(validated.output)
        return outputs, name

    def _call_extractor(self, obj: dict) -> tuple[dict, str]:
        llm = self.llm()
        if llm is not None and not self.budget_exhausted():
            try:
                return llm.extract(obj), "llm"
            except ExtractionError as exc:
                log.warning("llm_fallback", error=str(exc))
                self._pending_calls.append(
                    {
                        "extractor": "fallback",
                        "ok": 0,
                        "error": str(exc)[:500],
                        "messages": len(obj["new_messages"]),
                    }
                )
                raw = self.offline().extract(obj)
                self._pending_calls.append(
                    {"extractor": "offline", "ok": 1, "messages": len(obj["new_messages"])}
                )
                return raw, "fallback"
        raw = self.offline().extract(obj)
        self._pending_calls.append({"extractor": "offline", "ok": 1, "messages": len(obj["new_messages"])})
        return raw, "offline"

    def reextract_fallbacks(self, limit: int = 5) -> int:
        """Give batches that fell back offline during an LLM outage to the LLM, now that it may answer.

        Trigger: after a transcript is processed and on the heartbeat, with an LLM configured and
        budget left. Why: the offline answer was a stopgap ("retry until it works"). Outcome: the
        offline ideas (unpinned, said only there) of the lines the answer speaks of are replaced by
        the LLM's, in one transaction; on failure the batch waits for the next try and nothing changes.
        """
        llm = self.llm()
        if llm is None:
            return 0
        from total_recall.extract import protocol

        done = 0
        for batch in state.fallback_batches(self.db, limit):
            if self.budget_exhausted():
                break
            batch_id, path, session, project = (
                batch["id"],
                batch["source_file"],
                batch["session_id"],
                batch["project"],
            )
            lines = [int(x) for x in json.loads(batch["lines"])]
            new = [
                {
                    "role": r["role"],
                    "content": r["content"],
                    "timestamp": r["timestamp"],
                    "line": r["source_line"],
                }
                for r in memories.messages_at(self.db, path, lines)
            ]
            ident = {"session": session, "project": project or "", "branch": None}
            if not new:
                with self.db.write():
                    state.fallback_done(self.db, batch_id, self.clock(), attempted=False)
                continue
            context = self._context(path, ident, new)
            max_chars = self.settings.llm.max_prompt_chars
            obj = protocol.build_input(
                context["hierarchy"], [], new, context["related"], context["known"], max_chars=max_chars
            )
            marks = self._forget_marks(path, ident, min(lines), LAST_LINE)
            try:
                raw = llm.extract(obj)
            except ExtractionError as exc:
                log.info("llm_still_failing", file=path, error=str(exc)[:200])
                with self.db.write():
                    self._write_calls(self.clock())
                    state.fallback_failed(self.db, batch_id)
                break  # the outage goes on; the next heartbeat tries again
            output = protocol.validate_output(
                raw, {m["line"] for m in new}, {k["id"] for k in context["known"]}
            ).output
            # Trigger: the answer says nothing (no conforming item, no skip reason) of some lines:
            # garbage, wrong types, lines of other batches. Why: silence is no statement that a
            # line holds nothing; replacing would delete its offline memories for nothing.
            # Outcome: only the lines the answer speaks of have their offline memories replaced.
            spoken = {int(i["source_line"]) for i in output["items"]}
            spoken |= {int(s["line"]) for s in output["skip_lines"]}
            if spoken != set(lines):
                log.warning("llm_reextract_partial", file=path, lines=len(lines), answered=len(spoken))
            self._point_from_chunks(path, output)
            vectors = self._embed_batch([output], [])
            now = self.clock()
            ctx = store.BatchContext(
                source_file=path,
                session_id=session,
                project=project or "",
                git_branch=None,
                line_times={m["line"]: m["timestamp"] for m in new},
                first_line=min(lines),
                last_line=max(lines),
                cause="extract:llm-retry",
                now=now,
                machine=self.settings.machine_name(),
            )
            try:
                with self.db.write():
                    self._still_unforgotten(path, ident, marks)
                    stale = memories.ideas_said_only_on(self.db, path, sorted(spoken)) if spoken else []
                    store.delete_ideas(self.db, stale, "extract:llm-retry", now)
                    store.apply_output(self.db, ctx, output, vectors)
                    self._write_calls(now)
                    state.fallback_done(self.db, batch_id, now)
            except _ForgottenMeanwhile:
                # Trigger: a forget of these lines committed during the call. Outcome: the answer
                # is dropped; the batch is tried again from what the forget left (or not at all).
                with self.db.write():
                    self._write_calls(now)
                continue
            done += 1
        return done

    def _point_from_chunks(self, path: str, output: dict) -> None:
        """point_at_text_lines for a batch read back from the database: a message's pieces are its
        chunks (line and text), stored when it was first indexed."""
        for item in output.get("items", []):
            parts = memories.message_pieces(self.db, path, int(item["source_line"]))
            if {n for n, _ in parts} <= {int(item["source_line"])}:
                continue  # no pieces, or all on the message's first line
            item["message_line"] = int(item["source_line"])
            item["source_line"] = transcript.line_holding(parts, item["content"], item["message_line"])

    def budget_exhausted(self) -> bool:
        pending = sum(c.get("prompt_tokens", 0) + c.get("completion_tokens", 0) for c in self._pending_calls)
        return state.budget_exhausted(
            self.db, self.settings.llm.daily_token_budget, self.clock(), pending=pending
        )

    def _context(self, path: str, ident: dict, new: list[dict], query: bytes | None = None) -> dict:
        session, project = ident["session"], ident["project"]
        topic = memories.open_topic(self.db, session, path)
        span = topic and memories.open_subspan(self.db, topic["id"])
        recent = memories.messages_before(self.db, session, path, new[0]["line"], RECENT_MESSAGES)
        known = memories.latest_ideas(self.db, project, KNOWN_IDEAS)
        related, similar = self._similar(
            project, session, " ".join(m["content"] for m in new)[:CONTEXT_QUERY_CHARS], query
        )
        known_ids = {k["id"] for k in known}
        known += [s for s in similar if s["id"] not in known_ids]
        return {
            "hierarchy": {
                "project": {"name": projects.short_name(project), "summary": ""},
                "topic": {"name": topic["name"], "summary": topic["summary"]} if topic else None,
                "span": {"name": span["name"], "summary": span["summary"]} if span else None,
            },
            "recent": [
                {
                    "role": r["role"],
                    "content": r["content"],
                    "timestamp": r["timestamp"],
                    "line": r["source_line"],
                }
                for r in reversed(recent)
            ],
            "related": related,
            "known": [{"id": k["id"], "type": k["intent"], "content": k["content"]} for k in known],
        }

    def _similar(
        self, project: str, session: str, text: str, blob: bytes | None = None
    ) -> tuple[list[dict], list]:
        """Top 3 topics of other sessions and the 10 most similar ideas of this project."""
        if (blob is None and not text.strip()) or not self.vectors_ok():
            return [], []
        from total_recall.embed import to_blob

        if blob is None:
            try:
                blob = to_blob(self.embedder.embed([text])[0])
            except (EmbeddingError, TransientError):
                return [], []
        topics = similar_topics(self.db, blob, session)
        ideas = similar_ideas(self.db, blob, project or "")
        return [
            {"name": t["name"], "summary": t["summary"], "session": t["session_id"]} for t in topics
        ], ideas

    def _write_messages(self, path, ident, chunk: Chunk, covered: set, skips: dict, now: float) -> None:
        fresh_lines = {m.line for m in chunk.fresh}
        rows = []
        for m in chunk.messages:
            reason = m.skip_reason
            if reason is None and m.line not in fresh_lines:
                reason = "already_indexed"
            elif reason is None and m.line not in covered:
                reason = skips.get(m.line, "no_memory_extracted")
            rows.append(
                (
                    path,
                    m.line,
                    ident["session"],
                    ident["project"],
                    m.git_branch or ident["branch"],
                    m.role,
                    m.kind,
                    m.text,
                    store.content_hash(m.text),
                    m.timestamp,
                    reason,
                    now,
                    m.uuid,
                )
            )
        store.insert_messages(self.db, rows)

    def _write_calls(self, now: float) -> None:
        # Copy and clear in place: the LLM extractor holds a reference to this very list.
        calls = list(self._pending_calls)
        self._pending_calls.clear()
        state.record_calls(self.db, calls, now)

    def _write_offset(
        self, path: str, ident: dict, chunk: Chunk, hashes: tuple, now: float, scan_offset: int = 0
    ) -> None:
        """The chunk's end as how far the transcript is indexed; `hashes`: (head, tail) hashes."""
        state.save(
            self.db,
            path,
            session=ident["session"],
            project=ident.get("checkout", ident["project"]),
            byte_offset=chunk.end_offset,
            line_number=chunk.end_line,
            head_hash=hashes[0],
            file_size=_size(path),
            now=now,
            scan_offset=scan_offset,
            tail_hash=hashes[1],
        )

    def _save_offset_only(self, path: str, result, progress: dict, fh) -> None:
        ident = {"session": progress["session_id"], "project": progress["project"] or ""}
        hashes = (result.head_hash, transcript.tail_hash(fh, result.end_offset))
        with self.db.write():
            self._write_offset(
                path,
                ident,
                Chunk([], result.end_offset, result.end_line),
                hashes,
                self.clock(),
                result.scanned_to,
            )

    # -- vectors ---------------------------------------------------------------------------
    def embed_pending(self, limit: int = 512) -> int:
        """The repair pass (vectors.Vectors.embed_pending) with this indexer's embedder."""
        return self.vectors.embed_pending(limit)


def moved_ranges(stored: list[tuple[int, str]], now_at: dict[str, int], last_line: int) -> list[tuple]:
    """The (first, last, by) line ranges a rewrite moved, from the stored lines' record uuids (by line)
    and where the file now holds them: a stored record's range runs to the line before the next
    stored record's (the lines of a response written over several, and the records between), no
    longer than its new place leaves before the next record still there. A record no longer in the
    file moves nothing; adjacent ranges moved alike are one."""
    firsts = sorted({line for line, _ in stored})
    present = sorted((now_at[u], line) for line, u in stored if u in now_at)
    ranges: list[tuple[int, int, int]] = []
    for k, (new, old) in enumerate(present):
        last = _record_end(firsts, old, last_line)
        if k + 1 < len(present):
            last = min(last, old + present[k + 1][0] - new - 1)
        if new == old or last < old:
            continue
        if ranges and ranges[-1][2] == new - old and ranges[-1][1] + 1 == old:
            ranges[-1] = (ranges[-1][0], last, new - old)
        else:
            ranges.append((old, last, new - old))
    return ranges


def removed_ranges(stored: list[tuple[int, str]], now_at: dict[str, int], last_line: int) -> list[tuple]:
    """The (first, last) line ranges of stored records no longer in the rewritten file whose lines
    it still reaches (the records after them, or a record put in their place, are there): their rows
    would cite lines that say something else. A record past the file's last record (a truncation)
    keeps its rows, as before."""
    firsts = sorted({line for line, _ in stored})
    reach = max(now_at.values(), default=0)
    return [
        (line, _record_end(firsts, line, last_line))
        for line, u in stored
        if u not in now_at and line <= reach
    ]


def _record_end(firsts: list[int], line: int, last_line: int) -> int:
    """The last line of the stored record that starts at `line`: the line before the next stored
    record's first (`firsts`, sorted), else the last line read."""
    nxt = bisect.bisect_right(firsts, line)
    return firsts[nxt] - 1 if nxt < len(firsts) else max(last_line, line)


def redact_metadata(messages: list[transcript.Message], fallback_session: str) -> None:
    """The strings a record carries beside its text that are stored too (session id, cwd, branch):
    one shaped like a secret is not kept. Claude Code never writes such a value; a hand-made or
    hostile file might. The session falls back to the file's; a cwd or branch keeps its redacted
    form (a few distinct values per read: about 0.1 ms)."""
    values = sorted({v for m in messages for v in (m.session_id, m.cwd, m.git_branch) if v})
    changed = {v: clean for v, clean in zip(values, redact_batch(values)) if clean != v} if values else {}
    for m in messages if changed else ():
        if m.session_id in changed:
            m.session_id = fallback_session
        m.cwd, m.git_branch = changed.get(m.cwd, m.cwd), changed.get(m.git_branch, m.git_branch)


def windows(text: str) -> list[str]:
    """The text cut into overlapping windows of WINDOW_WORDS words (one window when it is short)."""
    words = text.split()
    if len(words) <= WINDOW_WORDS:
        return [text.strip()] if words else []
    out = []
    for start in range(0, len(words), STRIDE_WORDS):
        out.append(" ".join(words[start : start + WINDOW_WORDS]))
        if start + WINDOW_WORDS >= len(words):
            break
    return out


def message_chunks(messages: list[transcript.Message], previous: str = "") -> list[dict]:
    """The retrieval units of a read: each conversational line's text in windows, with the end of
    the turn before as context. Tool results and tool calls are found by words only (no vector):
    they are long, many, and rarely what a question paraphrases."""
    out: list[dict] = []
    for m in messages:
        if m.skip_reason in NOT_CHUNKED or not m.text.strip():
            continue
        context = store.quote(previous)
        seqs: dict[int, int] = {}
        # a headless summariser's session is another tool's: its prompt is not the user's
        kind = f"{SUMMARISER}_{m.kind}" if m.skip_reason == "headless_summarizer" else m.kind
        for number, piece in m.parts:
            tool = (
                m.kind not in EMBEDDED_KINDS
                or m.skip_reason in NOT_EMBEDDED
                or piece.startswith(transcript.TOOL_CALL)
            )
            for window in windows(piece):
                seq = seqs.get(number, 0)
                seqs[number] = seq + 1
                out.append(
                    {
                        "source_line": number,
                        "message_line": m.line,
                        "seq": seq,
                        "role": m.role,
                        "kind": kind,
                        "timestamp": m.timestamp,
                        "content": window,
                        "context": "" if tool else context,
                        "embed": not tool,
                    }
                )
        if m.kind in EMBEDDED_KINDS:
            previous = m.text
    return out


WORD = re.compile(r"\w+")
SHARE_WINDOW = 0.8  # an item holding at least this share of a window's words takes the window's vector


def shared_windows(outputs: list[dict], units: list[dict]) -> dict[str, str]:
    """Item text -> the embed text of the window on its line that it mostly is.

    An item that is most of an embedded window (at least SHARE_WINDOW of its words) means what the
    window means, so it takes the window's vector instead of being embedded a second time: on short
    conversational turns that is almost half of the items, and embedding is four fifths of the
    indexing time. Measured on the LoCoMo roles box: recall unchanged (tune and confirm); the
    window's vector has median cosine 0.97 to the item's own (0.83 at a share of 0.5-0.8, too far
    for the duplicate rule's 0.92, hence 0.8).
    """
    windows_by_line: dict[int, list[tuple[set[str], int, str]]] = {}
    for u in units:
        if u["embed"]:
            windows_by_line.setdefault(int(u["source_line"]), []).extend(windows_of([u]))
    out = {}
    for output in outputs:
        for item in output.get("items", []):
            window = window_for(item["content"], windows_by_line.get(int(item["source_line"])) or [])
            if window is not None:
                out[item["content"].strip()] = window
    return out


def windows_of(units: list[dict]) -> list[tuple[set[str], int, str]]:
    """(word set, word count, embed text) of every embedded window."""
    out = []
    for u in units:
        if u["embed"]:
            words = WORD.findall(u["content"].lower())
            out.append((set(words), len(words), embed_text(u)))
    return out


def window_for(text: str, windows: list[tuple[set[str], int, str]]) -> str | None:
    """The embed text of the window that `text` mostly is (SHARE_WINDOW both ways), or None."""
    if not windows:
        return None
    words = WORD.findall(text.lower())
    vocabulary, size, window = max(windows, key=lambda c: len(c[0].intersection(words)))
    covers = len(words) >= SHARE_WINDOW * size
    inside = len(vocabulary.intersection(words)) >= SHARE_WINDOW * len(words)
    return window if words and covers and inside else None


class WindowVectors:
    """The offline extractor's embedder: a text that mostly is one of the batch's windows gets
    that window's vector, as the stored idea will (shared_windows).

    The extractor embeds its items to compare them (relations, duplicates, topic shifts). Those
    that are their whole window would cost a second model call for a vector the stored idea does
    not use; the windows are already embedded (the batch vector), so the cache serves them.
    Measured (BENCHMARKS.md §2): it removed about half of the extractor's embedded tokens.
    """

    def __init__(self, indexer: Indexer):
        self.indexer = indexer
        self.windows: list[tuple[set[str], int, str]] = []  # this batch's, set around extraction

    @property
    def model_id(self) -> str:
        return self.indexer.embedder.model_id

    @property
    def dim(self) -> int:
        return self.indexer.embedder.dim

    def embed(self, texts: list[str]) -> Any:
        if self.windows:
            texts = [window_for(t, self.windows) or t for t in texts]
        return self.indexer.embedder.embed(texts)


def summary_outputs(summaries: list[transcript.Message], project: str) -> list[dict]:
    """What compaction summaries say is still to do, failed and was fixed, and where the work was
    (extract/summary.py), as validated extractor outputs of their own lines: no extractor call."""
    from total_recall.extract import protocol, summary

    outputs = []
    for m in summaries:
        found = summary.items(m.text, m.line, project)
        if found:
            outputs.append(protocol.validate_output({"items": found}, {m.line}).output)
    return outputs


def close_dropped_todos(
    db: Database, ctx: store.BatchContext, summary_message: transcript.Message, path: str
) -> None:
    """The todos an earlier summary of the session listed and this one does not: closed at its line.
    A subagent's own summary (a sidechain that is not the compaction agent's) speaks for the subagent's
    work, not the session's, and closes nothing."""
    from total_recall.extract import summary

    m = summary_message
    if m.is_sidechain and not ((m.agent_id or "").startswith("acompact") or "agent-acompact" in path):
        return
    kept = summary.pending(m.text)
    if kept is not None:
        store.close_summary_todos(db, ctx, m.line, m.timestamp, kept)


def point_at_text_lines(outputs: list[dict], messages: list[transcript.Message]) -> None:
    """Each item's `source_line` becomes the physical line that holds its words.

    The extractor sees one merged message per response (thinking, text and tool_use lines with
    one `message.id`) under its first line; a user opening `file:line` must land on the text.
    The message's first line stays as `message_line` for relations and coverage.
    """
    by_line = {m.line: m for m in messages}
    for output in outputs:
        for item in output.get("items", []):
            message = by_line.get(int(item["source_line"]))
            # A response whose thinking line comes first has its words on a later line, even when
            # that line is its only piece.
            if message is None or {n for n, _ in message.parts} <= {message.line}:
                continue
            item["message_line"] = message.line
            item["source_line"] = message.line_of(item["content"])


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _open_size(fh) -> int:
    """The open transcript's size now (it grows while the session runs)."""
    return os.fstat(fh.fileno()).st_size
