"""One transcript's new lines -> memories: read, batch, extract, apply with the offset, embed.

Invariant (DESIGN.md I1): the index_state offset of a transcript advances only in the same
transaction that writes the memories extracted from the lines before it. Vectors are derived
data written afterwards; a memory without a vector keeps needs_embedding = 1 until the repair
pass (embed_pending) gives it one, and is found by BM25 meanwhile.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, executor, transcript, trust
from total_recall.db import Database
from total_recall.errors import EmbeddingError, ExtractionError, TransientError
from total_recall.redact import redact_batch

log = structlog.get_logger(__name__)

READ_CHUNK_BYTES = 4 * 1024 * 1024
RECENT_MESSAGES = 8
KNOWN_IDEAS = 15
VECTOR_RETRY_SECONDS = 15.0
CONTEXT_QUERY_CHARS = 600  # the batch's opening is enough to find related topics; longer costs embedding time


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
    refused: str | None = None  # why the file was not read (path rule, exclusion, forgotten scope)


@dataclass
class Chunk:
    messages: list[transcript.Message]
    end_offset: int
    end_line: int
    fresh: list[transcript.Message] = field(default_factory=list)  # substantive, not yet indexed


def project_name(project: str) -> str:
    """The short, typeable name of a project path: its last folder, lower-cased."""
    return Path(project).name.lower() if project else ""


def today_start_utc(now: float) -> float:
    day = datetime.fromtimestamp(now, tz=timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return day.timestamp()


class Indexer:
    """Owns the extractor(s) and embedder for one daemon (or one in-process drain)."""

    def __init__(self, db: Database, settings: config.Settings, *, embedder: Any = None, clock=time.time):
        self.db = db
        self.settings = settings
        self.clock = clock
        self._embedder = embedder
        self._vectors_ok: bool | None = None
        self._vectors_retry_at = 0.0
        self._offline = None
        self._llm = None
        self._pending_calls: list[dict] = []

    # -- components, created on first use -------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from total_recall.embed import get_embedder

            self._embedder = get_embedder(self.settings)
        if not hasattr(self._embedder, "inner"):
            from total_recall.embed import CachedEmbedder

            self._embedder = CachedEmbedder(self._embedder)
        return self._embedder

    def vectors_ok(self) -> bool:
        """Whether vectors can be written now (sqlite-vec loaded, model matches the database)."""
        if self._vectors_ok is None and self.clock() >= self._vectors_retry_at:
            from total_recall import db as dbmod

            try:
                self._vectors_ok = self.db.has_vec and dbmod.ensure_vector_tables(
                    self.db, self.embedder.model_id, self.embedder.dim
                )
            except (EmbeddingError, TransientError) as exc:
                # Trigger: the embedding backend cannot start (e.g. the endpoint is down while
                # its dimension is probed). Why: indexing must go on, and the outage may end.
                # Outcome: memories keep needs_embedding = 1; we ask again in a minute.
                log.warning("embedder_unavailable", error=str(exc))
                self._vectors_retry_at = self.clock() + VECTOR_RETRY_SECONDS
                return False
            if self._vectors_ok:
                self._offline = None  # rebuilt with the embedder for similarity and topic shifts
        return bool(self._vectors_ok)

    def offline(self):
        if self._offline is None:
            from total_recall.extract.offline import OfflineExtractor

            self._offline = OfflineExtractor(self.embedder if self.vectors_ok() else None)
        return self._offline

    def llm(self):
        if self._llm is None and self.settings.llm_enabled():
            from total_recall.extract.llm import LLMExtractor

            self._llm = LLMExtractor(self.settings, record_call=self._pending_calls.append)
        return self._llm

    # -- the work ---------------------------------------------------------------------------
    def process(self, path: str, *, session_hint: str | None = None, cwd_hint: str | None = None,
                should_stop=lambda: False) -> IndexReport:
        report = IndexReport(path)
        report.refused = trust.refusal(path, self.settings)
        if report.refused:
            log.warning("transcript_refused", file=path, reason=report.refused)
            return report
        state = self._state(path)
        p = Path(path)
        if not os.path.isfile(path):  # also False for names the OS refuses (ENAMETOOLONG)
            report.missing = True
            return report
        session = state["session_id"] or session_hint or transcript.session_of(p)
        report.refused = self._scope_refusal(path, session, state["project"] or cwd_hint)
        if report.refused:
            return report
        offset, line = state["byte_offset"], state["line_number"]
        if offset and transcript.was_rewritten(p, offset, state["head_hash"]):
            log.info("transcript_rewritten", file=path, old_offset=offset)
            offset, line, report.rewritten = 0, 0, True
        while True:
            result = transcript.read_new(p, offset, line, max_bytes=READ_CHUNK_BYTES)
            # Once, here: nothing below sees, stores or sends a secret or a <private> part; a
            # secret value found in one message of the read is hidden in all of them.
            for msg, text in zip(result.messages, redact_batch([m.text for m in result.messages])):
                msg.text = text
            if result.end_offset <= offset:
                if report.rewritten:
                    self._save_offset_only(path, result, state)
                break
            report.lines += result.end_line - line
            ident = self._identity(path, state, result, session_hint, cwd_hint)
            report.refused = self._scope_refusal(path, ident["session"], ident["project"])
            if report.refused:
                # Trigger: the transcript itself names a forgotten or excluded session/project.
                # Why: nothing of it may be kept. Outcome: only the offset moves on.
                self._save_offset_only(path, result, {"session_id": None, "project": ""})
                return report
            self._withhold(path, result.messages, ident["project"])
            for chunk in self._chunks(path, result):
                if should_stop():
                    # Trigger: SIGTERM/SIGINT. Why: shutdown should wait for one batch, not a
                    # whole backfill. Outcome: committed batches stay, the rest is read next time.
                    report.interrupted = True
                    return report
                self._index_chunk(path, ident, chunk, result.head_hash, report)
            offset, line = result.end_offset, result.end_line
            self.embed_pending()
        return report

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

    def _withhold(self, path: str, messages: list, project: str | None) -> None:
        """Lines said while paused, forgotten line by line, or said in a project before it was
        forgotten keep their place but not their text."""
        if not messages:
            return
        ranges = trust.paused_ranges(self.db)
        cutoff = trust.project_cutoff(self.db, project)
        forgotten = {r[0] for r in self.db.execute(
            "SELECT source_line FROM tombstones WHERE kind = 'line' AND source_file = ? "
            "AND source_line BETWEEN ? AND ?", (path, messages[0].line, messages[-1].last_line))}
        now = self.clock()
        for m in messages:
            reason = "forgotten" if m.line in forgotten else trust.withheld(m.timestamp, ranges, cutoff, now)
            if reason:
                m.text, m.skip_reason = "", reason
                if getattr(m, "parts", None):  # per-line pieces of a merged response, where present
                    m.parts = []

    def _state(self, path: str) -> dict:
        row = self.db.one(
            "SELECT byte_offset, line_number, head_hash, session_id, project FROM index_state WHERE source_file = ?",
            (path,),
        )
        keys = ("byte_offset", "line_number", "head_hash", "session_id", "project")
        return dict(zip(keys, row)) if row else dict(zip(keys, (0, 0, None, None, None)))

    def _identity(self, path, state, result, session_hint, cwd_hint) -> dict:
        """Session, project and branch of a transcript: what it says first, then the hook's hints."""
        msgs = result.messages
        session = state["session_id"] or next((m.session_id for m in msgs if m.session_id), None)
        session = session or session_hint or transcript.session_of(Path(path))
        project = state["project"] or next((m.cwd for m in msgs if m.cwd), None) or cwd_hint or ""
        branch = next((m.git_branch for m in reversed(msgs) if m.git_branch), None)
        state["session_id"], state["project"] = session, project
        return {"session": session, "project": project, "branch": branch}

    def _chunks(self, path: str, result: transcript.ReadResult) -> list[Chunk]:
        """Cut the read into batches of at most max_batch_messages substantive new messages."""
        known = self._known_lines(path, result.messages)
        limit = max(1, int(self.settings.get("daemon", "max_batch_messages")))
        chunks, current = [], Chunk([], 0, 0)
        for msg in result.messages:
            current.messages.append(msg)
            if msg.skip_reason is None and (msg.line, executor.content_hash(msg.text)) not in known:
                current.fresh.append(msg)
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
        rows = self.db.execute(
            "SELECT source_line, content_hash FROM messages WHERE source_file = ? AND source_line BETWEEN ? AND ?",
            (path, messages[0].line, messages[-1].last_line),
        ).fetchall()
        known = {(r[0], r[1]) for r in rows}
        # Lines the user forgot are never extracted again (nor sent to an endpoint).
        forgotten = {r[0] for r in self.db.execute(
            "SELECT source_line FROM tombstones WHERE kind = 'line' AND source_file = ? AND source_line BETWEEN ? AND ?",
            (path, messages[0].line, messages[-1].last_line))}
        known |= {(m.line, executor.content_hash(m.text)) for m in messages if m.line in forgotten}
        return known

    def _index_chunk(self, path: str, ident: dict, chunk: Chunk, head_hash: str, report: IndexReport) -> None:
        fresh = chunk.fresh
        outputs, extractor_name = self._extract(path, ident, fresh) if fresh else ([], "none")
        now = self.clock()
        times = {m.line: m.timestamp for m in chunk.messages}
        lines = [m.line for m in chunk.messages] or [chunk.end_line]
        ctx = executor.BatchContext(
            source_file=path, session_id=ident["session"], project=ident["project"], git_branch=ident["branch"],
            line_times=times, first_line=min(lines), last_line=max(lines), cause=f"extract:{extractor_name}", now=now,
        )
        vectors = self._embed_items(outputs)
        with self.db.write():
            covered, skips = set(), {}
            for output in outputs:
                applied = executor.apply_output(self.db, ctx, output, vectors)
                report.ideas_added += len(applied.ideas_added)
                covered |= applied.lines_with_items
                skips.update({s["line"]: s["reason"] for s in output.get("skip_lines", [])})
            self._write_messages(path, ident, chunk, covered, skips, now)
            self._write_calls(now)
            self._write_offset(path, ident, chunk, head_hash, now)
        report.batches += bool(fresh)
        report.messages += len(fresh)
        report.llm_calls += extractor_name == "llm"

    def _embed_items(self, outputs: list[dict]) -> dict[str, bytes]:
        """Vectors for the batch's new items, made before the write transaction so it stays short.

        Trigger: the embedder fails. Why: vectors are derived data. Outcome: the ideas are stored
        with needs_embedding = 1 and the repair pass embeds them later.
        """
        texts = sorted({item["content"].strip() for out in outputs for item in out.get("items", [])})
        if not texts or not self.vectors_ok():
            return {}
        from total_recall.embed import to_blob

        try:
            matrix = self.embedder.embed(texts)
        except (EmbeddingError, TransientError) as exc:
            log.warning("embedding_failed", count=len(texts), error=str(exc))
            return {}
        return {text: to_blob(vec) for text, vec in zip(texts, matrix)}

    def _extract(self, path: str, ident: dict, fresh: list) -> tuple[list[dict], str]:
        """One extraction call per batch: the LLM when configured and within budget, else offline.

        Trigger: the LLM fails after its retries, or today's token budget is spent. Why: memory
        must never stop or lose messages because an endpoint is down or costly. Outcome: the
        same batch goes through the offline extractor, and stats shows the fallback.
        """
        from total_recall.extract import protocol

        new = [
            {"role": m.role, "content": m.text, "timestamp": m.timestamp, "line": m.line} for m in fresh
        ]
        context = self._context(path, ident, new)
        max_chars = int(self.settings.get("llm", "max_prompt_chars"))
        outputs, name = [], "offline"
        for part in protocol.split_for_budget(new, max_chars):
            obj = protocol.build_input(context["hierarchy"], context["recent"], part, context["related"],
                                       context["known"], max_chars=max_chars)
            raw, name = self._call_extractor(obj)
            lines = {m["line"] for m in part}
            validated = protocol.validate_output(raw, lines, {k["id"] for k in context["known"]})
            if validated.dropped:
                log.info("items_dropped", file=path, dropped=validated.dropped, problems=validated.problems[:5])
            if validated.cut:
                log.warning("extractor_output_capped", file=path, cut=validated.cut,
                            problems=validated.problems[-3:])
            outputs.append(validated.output)
        return outputs, name

    def _call_extractor(self, obj: dict) -> tuple[dict, str]:
        llm = self.llm()
        if llm is not None and not self.budget_exhausted():
            try:
                return llm.extract(obj), "llm"
            except ExtractionError as exc:
                log.warning("llm_fallback", error=str(exc))
                self._pending_calls.append({"extractor": "fallback", "ok": 0, "error": str(exc)[:500],
                                            "messages": len(obj["new_messages"])})
        raw = self.offline().extract(obj)
        self._pending_calls.append({"extractor": "offline", "ok": 1, "messages": len(obj["new_messages"])})
        return raw, "offline"

    def budget_exhausted(self) -> bool:
        budget = int(self.settings.get("llm", "daily_token_budget"))
        if budget <= 0:
            return False
        used = self.db.scalar(
            "SELECT sum(prompt_tokens + completion_tokens) FROM llm_calls WHERE extractor = 'llm' AND at >= ?",
            (today_start_utc(self.clock()),), 0,
        )
        used += sum(c.get("prompt_tokens", 0) + c.get("completion_tokens", 0) for c in self._pending_calls)
        return used >= budget

    def _context(self, path: str, ident: dict, new: list[dict]) -> dict:
        session, project = ident["session"], ident["project"]
        topic = self.db.one(
            "SELECT id, name, summary FROM spans WHERE session_id = ? AND source_file = ? AND depth = 1 AND closed = 0 "
            "ORDER BY id DESC LIMIT 1", (session, path))
        span = topic and self.db.one(
            "SELECT name, summary FROM spans WHERE parent_id = ? AND depth = 2 AND closed = 0 ORDER BY id DESC LIMIT 1",
            (topic[0],))
        first = new[0]["line"]
        recent = self.db.execute(
            "SELECT role, content, timestamp, source_line FROM messages WHERE session_id = ? AND source_file = ? "
            "AND skip_reason IS NULL AND source_line < ? ORDER BY source_line DESC LIMIT ?",
            (session, path, first, RECENT_MESSAGES)).fetchall()
        known = self.db.execute(
            "SELECT id, intent, content FROM ideas WHERE project = ? ORDER BY id DESC LIMIT ?",
            (project, KNOWN_IDEAS)).fetchall()
        related, similar = self._similar(project, session, " ".join(m["content"] for m in new)[:CONTEXT_QUERY_CHARS])
        known_ids = {k[0] for k in known}
        known += [s for s in similar if s[0] not in known_ids]
        return {
            "hierarchy": {
                "project": {"name": project_name(project), "summary": ""},
                "topic": {"name": topic[1], "summary": topic[2]} if topic else None,
                "span": {"name": span[0], "summary": span[1]} if span else None,
            },
            "recent": [{"role": r[0], "content": r[1], "timestamp": r[2], "line": r[3]} for r in reversed(recent)],
            "related": related,
            "known": [{"id": k[0], "type": k[1], "content": k[2]} for k in known],
        }

    def _similar(self, project: str, session: str, text: str) -> tuple[list[dict], list[tuple]]:
        """Top 3 topics of other sessions and the 10 most similar ideas of this project."""
        if not text.strip() or not self.vectors_ok():
            return [], []
        from total_recall.embed import to_blob

        try:
            blob = to_blob(self.embedder.embed([text])[0])
        except (EmbeddingError, TransientError):
            return [], []
        topics = self.db.execute(
            "SELECT s.name, s.summary, s.session_id FROM (SELECT span_id, distance FROM span_embeddings "
            "WHERE embedding MATCH ? AND k = 20) v JOIN spans s ON s.id = v.span_id "
            "WHERE s.depth = 1 AND s.session_id != ? ORDER BY v.distance LIMIT 3", (blob, session)).fetchall()
        ideas = self.db.execute(
            "SELECT i.id, i.intent, i.content FROM (SELECT idea_id, distance FROM idea_embeddings "
            "WHERE embedding MATCH ? AND k = 10 AND project = ?) v JOIN ideas i ON i.id = v.idea_id "
            "ORDER BY v.distance", (blob, project or "")).fetchall()
        return [{"name": t[0], "summary": t[1], "session": t[2]} for t in topics], ideas

    def _write_messages(self, path, ident, chunk: Chunk, covered: set, skips: dict, now: float) -> None:
        fresh_lines = {m.line for m in chunk.fresh}
        rows = []
        for m in chunk.messages:
            reason = m.skip_reason
            if reason is None and m.line not in fresh_lines:
                reason = "already_indexed"
            elif reason is None and m.line not in covered:
                reason = skips.get(m.line, "no_memory_extracted")
            rows.append((path, m.line, ident["session"], ident["project"], m.git_branch or ident["branch"], m.role,
                         m.kind, m.text, executor.content_hash(m.text), m.timestamp, reason, now))
        self.db.executemany(
            "INSERT OR IGNORE INTO messages (source_file, source_line, session_id, project, git_branch, role, kind, "
            "content, content_hash, timestamp, skip_reason, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def _write_calls(self, now: float) -> None:
        # Copy and clear in place: the LLM extractor holds a reference to this very list.
        calls = list(self._pending_calls)
        self._pending_calls.clear()
        self.db.executemany(
            "INSERT INTO llm_calls (at, extractor, model, messages, prompt_tokens, completion_tokens, ok, error) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(now, c.get("extractor", "llm"), c.get("model"), int(c.get("messages", 0)), int(c.get("prompt_tokens", 0)),
              int(c.get("completion_tokens", 0)), int(bool(c.get("ok"))), c.get("error")) for c in calls],
        )

    def _write_offset(self, path: str, ident: dict, chunk: Chunk, head_hash: str, now: float) -> None:
        self.db.execute(
            "INSERT INTO index_state (source_file, session_id, project, byte_offset, line_number, head_hash, "
            "file_size, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source_file) DO UPDATE SET "
            "session_id = excluded.session_id, project = excluded.project, byte_offset = excluded.byte_offset, "
            "line_number = excluded.line_number, head_hash = excluded.head_hash, file_size = excluded.file_size, "
            "updated_at = excluded.updated_at",
            (path, ident["session"], ident["project"], chunk.end_offset, chunk.end_line, head_hash,
             _size(path), now),
        )

    def _save_offset_only(self, path: str, result, state: dict) -> None:
        ident = {"session": state["session_id"], "project": state["project"] or ""}
        with self.db.write():
            self._write_offset(path, ident, Chunk([], result.end_offset, result.end_line), result.head_hash,
                               self.clock())

    # -- vectors ----------------------------------------------------------------------------
    def embed_pending(self, limit: int = 512) -> int:
        """The repair pass: give vectors to every idea and span still marked needs_embedding.

        Trigger: after each batch and on the daemon's heartbeat. Why: embedding may have failed or
        been skipped; search should not wait for a person. Outcome: vectors written in small
        transactions; on failure the marks stay and the next pass tries again.
        """
        if not self.vectors_ok():
            return 0
        from total_recall.embed import to_blob

        done = 0
        for table, owner, key, text_sql in (
            ("idea_embeddings", "ideas", "idea_id", "content"),
            ("span_embeddings", "spans", "span_id", "name || '. ' || summary"),
        ):
            only = " AND depth > 0" if owner == "spans" else ""
            while True:
                rows = self.db.execute(
                    f"SELECT id, project, {text_sql} FROM {owner} WHERE needs_embedding = 1{only} ORDER BY id LIMIT ?",
                    (limit,)).fetchall()
                if not rows:
                    break
                try:
                    vectors = self.embedder.embed([r[2] for r in rows])
                except (EmbeddingError, TransientError) as exc:
                    log.warning("embedding_failed", table=table, count=len(rows), error=str(exc))
                    return done
                with self.db.write():
                    executor.store_vectors(self.db, table, key,
                                           [(r[0], r[1], to_blob(v)) for r, v in zip(rows, vectors)])
                done += len(rows)
                if len(rows) < limit:
                    break
        return done


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None
