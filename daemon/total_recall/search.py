"""Hybrid retrieval: vector + BM25 + entity lookup, fused with Reciprocal Rank Fusion.

Then filters (intent, time), confidence and recency weighting, graph expansion over relations,
evolution chains for superseded ideas, and parent spans for context. The daemon answers over
its socket with a warm model; the CLI falls back to the same function in-process.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, lookup, memories, state, transcript, vectors
from total_recall import projects as projects_mod
from total_recall import query as querymod
from total_recall.db import VEC_FIX_HINT, Database, table_exists, vector_tables_exist
from total_recall.errors import (
    Ambiguous,
    EmbeddingError,
    ExtractionError,
    NotFound,
    TotalRecallError,
    TransientError,
)

log = structlog.get_logger(__name__)

RRF_K = 60
POOL = 60  # candidates per strategy
# Strategy weights (bench/recall.py measures the effect of changing them).
WEIGHTS = {
    # Chosen on the tune split of bench/recall.py (DESIGN.md "Search"): the words of the
    # conversation's own lines lead; meaning (vectors) and distilled ideas add what words miss.
    "chunk_bm25": 2.0,
    "chunk_vec": 0.5,
    "idea_vec": 0.3,
    "idea_bm25": 0.2,
    "entity": 0.15,  # exact names and paths; a tie-breaker, not a ranking of its own
    "hyde": 0.3,  # an LLM-written answer, embedded: like the query's own vector
    "hyde_chunk": 0.5,
    "hyde_bm25": 0.5,  # the HyDE passage's words over the lines (query expansion); no dev data with an LLM
    "span_vec": 0.35,
    "span_bm25": 0.175,
    "time": 0.3,
    "kind": 0.3,  # a kind of memory asked for alone ("todos", "open questions"): its newest memories
    "window": 0.3,  # a time asked for alone ("what did we do in February"): its newest prompts and replies
    "latest": 0.3,  # "where did we leave off" with no subject: the session's last lines, newest first
}
DENSE = frozenset({"idea_vec", "span_vec", "chunk_vec", "hyde", "hyde_chunk"})
# A question that names code (`mix deps.audit`, mix_audit, xterm.js) asks for those exact words:
# the meaning strategies keep this share of their weight (sessions tune split: recall@1 0.374 ->
# 0.425, MRR 0.636 -> 0.666; 0.5: 0.408, 0: 0.391; no other set's question names code).
IDENTIFIER_DENSE = 0.25
CHUNK_BM25_COLUMNS = "1.0, 0.3"  # bm25() weights of chunks_fts (content, context)
FUSION = "normalised"  # or "rrf"
MAX_SPAN_RESULTS = 2
# A question asking for an overview over time (query.OVERVIEW: "summarize …", "in what order did we
# …") is answered by topics: the topic strategies weigh OVERVIEW_SPANS times more and up to
# OVERVIEW_MAX_SPANS topics are shown. Chosen on BEAM's tune split (its 4 summary and ordering
# questions; no other question of the five sets asks so): x8: recall@10 0.656 -> 0.710, MRR 0.752 ->
# 0.788, recall@1 0.304 as before; x5 0.692 / 0.304 / 0.770; x12 0.710 / 0.274 / 0.705; at most 5
# topics at x8: recall@10 0.692 (BENCHMARKS.md §4).
OVERVIEW_SPANS = 8.0
OVERVIEW_MAX_SPANS = 10
MAX_PER_MESSAGE = 1
ENTITY_MAX_LINKS = 15  # entities linked to more memories than this are too common to rank by
SUPERSEDED_FACTOR = 0.5
INTENT_BOOST = 1.25
PINNED_BOOST = 1.2
# A question-shaped query resembles stored questions more than the answers it wants; stored
# questions rank lower unless the query asks for questions ("open questions about ...").
QUESTION_FACTOR = 0.8
OUTSIDE_DAY = 0.5  # a line said outside the day the question names keeps this share of its score
# A tool call's line ("[tool WebSearch: xterm scroll]") repeats words that its result and the prose
# around it hold with their answer: it keeps this share of its score (sessions tune split: recall@1
# 0.431 -> 0.440, MRR 0.617 -> 0.630; confirm MRR +0.003; 0.5: confirm recall@1 -0.021).
TOOL_CALL_FACTOR = 0.7
# Two lines that say the same text (a subagent's report in its own file and in the tool result
# that returned it; a refusal or error repeated word for word) are one result that names both
# places: lines whose words overlap this much (Jaccard of their word sets) ...
DUPLICATE_SHARE = 0.8
DUPLICATE_WORDS = 20  # ... when both hold at least this many distinct words ("Thanks!" repeats)


@dataclass(slots=True)
class Candidate:
    kind: str  # idea | span | chunk (a chunk that wins its line is shown as a "message" result)
    id: int
    score: float = 0.0
    strategies: dict[str, int] = field(default_factory=dict)
    origin: tuple | None = None  # (source_file, source_line) of an idea or chunk: one result per line
    factor: float = 1.0  # confidence, intent, pin, supersede and recency weighting
    norm: dict[str, float] = field(default_factory=dict)  # normalised score per strategy (fuse)
    ok: bool = True  # passes the query's filters
    also: list = field(default_factory=list)  # lines saying the same text, shown as this one's places
    said: int = 0  # how many of the query's words an idea says (which of a line's ideas shows it: lines)


@dataclass
class SearchContext:
    db: Database
    embedder: Any = None
    settings: config.Settings | None = None
    notes: list[str] = field(default_factory=list)
    _qvec_cache: dict[str, bytes] = field(default_factory=dict)
    spare: Any = None  # () -> context manager of a second read connection or None (the socket pool)
    executor: Any = None  # runs the other half of the strategies (see _run_jobs)
    # Whether the full-text strategies of the last gather found any line, memory or topic holding
    # one of the query's words (None: the query had no words to look for).
    words_found: bool | None = None
    llm_failed: bool = False  # HyDE's call failed: the endpoint is not asked again in this search
    llm_calls: list[dict] = field(default_factory=list)  # HyDE's and re-ranking's, for llm_calls (run)
    _budget_spent: bool | None = None

    def llm_budget_spent(self) -> bool:
        """Whether today's LLM token budget is spent (state.budget_exhausted, which extraction obeys
        too): a search then asks the endpoint nothing. Read once per search."""
        if self._budget_spent is None:
            budget = self.settings.llm.daily_token_budget if self.settings is not None else 0
            self._budget_spent = state.budget_exhausted(self.db, budget, time.time())
        return self._budget_spent

    def vectors_ready(self) -> bool:
        if not self.db.has_vec:
            self._note(f"{VEC_FIX_HINT} ({self.db.vec_error})")
            return False
        if not vector_tables_exist(self.db) or self.embedder is None:
            return False
        if self.db.get_meta("embed_model") != self.embedder.model_id:
            self._note("vectors were made by another embedding model; run `total-recall reembed`")
            return False
        return True

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def qvec(self, text: str) -> bytes | None:
        """The query's vector. The query is redacted first: a secret typed into a search is sent
        to no embedding endpoint (HyDE's passage is redacted before the LLM sees it, too)."""
        if text not in self._qvec_cache:
            from total_recall.embed import to_blob
            from total_recall.redact import redact

            try:
                self._qvec_cache[text] = to_blob(self.embedder.embed([redact(text)])[0])
            except (EmbeddingError, TransientError) as exc:
                self._note(f"embedding the query failed ({exc}); keyword search only")
                return None
        return self._qvec_cache[text]


# -- project scoping ------------------------------------------------------------------------
def resolve_projects(
    db: Database, project: str | None, all_projects: bool, cwd: str | None
) -> list[str] | None:
    """None = every project. A directory or a short name picks the projects it names, the working
    directory the project it is inside (projects.resolve); each covers every checkout of the same
    repository on every machine (memories.same_projects). A working directory inside no known
    project but in a checkout of a repository the store knows is that project too."""
    chosen = projects_mod.resolve(known_projects(db), project, all_projects, cwd)
    if chosen is None and not all_projects and not project:
        root = projects_mod.checkout_root(cwd or os.getcwd())
        same = memories.paths_of(db, [projects_mod.identity(root)]) if root else []
        return same or None
    return None if chosen is None else memories.same_projects(db, chosen)


def resolve_session(db: Database, given: str, by_title: bool = True) -> str:
    """A session id as the user typed it: the full id, a unique prefix such as the 8 characters
    that search results and topics print, or (when no id starts so, and `by_title`) a part of its
    title; `forget` takes ids only."""
    given = given.strip()
    sessions = lookup.sessions(db)
    if given in sessions:
        return given
    hits = sorted(s for s in sessions if given and s.startswith(given))
    if not hits and given and by_title:
        # Its title, or a part of it, as topics and the /resume picker show it ("login test").
        titles = memories.session_titles(db, sessions)
        hits = sorted(s for s, title in titles.items() if given.casefold() in title.casefold())
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise Ambiguous(f"session {given!r} is ambiguous: {', '.join(hits[:5])}")
    raise NotFound(f"no indexed session matches {given!r}")


def known_projects(db: Database) -> list[str]:
    """Every project with memories: a loose index scan (one seek per project, not a scan of all ideas)."""
    return lookup.projects(db)


# -- strategies -----------------------------------------------------------------------------
def _knn(
    ctx: SearchContext, table: str, key: str, blob: bytes | None, projects: list[str] | None
) -> list[tuple[int, float]]:
    """(id, cosine similarity), best first; vectors are L2-normalised, so cosine = 1 - d^2 / 2.
    No hits without a query vector (its embedding failed)."""
    if blob is None:
        return []
    partitions: Iterable[str | None] = projects if projects is not None else [None]
    scored: list[tuple[float, int]] = []
    for part in partitions:
        scored += [
            (d, i)
            for i, d in vectors.knn(ctx.db, table, key, blob, POOL, None if part is None else part or "")
        ]
    return [(i, 1.0 - d * d / 2) for d, i in sorted(scored)[:POOL]]


def _bm25(
    ctx: SearchContext, kind: str, match: str, projects: list[str] | None, weights: str | None = None
) -> list[tuple[int, float]]:
    """(id, BM25 score as a positive number), best first."""
    return lookup.bm25(ctx.db, kind, match, projects, POOL, weights)


def _entity_ideas(
    ctx: SearchContext, q: querymod.Query, projects: list[str] | None
) -> list[tuple[int, float]]:
    words = q.terms
    names = set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])}
    raw = {w.lower() for w in querymod.WORD.findall(q.text)}
    names |= {t for t in q.text.replace(",", " ").split() if "/" in t or "." in t or "_" in t} | raw
    if not names:
        return []
    # An entity linked to a large share of the memories (the user's own name, the project's
    # main technology) does not discriminate; only the rarer ones take part.
    usable = lookup.rare_entities(ctx.db, [n.lower() for n in names], ENTITY_MAX_LINKS)
    if not usable:
        return []
    return [(i, 1.0) for i in lookup.ideas_naming(ctx.db, usable, projects, POOL)]


STAMP = "%Y-%m-%dT%H:%M:%S"  # how the store's times compare (ISO seconds, UTC)


def _stamps(since: datetime | None, until: datetime | None) -> tuple[str | None, str | None]:
    """A window's ends as the store's times."""
    return (since.strftime(STAMP) if since else None, until.strftime(STAMP) if until else None)


def _newest_first(ids: list[int]) -> list[tuple[int, float]]:
    """Ids listed newest first, scored by how recent they are (the newest 1.0)."""
    return [(i, 1.0 - n / len(ids)) for n, i in enumerate(ids)]


def _kind_ideas(ctx: SearchContext, q: querymod.Query, projects: list[str] | None) -> list[tuple[int, float]]:
    """The newest memories of the kinds the query filters to (open ones only when it asks so)."""
    since, until = _stamps(q.since, q.until) if not q.soft_window else (None, None)
    return _newest_first(
        lookup.ideas_of_kind(ctx.db, projects, q.intents, q.unanswered_only, POOL, since, until)
    )


def _window_lines(
    ctx: SearchContext, q: querymod.Query, projects: list[str] | None
) -> list[tuple[int, float]]:
    """The newest prompts, replies and compaction summaries said in the query's window."""
    return _newest_first(lookup.lines_between(ctx.db, projects, *_stamps(q.since, q.until), POOL))


def _time_window_ideas(
    ctx: SearchContext, q: querymod.Query, projects: list[str] | None, graded: bool = False
) -> list[tuple[int, float]]:
    """The newest ideas said in the query's window, all alike, or (`graded`, when the window is all
    the query names) scored by how recent they are (the newest 1.0)."""
    ids = lookup.ideas_between(ctx.db, projects, *_stamps(q.since, q.until), POOL)
    return _newest_first(ids) if graded else [(i, 1.0) for i in ids]


def gather(ctx: SearchContext, q: querymod.Query, projects: list[str] | None, hyde_text: str | None) -> dict:
    """Run every strategy; return {(kind, id): Candidate} with fused scores (fuse)."""
    jobs: dict[str, tuple[str, Callable[[SearchContext], list[tuple[int, float]]]]] = {}
    vectors: list[Once] = []
    match = q.fts()
    chunks = table_exists(ctx.db, "chunk_embeddings")
    # "Where did we leave off?" names no subject: the session's last lines answer it, and the
    # question's own vector would only find lines that sound like it.
    recap_only = q.asks_recap() and q.session is not None
    # "What did we do in February", "open todos": the window's or the kind's memories, newest first;
    # the query's vector would only add lines that sound like the question.
    window_only, listing = q.asks_window(), q.asks_listing()
    if ctx.vectors_ready() and q.text and not recap_only and not window_only and not listing:
        # Embedded once, by the first job that needs it or, on two threads, first of all while
        # the other thread runs the full-text jobs (_two_threads); a failed embedding leaves
        # these jobs without hits.
        blob = Once(lambda: ctx.qvec(without_names(q.text, q.participants)))
        vectors.append(blob)
        jobs["idea_vec"] = ("idea", lambda c: _knn(c, "idea_embeddings", "idea_id", blob(), projects))
        jobs["span_vec"] = ("span", lambda c: _knn(c, "span_embeddings", "span_id", blob(), projects))
        if chunks:
            jobs["chunk_vec"] = ("chunk", lambda c: _knn(c, "chunk_embeddings", "chunk_id", blob(), projects))
        if hyde_text:
            hblob = Once(lambda: ctx.qvec(hyde_text))
            vectors.append(hblob)
            jobs["hyde"] = ("idea", lambda c: _knn(c, "idea_embeddings", "idea_id", hblob(), projects))
            if chunks:
                jobs["hyde_chunk"] = (
                    "chunk",
                    lambda c: _knn(c, "chunk_embeddings", "chunk_id", hblob(), projects),
                )
    if hyde_text and (expanded := q.expanded_fts(hyde_text)):
        # The answer's likely words (names, identifiers, error text the question does not say)
        # find the line by its words, not only by the passage's vector.
        jobs["hyde_bm25"] = ("chunk", lambda c: _bm25(c, "chunk", expanded, projects, CHUNK_BM25_COLUMNS))
    if match:
        jobs["idea_bm25"] = ("idea", lambda c: _bm25(c, "idea", match, projects))
        jobs["span_bm25"] = ("span", lambda c: _bm25(c, "span", match, projects))
        jobs["chunk_bm25"] = ("chunk", lambda c: _bm25(c, "chunk", match, projects, CHUNK_BM25_COLUMNS))
    jobs["entity"] = ("idea", lambda c: _entity_ideas(c, q, projects))
    if q.since or q.until:
        jobs["time"] = ("idea", lambda c: _time_window_ideas(c, q, projects, graded=window_only))
    if window_only:
        # ... and its lines: a session whose lines left no memory (a compaction summary) is there too
        jobs["window"] = ("chunk", lambda c: _window_lines(c, q, projects))
    if listing:
        # "todos", "open questions", "latest decisions": the kind's newest memories are the answer, not
        # only those a word of the query or its vector finds. (With a subject, "decisions about the
        # deploy", its words and meaning find the kind's memories; a scan of the kind's newest costs
        # 13 ms over every project at 100k ideas.)
        jobs["kind"] = ("idea", lambda c: _kind_ideas(c, q, projects))
    if recap_only:
        session = q.session
        jobs["latest"] = ("chunk", lambda c: _latest_lines(c, session))
    if q.participants is None:
        jobs["participants"] = ("", lambda c: list(participants(c.db, q.text, projects, typed=True).items()))
    done = _run_jobs(ctx, jobs, vectors)
    q.dense_factor = meaning_factor(done)
    ctx.words_found = any(done[s][1] for s in WORD_JOBS if s in done) if match else None
    if "participants" in done:
        q.participants = dict(done.pop("participants")[1])
    return fuse(done, weights_for(q))


def _latest_lines(ctx: SearchContext, session: str) -> list[tuple[int, float]]:
    """The session's last lines (lookup.RECAP_KINDS), scored by how late they were said (the last
    1.0); each is shown as its idea when it has one (_add_line_ideas)."""
    return _newest_first(lookup.latest_lines(ctx.db, session, POOL))


def weights_for(q: querymod.Query) -> dict[str, float]:
    """The strategies' weights for this question: lexical first when it names code, meaning weighs
    more when the words and the meaning found different lines (meaning_factor), topics weigh more
    when it asks for an overview (OVERVIEW_SPANS)."""
    dense = (IDENTIFIER_DENSE if q.identifier else 1.0) * q.dense_factor
    topics = OVERVIEW_SPANS if q.overview else 1.0
    if dense == 1.0 and topics == 1.0:
        return WEIGHTS
    return {
        s: w * (dense if s in DENSE else 1.0) * (topics if s in SPAN_JOBS else 1.0)
        for s, w in WEIGHTS.items()
    }


SPAN_JOBS = frozenset({"span_vec", "span_bm25"})


# When the windows the query's words rank highest (chunk BM25) and those its meaning ranks highest
# (chunk vectors) hardly overlap, the words are likely not the answer's: a paraphrase ("the little
# glyphs next to my competencies" for icons in the skills section), or words that are everywhere in
# the project. The meaning strategies' weight is then multiplied by MEANING_BOOST. Overlap = shared
# windows among the first AGREE_TOP of each list, over the shorter list (a small project's lists are
# short). Chosen on the tune split (bench/recall_lab.py, BENCHMARKS.md §4): at overlap <= 0.15 and
# x2, beam-qa recall@1 0.600 -> 0.640, MRR 0.848 -> 0.883; locomo-roles recall@10 0.811 -> 0.814,
# locomo-names 0.825 -> 0.828, recall@1 0.483 -> 0.490; BEAM and the sessions set level (MRR -0.001
# asked as keywords). x3 gained more on LoCoMo but cost the sessions MRR 0.002-0.004; overlap <= 0.25
# cost BEAM asked as keywords recall@1 0.202 -> 0.179; AGREE_TOP 10 cost sessions recall@1 0.019.
AGREE_TOP = 20
AGREE_LOW = 0.15
MEANING_BOOST = 2.0


def meaning_factor(done: dict[str, tuple[str, list[tuple[int, float]]]]) -> float:
    """MEANING_BOOST when the first windows of chunk BM25 and of the chunk vectors hardly overlap,
    else 1.0 (also when either found nothing: no words matched, or no vectors)."""
    words = {i for i, _ in done.get("chunk_bm25", ("", []))[1][:AGREE_TOP]}
    meaning = {i for i, _ in done.get("chunk_vec", ("", []))[1][:AGREE_TOP]}
    shorter = min(len(words), len(meaning))
    if not shorter:
        return 1.0
    return MEANING_BOOST if len(words & meaning) / shorter <= AGREE_LOW else 1.0


# The order in which two threads take a search's jobs: the long ones first, so that neither is left
# with one at the end (over every project a KNN is a brute-force scan, ten full-text queries long).
JOB_ORDER = (
    "chunk_vec",
    "idea_vec",
    "hyde_chunk",
    "hyde",
    "span_vec",
    "chunk_bm25",
    "hyde_bm25",
    "idea_bm25",
    "span_bm25",
    "entity",
    "time",
    "window",
    "kind",
    "latest",
    "participants",
)
VECTOR_JOBS = {"idea_vec", "span_vec", "chunk_vec", "hyde", "hyde_chunk"}
WORD_JOBS = ("idea_bm25", "span_bm25", "chunk_bm25")  # the query's own words, matched in full text


class Once:
    """A value made by the first thread that asks for it; a thread asking meanwhile waits."""

    def __init__(self, make: Callable[[], Any]):
        self._make, self._lock, self.made, self._value = make, threading.Lock(), False, None

    def __call__(self) -> Any:
        with self._lock:
            if not self.made:
                self._value, self.made = self._make(), True
        return self._value


def _run_jobs(
    ctx: SearchContext, jobs: dict, vectors: Iterable[Once] = ()
) -> dict[str, tuple[str, list[tuple[int, float]]]]:
    """Every strategy's hits, in the order of `jobs` (fusion is order-sensitive on ties).

    Trigger: the caller (the daemon's socket server) lends a spare connection and a thread. Why:
    the strategies are independent queries, and SQLite releases the GIL while it runs them, so on
    two cores two of them run at once. Outcome: the same hits, sooner (_two_threads); with no
    spare connection free (or in-process) they run one after another on this connection.
    """
    if ctx.spare is not None and ctx.executor is not None and len(jobs) > 1:
        with ctx.spare() as other:
            if other is not None:
                return _two_threads(ctx, dataclasses.replace(ctx, db=other, spare=None), jobs, list(vectors))
    return {n: (kind, fn(ctx)) for n, (kind, fn) in jobs.items()}


def _two_threads(ctx: SearchContext, twin: SearchContext, jobs: dict, vectors: list[Once]) -> dict:
    """This thread makes the query's vectors while the other takes the full-text jobs; then each
    takes the next job in JOB_ORDER until none is left."""
    waiting = sorted(jobs, key=lambda n: JOB_ORDER.index(n) if n in JOB_ORDER else len(JOB_ORDER))
    lock = threading.Lock()
    done: dict[str, tuple[str, list[tuple[int, float]]]] = {}

    def work(c: SearchContext, first: list[Once]) -> None:
        for make in first:
            make()
        while True:
            with lock:
                if not waiting:
                    return
                made = all(v.made for v in vectors)
                name = next((n for n in waiting if made or n not in VECTOR_JOBS), waiting[0])
                waiting.remove(name)
            kind, fn = jobs[name]
            done[name] = (kind, fn(c))

    future = ctx.executor.submit(work, twin, [])
    try:
        work(ctx, vectors)
    finally:
        with lock:  # after a failure here the other thread starts no further job
            waiting.clear()
        concurrent.futures.wait([future])  # the spare connection is lent until its thread is done
    future.result()
    return {n: done[n] for n in jobs}


def fuse(ranked: dict[str, tuple[str, list[tuple[int, float]]]], weights: dict[str, float]) -> dict:
    """Pool every strategy's hits; each candidate keeps its rank and normalised score per strategy.

    Scores are normalised per strategy and query: BM25 by the best hit's score (so a strong exact
    match stays strong and a weak one weak), similarities between the pool's worst and best.
    The candidate's score is the weighted sum (`normalised` fusion) or, with FUSION = "rrf",
    weighted Reciprocal Rank Fusion.
    """
    pool: dict[tuple[str, int], Candidate] = {}
    normalised = FUSION == "normalised"
    for strategy, (kind, hits) in ranked.items():
        if not hits:
            continue
        weight = weights[strategy]
        scores = [sc for _, sc in hits]
        top, floor = max(scores), (0.0 if "bm25" in strategy else min(scores))
        span = top - floor
        for rank, (object_id, sc) in enumerate(hits, 1):
            cand = pool.get((kind, object_id))
            if cand is None:
                cand = pool[(kind, object_id)] = Candidate(kind, object_id)
            cand.strategies[strategy] = rank
            norm = cand.norm[strategy] = (sc - floor) / span if span > 0 else 1.0
            cand.score += weight * (norm if normalised else 1 / (RRF_K + rank))
    return pool


def line_score(strategies: dict[str, int], norm: dict[str, float], weights: dict[str, float]) -> float:
    if FUSION == "normalised":
        return sum(weights.get(s, 0.0) * v for s, v in norm.items())
    return sum(weights.get(s, 0.0) / (RRF_K + r) for s, r in strategies.items())


# -- details, filters, weighting ------------------------------------------------------------
IDEA_COLUMNS = (
    "id",
    "content",
    "intent",
    "confidence",
    "answered",
    "source_file",
    "source_line",
    "session_id",
    "project",
    "message_time",
    "span_id",
    "created_at",
    "mention_count",
    "pinned",
    "closed_source_line",
    "machine",
)
SPAN_COLUMNS = (
    "id",
    "name",
    "summary",
    "depth",
    "start_line",
    "end_line",
    "source_file",
    "session_id",
    "project",
    "started_at",
    "parent_id",
)
CHUNK_COLUMNS = (
    "id",
    "source_file",
    "source_line",
    "message_line",
    "session_id",
    "project",
    "timestamp",
    "role",
    "kind",
    "content",
    "machine",
)


def _rows(db: Database, table: str, columns: tuple, ids: list[int]) -> dict[int, dict]:
    return lookup.rows_by_id(db, table, columns, ids)


def _passes(row: dict, q: querymod.Query, time_key: str) -> bool:
    if q.session and row.get("session_id") != q.session:
        return False
    if q.intents and row.get("intent") not in q.intents:
        return False
    if q.unanswered_only and (row.get("answered") or row.get("closed_source_line") is not None):
        return False  # an answered question, a problem with a fix given, or a closed todo
    return q.soft_window or in_window(row, q, time_key)


def in_window(row: dict, q: querymod.Query, time_key: str) -> bool:
    stamp = (row.get(time_key) or "")[:19]
    if q.since and (not stamp or stamp < q.since.strftime(STAMP)):
        return False
    if q.until and (not stamp or stamp >= q.until.strftime(STAMP)):
        return False
    return True


def _age_days(stamp: str | None, now: datetime) -> float:
    if not stamp:
        return 365.0
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 365.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (now - when).total_seconds() / 86400)


def superseded_by(db: Database, ids: list[int]) -> dict[int, list[int]]:
    """For each idea, the ideas that supersede it (newest first)."""
    if not ids:
        return {}
    out: dict[int, list[int]] = {}
    for r in lookup.superseding(db, ids):
        out.setdefault(r["to_id"], []).append(r["from_id"])
    return out


def weigh(
    pool: dict,
    ideas: dict[int, dict],
    spans: dict[int, dict],
    q: querymod.Query,
    now: datetime,
    successors: dict[int, list[int]],
    chunks: dict[int, dict] | None = None,
) -> list[Candidate]:
    """Filters and weights per candidate, then one candidate per conversation line (lines())."""
    chunks = chunks or {}
    terms = {_stem(t) for t in q.terms}
    kept = []
    for cand in pool.values():
        row = {"idea": ideas, "span": spans, "chunk": chunks}[cand.kind].get(cand.id)
        if row is None:
            continue
        if cand.kind == "idea":
            cand.ok = _passes(row, q, "message_time")
            cand.said = len(terms & {_stem(w) for w in querymod.WORD.findall(row["content"].lower())})
            cand.factor = idea_factor(row, q, cand.id in successors)
            stamp, time_key = row["message_time"], "message_time"
            cand.origin = cand.origin or (row["source_file"], row["source_line"])
        elif cand.kind == "chunk":
            # A line's words have no intent: with an intent filter they only vote for its ideas.
            cand.ok = not q.intents and not q.unanswered_only and _passes(row, q, "timestamp")
            stamp, time_key = row["timestamp"], "timestamp"
            cand.origin = (row["source_file"], row["source_line"])
            if row["content"].startswith(transcript.TOOL_CALL):
                cand.factor *= TOOL_CALL_FACTOR
        else:
            # Session spans (depth 0) are containers with no text of their own, never results.
            if row["depth"] == 0 or q.intents or not _passes(row, q, "started_at"):
                continue
            stamp, time_key = row["started_at"], "started_at"
        if q.soft_window and not in_window(row, q, time_key):
            cand.factor *= OUTSIDE_DAY
        if q.time_sensitive:
            cand.factor *= 0.6 + 0.4 * math.exp(-_age_days(stamp, now) / 30)
        cand.score *= cand.factor
        kept.append(cand)
    return sorted(lines(kept, weights_for(q), siblings=bool(q.intents)), key=lambda c: -c.score)


def idea_factor(row: dict, q: querymod.Query, superseded: bool) -> float:
    factor = 0.75 + 0.25 * float(row["confidence"])
    if row["intent"] in q.boost_intents:
        factor *= INTENT_BOOST
    elif row["intent"] == "question" and "question" not in q.intents:
        factor *= QUESTION_FACTOR
    if row["pinned"]:
        factor *= PINNED_BOOST
    if superseded:
        factor *= SUPERSEDED_FACTOR
    return factor


def lines(cands: list[Candidate], weights: dict[str, float], siblings: bool = False) -> list[Candidate]:
    """Line-level fusion: the ideas and chunks of one conversation line are one result.

    Each strategy counts once per line, with its best rank among the line's candidates, so a
    line that both its words (chunks) and its distilled ideas match outranks one that only one
    of them matches. The line is shown as its best idea that passes the filters, else as the
    message itself (a chunk); the score carries that idea's weighting. The best idea is the one that
    says most of the query's words, then the one ranked highest: "No Igniter installers exist" is
    shown as the line's "No Igniter installers exist for credo ...", not as its "The project already
    has igniter as a dependency", which an entity lookup ranked a little higher. The line's score
    keeps the weighting of its highest-ranked idea, whichever is shown.

    With `siblings` (the query asks for a kind of memory: "todos", "decisions about X") the unit is
    the memory: the line's other ideas of that kind follow its best one, each a little below the one
    before (SIBLING_SHARE), so a plan's nine steps are nine results, not one.
    """
    out, groups = [], {}
    for cand in cands:
        if cand.kind == "span" or cand.origin is None:
            out.append(cand)
        else:
            groups.setdefault(cand.origin, []).append(cand)
    for group in groups.values():
        best: dict[str, int] = {}
        norm: dict[str, float] = {}
        for cand in group:
            for strategy, rank in cand.strategies.items():
                if strategy not in best or rank < best[strategy]:
                    best[strategy] = rank
                norm[strategy] = max(norm.get(strategy, 0.0), cand.norm.get(strategy, 0.0))
        base = line_score(best, norm, weights)
        shown = [c for c in group if c.ok]
        if not shown:
            continue
        ranked_first = max(shown, key=lambda c: (c.kind == "idea", c.score))
        lead = max(shown, key=lambda c: (c.kind == "idea", c.said, c.score))
        if lead.kind == "chunk":
            lead.factor = max(c.factor for c in group if c.kind == "chunk")
        lead.score = base * ranked_first.factor  # the idea shown does not change the line's rank
        lead.strategies, lead.norm = best, norm
        out.append(lead)
        if siblings:
            rest = sorted(
                (c for c in shown if c is not lead and c.kind == "idea"), key=lambda c: (-c.said, -c.score)
            )
            for n, cand in enumerate(rest, 1):
                cand.score = lead.score * SIBLING_SHARE**n
                cand.strategies, cand.norm = best, norm
                out.append(cand)
    return out


SIBLING_SHARE = 0.98


# An idea found only because it answers or builds on a top result takes this share of that result's
# score: below what the question's own words and meaning found (at 0.5 such ideas took places in the
# top ten; BEAM tune recall@10 -0.024, every other tune and confirm figure the same at 0.35 / 0.25).
RELATED_SHARE = 0.35


def expand(db: Database, top: list[Candidate], pool_ids: set[int]) -> list[Candidate]:
    """Graph expansion: ideas that supersede / build on / answer the top ideas join the results."""
    ids = [c.id for c in top if c.kind == "idea"]
    if not ids:
        return []
    rows = lookup.relations_onto(db, ids, ("supersedes", "builds_on", "answers"))
    score_of = {c.id: c.score for c in top if c.kind == "idea"}
    added: dict[int, Candidate] = {}
    for r in rows:
        from_id, to_id, rtype = r["from_id"], r["to_id"], r["relation_type"]
        if from_id in pool_ids or from_id in added:
            continue
        factor = 1.05 if rtype == "supersedes" else RELATED_SHARE
        added[from_id] = Candidate("idea", from_id, score_of[to_id] * factor, {f"graph:{rtype}": 1})
    return list(added.values())


# A question that asks for a kind of memory ("what did we decide about the code quality tools") is often
# answered by a memory that does not say its words: the user's pick of an offered choice ("I chose
# Credo + Dialyxir + mix_audit: skip Sobelow"), found at 20th below the plan and the tool output that
# repeat "Setup Code Quality Tools (Credo, Dialyxir, mix_audit)". A memory of the asked kind that names
# at least KIND_SHARED of the rarer entities a top idea names joins the results at KIND_SHARE of that
# idea's score. Only when the question names one or two kinds (a recap's six are no ask). Measured
# over the kept indexes of the five sets (BENCHMARKS.md §4): no figure moved; it added a memory to 3
# of 1,356 searches. Its example is pinned by test_recall_units.py.
KIND_SHARE = 0.5
KIND_LEADS = 3  # the top results whose entities are followed
KIND_SHARED = 2


def same_kind_neighbours(
    db: Database, top: list[Candidate], kinds: set[str], held: set[int]
) -> list[Candidate]:
    """Memories of the asked kinds that name the entities of the top ideas (see KIND_SHARE)."""
    if len(kinds) > 2:
        return []
    added: dict[int, Candidate] = {}
    for lead in [c for c in top[:KIND_LEADS] if c.kind == "idea"]:
        found = lookup.ideas_sharing_entities(db, lead.id, sorted(kinds), ENTITY_MAX_LINKS, KIND_SHARED, POOL)
        for i in found:
            if i not in held and i not in added:
                added[i] = Candidate("idea", i, lead.score * KIND_SHARE, {"graph:entities": 1})
    return list(added.values())


# -- the whole search -----------------------------------------------------------------------
def search(
    ctx: SearchContext,
    text: str,
    *,
    k: int = 10,
    project: str | None = None,
    all_projects: bool = False,
    cwd: str | None = None,
    hyde_text: str | None = None,
    now: datetime | None = None,
    session: str | None = None,
    current_session: str | None = None,
    intent: str | None = None,
) -> list[dict]:
    now = now or datetime.now(timezone.utc)
    q = querymod.analyze(text, now)
    if intent:
        # A kind asked for by the caller (MCP's and the web view's `intent`), as a question naming
        # it would: its memories, several of one line (a plan's todos), not one result per line
        # filtered afterwards (which showed one of a plan's six todos).
        q.intents = {intent}
    if session:
        q.session = resolve_session(ctx.db, session)
        all_projects = all_projects or not project  # a session names its project already
    projects = resolve_projects(ctx.db, project, all_projects, cwd)
    if projects is None and not all_projects and not project:
        here = os.path.abspath(cwd or os.getcwd())
        ctx._note(f"{here} is not inside a known project: searched all projects")
    if q.pull_request is not None and q.session is None:
        projects = _pull_request_session(ctx, q, projects)
    if q.asks_recap() and q.session is None:
        projects = _previous_session(ctx, q, projects, current_session)
    # A question typed in lower case ("what did caroline paint", "What did caroline paint?") names its
    # people in lower case: each of its words is a candidate, voted on beside the other jobs
    # (gather), since the vote reads lines and a lower-case name leaves the query vector as it is
    # (without_names takes capitalised names only).
    q.participants = None if typed_in_lower_case(q.text) else participants(ctx.db, q.text, projects)
    if q.asks_listing():
        q.terms = []  # "latest decisions", "todos": the kind's memories, newest first (gather)
    window_only = q.asks_window()
    if window_only:
        # "What did we do in February?", "what happened yesterday": the memories of that time, what
        # was settled or left open first; the words that named the time are not words to match.
        q.terms = []
        q.boost_intents |= querymod.RECAP_INTENTS
        q.time_sensitive = True
    asked, reranking = k, wants_rerank(ctx.settings, q)
    if reranking and ctx.llm_budget_spent():
        ctx._note(f"re-ranking skipped: {BUDGET_SPENT}")
        reranking = False
    if reranking and ctx.llm_failed:
        # A hung endpoint held the search for HyDE's two tries already; two more would outlast the
        # CLI's wait for the daemon (client.ANSWER_TIMEOUT), which then searches again itself.
        ctx._note("re-ranking skipped: the endpoint failed for HyDE")
        reranking = False
    if reranking:  # the LLM orders the first rerank_depth results; the first k asked for are shown
        k = max(k, ctx.settings.search.rerank_depth)
    results = _search(ctx, q, projects, hyde_text, now, k)
    if not results and q.month_only and (year := _latest_year_of_month(ctx, q, projects)):
        # "in September" is this year's September or, when that one is still to come, last year's;
        # when nothing was said then, the latest earlier September that has memories answers.
        month = q.since.strftime("%B")
        ctx._note(f"nothing in {month} {q.since.year}: showing {month} {year}")
        q.since, q.until = q.since.replace(year=year), q.until.replace(year=year + (q.until.month == 1))
        results = _search(ctx, q, projects, hyde_text, now, k)
    if q.intents and (subject := unmentioned_subject(results, q)):
        # "problems with dialyzer" when no problem memory mentions dialyzer: the filter would show
        # problems about other things. What was said about the subject is shown instead, that kind
        # of memory first.
        kinds = " or ".join(sorted(q.intents))
        q.boost_intents |= q.intents
        q.intents, q.unanswered_only = set(), False
        ctx._note(f"no {kinds} memory mentions {_naming(q, subject, ' ')}: showing what was said about it")
        results = _search(ctx, q, projects, hyde_text, now, k)
    if not results and window_only:
        newest = lookup.latest_session(ctx.db, projects, None)
        last = str(newest["ended"])[:10] if newest and newest["ended"] else None
        since = f"; the latest line of this scope was said on {last}" if last else ""
        ctx._note(f"nothing was {_window(q)}{since}")
    elif not results and (q.since or q.until) and not q.soft_window:
        # "... last week" when it was said in February: an empty answer does not say whether the
        # words or the dates missed. The dates are named, and matches from any time are shown.
        ctx._note(f"nothing {_window(q)} matches: showing matches from any time")
        q.since = q.until = None
        results = _search(ctx, q, projects, hyde_text, now, k)
    if results and ctx.words_found is False and (subject := q.subject()):
        # "tracing" over sessions that never said it: the vectors still return their nearest lines,
        # which read as an answer unless it is said that no line holds any of the query's words. A
        # query whose only words name a kind of memory ("what is left to do") asks for that kind.
        ctx._note(
            f"no line or memory in this scope says {_naming(q, subject)}: showing the closest in meaning"
        )
    elif results and ctx.words_found and (unsaid := unsaid_words(ctx.db, results, q, projects)):
        # "did we ever use kubernetes?" over sessions that said "use" but never "kubernetes": the
        # lines that say "use" read as an answer unless it is said that the telling word was never said.
        ctx._note(f"no line or memory in this scope says {_naming(q, unsaid)}: showing what matches the rest")
    return llm_order(ctx, q.text, results, asked) if reranking else results


NOTE_WORDS = 6  # query words a note names at most


def _naming(q: querymod.Query, words: Iterable[str], sep: str = " or ") -> str:
    """The query's words as a note repeats them to the user: none that redaction hides (a key typed
    into a search is not echoed back, not even as the lower-case pieces of it the words are), at most
    NOTE_WORDS of them (a pasted page is not printed back whole)."""
    from total_recall.redact import redact

    said = set(re.findall(r"\w+", q.text.lower()))
    hidden = said - set(re.findall(r"\w+", redact(q.text).lower()))
    kept = [w for w in words if not (set(re.findall(r"\w+", w.lower())) & hidden)]
    if not kept:
        return "some of the query's words"
    return sep.join(kept[:NOTE_WORDS]) + (sep + "…" if len(kept) > NOTE_WORDS else "")


YEARS_BACK = 10  # how many earlier years a month named without its year is looked for in


def _latest_year_of_month(ctx: SearchContext, q: querymod.Query, projects: list[str] | None) -> int | None:
    """The latest year before the query's in which something was said in its month (a memory or a
    prompt, reply or summary of the scope), if any within YEARS_BACK."""
    assert q.since is not None and q.until is not None
    for back in range(1, YEARS_BACK + 1):
        since, until = q.since.replace(year=q.since.year - back), q.until.replace(year=q.until.year - back)
        window = (projects, *_stamps(since, until), 1)
        if lookup.ideas_between(ctx.db, *window) or lookup.lines_between(ctx.db, *window):
            return since.year
    return None


def _pull_request_session(
    ctx: SearchContext, q: querymod.Query, projects: list[str] | None
) -> list[str] | None:
    """For a query naming a pull request ("what did we change in PR #42"): the latest session of the
    scope that opened it becomes the query's session, and the words that named it leave the query (with
    none left, the session is recapped as "where did we leave off" recaps one); returns the scope
    narrowed to that session's project. No such session: the query is searched as it is (I168)."""
    found = lookup.pull_request_session(ctx.db, projects, q.pull_request)
    if found is None:
        return projects
    q.session = found["session_id"]
    q.terms = [t for t in q.terms if t not in q.pull_request_terms]
    title = memories.session_titles(ctx.db, [q.session]).get(q.session)
    named = f" ({title})" if title else ""
    ctx._note(f"searched the session that opened PR #{q.pull_request}: {q.session[:8]}{named}")
    return [found["project"]] if found["project"] else projects


def _previous_session(
    ctx: SearchContext, q: querymod.Query, projects: list[str] | None, current: str | None
) -> list[str] | None:
    """For "where did we leave off": the latest session of the scope other than `current` (the
    session asking, which the /remember skill names) becomes the query's session; returns the
    scope narrowed to that session's project. A note names the session."""
    last = lookup.latest_session(ctx.db, projects, current)
    if last is None:
        ctx._note("no earlier session in this scope: searched every session")
        q.last_session = False
        return projects
    q.session = last["session_id"]
    when = f", last active {last['ended'][:10]}" if last["ended"] else ""
    other = " before this one" if current else ""
    title = memories.session_titles(ctx.db, [q.session]).get(q.session)
    names = ([title] if title else []) + [
        transcript.pr_short(p) for p in memories.session_prs(ctx.db, [q.session]).get(q.session, [])
    ]
    named = f" ({', '.join(names)})" if names else ""
    ctx._note(f"searched the session{other}: {q.session[:8]}{named}{when}")
    return [last["project"]] if last["project"] else projects


def _window(q: querymod.Query) -> str:
    day = "%Y-%m-%d"
    if q.since and q.until:
        return f"said from {q.since.strftime(day)} to before {q.until.strftime(day)}"
    return f"said since {q.since.strftime(day)}" if q.since else f"said before {q.until.strftime(day)}"


def _search(
    ctx: SearchContext,
    q: querymod.Query,
    projects: list[str] | None,
    hyde_text: str | None,
    now: datetime,
    k: int,
) -> list[dict]:
    pool = gather(ctx, q, projects, hyde_text)
    seen = Seen(ctx.db)
    ranked = rescore(seen, _rank(ctx, pool, q, now, seen), q)
    words = _line_words(seen, ranked, k)
    per_line = k if q.intents else MAX_PER_MESSAGE
    max_spans = OVERVIEW_MAX_SPANS if q.overview else MAX_SPAN_RESULTS
    top = _select(ranked, k, words, per_line, max_spans)
    extra = expand(ctx.db, top, {c.id for c in ranked if c.kind == "idea"})
    if kinds := q.intents | q.boost_intents:
        held = {c.id for c in top if c.kind == "idea"} | {c.id for c in extra}
        extra += same_kind_neighbours(ctx.db, top, kinds, held)
    if extra:
        extra_rows = seen.rows("ideas", IDEA_COLUMNS, [c.id for c in extra])
        extra = [c for c in extra if c.id in extra_rows and _passes(extra_rows[c.id], q, "message_time")]
        for c in extra:  # one result per line holds for them too (_select)
            c.origin = (extra_rows[c.id]["source_file"], extra_rows[c.id]["source_line"])
        top = _select(sorted(top + extra, key=lambda c: -c.score), k, words, per_line, max_spans)
    return build_results(seen, order_chains(ctx.db, top), q.terms)


UNSAID_CHECKS = 4  # subject words looked up in the scope's full text when no result says them


@functools.lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """The whole words of the packaged embedding model's vocabulary (WordPiece: about 21,700 common
    English words, "went", "turns", "deploy"); a word outside it ("kubernetes", "graphql", "redis") is
    a telling one. Empty when the file cannot be read: every word is then telling."""
    try:
        path = config.resource_dir("assets") / "tokenizer.json"
        vocab = json.loads(path.read_text("utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(w for w in vocab if w.isalpha() and not w.startswith("##") and len(w) > 1)


def unsaid_words(
    db: Database, results: list[dict], q: querymod.Query, projects: list[str] | None
) -> list[str]:
    """The query's telling subject words (of 3+ letters, not a common English word: common_words)
    that no result says and no line or memory of the scope says either (a full-text lookup each, for
    at most UNSAID_CHECKS of them). A common word not said ("went", "long") is not worth a note."""
    said = set().union(*map(_said_stems, results))
    common = common_words()
    missing = [
        t for t in q.topic() if len(t) >= 3 and not t.isdigit() and t not in common and _stem(t) not in said
    ]
    out = []
    for term in missing[:UNSAID_CHECKS]:
        match = querymod.any_of([term])
        if not any(lookup.says(db, kind, match, projects) for kind in ("chunk", "idea")):
            out.append(term)
    return out


def unmentioned_subject(results: list[dict], q: querymod.Query) -> list[str]:
    """The query's topic words (its terms but those that named the kind or frame the question)
    when no result says any of them, else []."""
    subject = q.topic()
    wanted = {_stem(t) for t in subject}
    return [] if any(wanted & _said_stems(r) for r in results) else subject


def _said_stems(result: dict) -> set[str]:
    """The stems of the words a result shows (its content, or a topic's name and summary)."""
    text = " ".join(str(result.get(f) or "") for f in ("content", "name", "summary"))
    return {_stem(w) for w in querymod.WORD.findall(text.lower())}


RERANK_N = (
    80  # the head of the fused list that the second stage rescores (40: -0.01 recall@10 on the tune split)
)
COVERAGE_WEIGHT = 0.6  # share of a line's score that depends on how many of the query's words it holds
NEIGHBOUR_WEIGHT = 0.4  # share of the best adjacent line's score a line in the head gains
ANSWER_WEIGHT = 0.8  # ... and the line after a short question (LoCoMo tune: recall@1 +0.02-0.04, beam ±0)
SHORT_QUESTION_WORDS = 25
_SUFFIX = re.compile(r"(?:ing|ed|es|s)$")
ROLE_BOOST = 0.6  # a line said by the side the question asks about ("did I", "did you") gains this share
# A line cut into n windows is n draws of every window strategy, and the line keeps the best of
# each: its words' and meaning's share of its score is divided by 1 + WINDOW_DISCOUNT * ln(n), as
# BM25 over whole turns weighs a long turn down. Tune split: BEAM recall@10 0.628 -> 0.656, MRR
# 0.764 -> 0.752; asked as keywords recall@1 0.095 -> 0.202 (BM25 0.185); sessions recall@1 0.440 ->
# 0.450; LoCoMo's turns are one window each. At 0.1: BEAM 0.664, keywords -0.024, sessions 0.440.
WINDOW_DISCOUNT = 0.2
WINDOW_STRATEGIES = frozenset({"chunk_bm25", "chunk_vec", "hyde_chunk", "hyde_bm25"})


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A light stemmer for matching query words to a line's words (both sides the same way); the
    second stage stems every word of 80 lines per search, mostly the same words (cached)."""
    short = _SUFFIX.sub("", word)
    return short if len(short) >= 3 else word


def rescore(seen: Seen, ranked: list[Candidate], q: querymod.Query) -> list[Candidate]:
    """Second stage over the head of the list: a line holding more of the query's distinctive words
    (IDF among the head's lines, so a name on every line counts little) keeps more of its score,
    and a line next to a strong line gains a share of its score (NEIGHBOUR_WEIGHT).

    A soft AND after the fused OR: it lifts the line that says the whole thing above lines that
    share one loud word (a name, a vocative) with the query, without overruling meaning.
    """
    terms = sorted({_stem(t) for t in q.terms})
    head = [c for c in ranked[:RERANK_N] if c.origin is not None or c.kind == "span"]
    if len(head) < 2:
        return ranked

    def key(cand: Candidate) -> tuple:
        return cand.origin if cand.origin is not None else ("span", cand.id)

    seen.read(c.origin for c in head if c.origin is not None)
    if WINDOW_DISCOUNT > 0:
        weights = weights_for(q)
        for cand in head:
            if cand.origin is not None and seen.windows.get(cand.origin, 1) > 1:
                cand.score *= _windows_factor(cand, seen.windows[cand.origin], weights)
    if COVERAGE_WEIGHT <= 0 or len(terms) < 2:
        return sorted(ranked, key=lambda c: -c.score)
    seen.read_topics(c.id for c in head if c.origin is None)  # held to the same measure
    texts, own = seen.text, seen.own
    bags = {key(c): {_stem(w) for w in querymod.WORD.findall(texts.get(key(c), "").lower())} for c in head}
    n = len(bags)
    idf = {t: math.log(1 + n / (1 + sum(t in bag for bag in bags.values()))) for t in terms}
    total = sum(idf.values()) or 1.0
    for cand in head:
        bag = bags[key(cand)]
        coverage = sum(w for t, w in idf.items() if t in bag) / total
        cand.score *= 1 - COVERAGE_WEIGHT + COVERAGE_WEIGHT * coverage
    sides = set((q.participants or {}).values())
    side = q.speaker or (sides.pop() if len(sides) == 1 else None)
    # Who said a line: its role, or for a side that is one speaker's tagged lines, its tag.
    tags = side and side.startswith(TAG_SIDE)
    roles = _speaker_tags({c.origin: own.get(c.origin, "") for c in head if c.origin}) if tags else seen.role
    if side and ROLE_BOOST > 0:
        # "What did I ask about X", "what did you suggest for Y", "what did Melanie paint": the
        # question names the side of the conversation that holds its answer (pronouns: beam tune
        # split MRR +0.16, recall@10 +0.05; names: LoCoMo tune recall@1 +0.04-0.08).
        for cand in head:
            if cand.origin is not None and roles.get(cand.origin) == side:
                cand.score *= 1 + ROLE_BOOST
    if NEIGHBOUR_WEIGHT > 0:
        # A turn and its neighbours answer together (a question and its reply, a claim and its
        # reason): a line next to a strong line in the head takes a share of that line's score,
        # a larger one after a short question, whose subject is in its reply ("Got any fave
        # styles?" - "Contemporary dance is so expressive"). When the question names the side that
        # holds its answer ("what did I say about X"), the other side's lines gain nothing from
        # their neighbours: the reply to the user's line about X is not what the user said (tune
        # split: recall@10 +0.016-0.018 on LoCoMo, BEAM MRR +0.065 and recall@10 -0.014).
        score_of: dict[tuple, float] = {}
        for c in head:  # a line's best candidate (a kind's list holds several memories of one line)
            if c.origin is not None and c.score > score_of.get(c.origin, 0.0):
                score_of[c.origin] = c.score
        asked = {place for place, words in own.items() if _short_question(words)}
        for cand in head:
            if cand.origin is None or (side and roles.get(cand.origin) != side):
                continue
            f, n = cand.origin
            share = ANSWER_WEIGHT if (f, n - 1) in asked else NEIGHBOUR_WEIGHT
            before, after = score_of.get((f, n - 1), 0.0), score_of.get((f, n + 1), 0.0)
            cand.score += max(share * before, NEIGHBOUR_WEIGHT * after)
    return sorted(ranked, key=lambda c: -c.score)


def _windows_factor(cand: Candidate, n: int, weights: dict[str, float]) -> float:
    """The share of a line's score it keeps for being cut into n windows: the window strategies'
    part of its score (line_score) is divided by 1 + WINDOW_DISCOUNT * ln(n), the rest is kept.

    A long reply is many windows, and each window strategy keeps the line's best one: the more
    windows, the more chances that one of them echoes the query's words or sounds like it (BEAM:
    an assistant line has 4.4 windows on average, a user line 1.5). Without this the user's short
    line that states a fact ranks below the long reply that repeats it."""
    base = line_score(cand.strategies, cand.norm, weights)
    if base <= 0:
        return 1.0
    part = line_score(
        {s: r for s, r in cand.strategies.items() if s in WINDOW_STRATEGIES},
        {s: v for s, v in cand.norm.items() if s in WINDOW_STRATEGIES},
        weights,
    )
    return 1 - part / base * (1 - 1 / (1 + WINDOW_DISCOUNT * math.log(n)))


def _short_question(words: str) -> bool:
    """A turn that ends by asking, in few words: what it asks about is answered by the next line.
    A long request that ends with a question mark holds its own subject (coding chats)."""
    return words.rstrip().endswith("?") and len(words.split()) <= SHORT_QUESTION_WORDS


@dataclass
class Seen:
    """What one search has read: rows by id, and the words of the lines and topics it ranks. The
    ranking, the second stage, the duplicate test and the results ask for mostly the same rows and
    lines (the second stage reads the head's lines, the duplicate test the first 3k after it, the
    results their rows again); each is read once per search."""

    db: Database
    text: dict[tuple, str] = field(default_factory=dict)  # place (or ("span", id)) -> its words
    role: dict[tuple, str] = field(default_factory=dict)
    own: dict[tuple, str] = field(default_factory=dict)
    windows: dict[tuple, int] = field(default_factory=dict)  # place -> how many windows it is cut into
    done: set = field(default_factory=set)
    by_id: dict[str, dict[int, dict]] = field(default_factory=dict)

    def rows(self, table: str, columns: tuple, ids: Iterable[int]) -> dict[int, dict]:
        """id -> row of these ideas, spans or chunks (one column tuple per table)."""
        ids = list(ids)
        have = self.by_id.setdefault(table, {})
        if missing := [i for i in dict.fromkeys(ids) if i not in have]:
            have.update(_rows(self.db, table, columns, missing))
        return {i: have[i] for i in ids if i in have}

    def read(self, places: Iterable[tuple]) -> None:
        wanted = set(places) - self.done
        if not wanted:
            return
        texts, roles, own, windows = _line_texts(self.db, list(wanted))
        self.text.update(texts)
        self.role.update(roles)
        self.own.update(own)
        self.windows.update(windows)
        self.done |= wanted

    def read_topics(self, ids: Iterable[int]) -> None:
        for i, r in self.rows("spans", SPAN_COLUMNS, ids).items():
            self.text[("span", i)] = f"{r['name']} {r['summary']}"


def _line_texts(db: Database, origins: list[tuple]) -> tuple[dict, dict, dict, dict]:
    """Each line's words (its chunks and the turn before, else its ideas), who said it, its own
    words (its chunks without the turn before), and how many windows (chunks) it is cut into."""
    wanted = set(origins)
    if not wanted:
        return {}, {}, {}, {}
    out: dict[tuple, list[str]] = {}
    own: dict[tuple, list[str]] = {}
    roles: dict[tuple, str] = {}
    for r in lookup.chunk_texts(db, wanted):
        place = (r["source_file"], r["source_line"])
        if place in wanted:
            out.setdefault(place, []).extend((r["content"] or "", r["context"] or ""))
            own.setdefault(place, []).append(r["content"] or "")
            roles[place] = r["role"]
    windows = {place: len(parts) for place, parts in own.items()}
    for _, file, line, content in _ideas_on_lines(db, wanted - set(out)):
        out.setdefault((file, line), []).append(content)
    return _joined(out), roles, _joined(own), windows


def _speaker_tags(own: dict[tuple, str]) -> dict[tuple, str]:
    """The speaker tag each line opens with, as a side ("@Melanie" for "Melanie: ...")."""
    from total_recall.extract.offline import speaker_tag

    out = {}
    for place, words in own.items():
        name = speaker_tag(words)[0]
        if name:
            out[place] = TAG_SIDE + name
    return out


def _joined(parts: dict[tuple, list[str]]) -> dict[tuple, str]:
    return {key: " ".join(texts) for key, texts in parts.items()}


NAME = re.compile(r"\b([A-Z][a-z]+)\b(?:['’]s\b)?")
PARTICIPANT_LINES = 100  # lines naming a person that are read to tell which side they are on
PARTICIPANT_VOTES = 2  # lines that must place a name on one side
PARTICIPANT_SHARE = 0.75  # of them on that side
OTHER_SIDE = {"user": "assistant", "assistant": "user"}
TAG_SIDE = "@"  # a side that is one speaker's tagged lines ("@Melanie"), not a role


def typed_in_lower_case(text: str) -> bool:
    """A query whose only capitals are its first letter and the pronoun I, as /remember is typed
    ("what did caroline say about the move", "What did I tell ana?"): its names are in lower case."""
    words = querymod.WORD.findall(text)
    return any(ch.isalpha() for ch in text) and all(
        w == w.lower() or (n == 0 and w[1:] == w[1:].lower()) or w == "I" for n, w in enumerate(words)
    )


def participants(
    db: Database, text: str, projects: list[str] | None, typed: bool = False
) -> dict[str, str | None]:
    """The people of the conversation a question names, each with their side (None when both
    sides are called by it), as the lines that name them tell: a line that opens with the name as
    its speaker tag ("Melanie: ...") is that side's, a line that addresses the name ("Thanks,
    Melanie!") is the other side's. Capitalised words no line uses that way (places, products)
    are not participants; with `typed` (a query in lower case) every word is a candidate, as
    capitalised, and the lines vote the same way. A sample of the lines is read, unranked:
    ranking every line that says a common name cost 8-19 ms at 100k ideas."""
    from total_recall.extract.offline import is_person_like, speaker_tag, vocatives

    if typed:
        written = {w.capitalize() for w in querymod.WORD.findall(text) if w.isalpha() and len(w) > 1}
    else:
        written = {m.group(1) for m in NAME.finditer(text)}
    names = {name for name in written if is_person_like(name)}
    if not names:
        return {}
    match = querymod.any_of(sorted(names))
    votes = {name: {"user": 0, "assistant": 0} for name in names}
    tagged: dict[str, list[str]] = {name: [] for name in names}  # the roles of the lines it opens
    speakers: dict[str, set[str]] = {"user": set(), "assistant": set()}  # the tags each role opens with
    for row in lookup.lines_matching(db, match, projects, PARTICIPANT_LINES):
        role, words = row["role"], row["content"] or ""
        if role not in OTHER_SIDE or (typed and not any(name in words for name in names)):
            continue  # (a line that says none of the words as a name cannot place one)
        if not row["seq"]:
            speaker, words = speaker_tag(words)
            if speaker:
                speakers[role].add(speaker)
            if speaker in votes:
                votes[speaker][role] += 1
                tagged[speaker].append(role)
        for sentence in vectors.SENTENCE_END.split(words):
            for name in set(vocatives(sentence)[0]) & names:
                votes[name][OTHER_SIDE[role]] += 1
    out: dict[str, str | None] = {}
    for name, tally in votes.items():
        total = sum(tally.values())
        if total >= PARTICIPANT_VOTES:
            side = max(tally, key=lambda s: tally[s])
            out[name] = side if tally[side] >= PARTICIPANT_SHARE * total else None
        if len(tagged[name]) >= PARTICIPANT_VOTES and any(len(speakers[r]) > 1 for r in tagged[name]):
            # Trigger: the name's lines open with its tag, and other speakers' lines open in the
            # same role (a group chat, or every turn written as the user's "Name: text"). Why: the
            # role holds more than this person, and names it addresses vote for the wrong side.
            # Outcome: the side is the lines the name opens.
            out[name] = TAG_SIDE + name
    return out


def without_names(text: str, names) -> str:
    """The question without these people's names (and their 's), for its vector: who a question is
    about is matched by words; left in, the name pulls every line that names anyone alike."""
    if not names:
        return text
    rest = " ".join(NAME.sub(lambda m: "" if m.group(1) in names else m.group(0), text).split())
    return rest if len(querymod.terms_of(rest)) >= 2 else text


def _ideas_on_lines(db: Database, wanted: set[tuple]) -> list[tuple]:
    """(idea id, file, line, content) of every idea said on one of these (file, line) places."""
    if not wanted:
        return []
    return [tuple(r) for r in lookup.ideas_on(db, wanted)]


def _rank(ctx: SearchContext, pool: dict, q: querymod.Query, now: datetime, seen: Seen) -> list[Candidate]:
    chunks = seen.rows("chunks", CHUNK_COLUMNS, [c.id for c in pool.values() if c.kind == "chunk"])
    _add_line_ideas(ctx.db, pool, chunks, q)
    idea_ids = [c.id for c in pool.values() if c.kind == "idea"]
    ideas = seen.rows("ideas", IDEA_COLUMNS, idea_ids)
    spans = seen.rows("spans", SPAN_COLUMNS, [c.id for c in pool.values() if c.kind == "span"])
    return weigh(pool, ideas, spans, q, now, superseded_by(ctx.db, idea_ids), chunks)


def _add_line_ideas(db: Database, pool: dict, chunks: dict[int, dict], q: querymod.Query) -> None:
    """A line found by its words is shown as its own idea when it has one: the ideas of every
    chunk's line join the pool (with no rank of their own), the one sharing most query words first."""
    terms = set(q.terms)
    for idea_id, file, line, content in _ideas_on_lines(
        db, {(r["source_file"], r["source_line"]) for r in chunks.values()}
    ):
        if ("idea", idea_id) in pool:
            continue
        overlap = len(terms & set(querymod.terms_of(content)))
        # No strategy ranked it: its score only orders it among its line's ideas.
        pool[("idea", idea_id)] = Candidate("idea", idea_id, score=overlap * 1e-6, origin=(file, line))


def _line_words(seen: Seen, ranked: list[Candidate], k: int) -> dict[tuple, frozenset]:
    """The word sets of the lines that may be shown (the first 3k), for _select's duplicate test;
    lines of fewer than DUPLICATE_WORDS distinct words are left out (never one another's twin)."""
    places = list(dict.fromkeys(c.origin for c in ranked if c.origin is not None))[: 3 * k]
    seen.read(places)
    texts, own = seen.text, seen.own
    out = {}
    for place in places:
        bag = frozenset(querymod.WORD.findall((own.get(place) or texts.get(place) or "").lower()))
        if len(bag) >= DUPLICATE_WORDS:
            out[place] = bag
    return out


def _twin(bag: frozenset | None, chosen: list[tuple[Candidate, frozenset]]) -> Candidate | None:
    """The chosen line that says the same text as `bag`, if any."""
    if bag is None:
        return None
    for cand, other in chosen:
        if len(bag & other) >= DUPLICATE_SHARE * len(bag | other):
            return cand
    return None


def _select(
    ranked: list[Candidate],
    k: int,
    words: dict[tuple, frozenset] | None = None,
    per_line: int = MAX_PER_MESSAGE,
    max_spans: int = MAX_SPAN_RESULTS,
) -> list[Candidate]:
    """The top k, with at most `max_spans` spans and `per_line` ideas from one message, and a
    line saying the same text as a line above it (`words`, DUPLICATE_SHARE) kept as one of that
    line's places instead of a result of its own.

    Several fragments of one message say one thing; showing distinct memories is more useful. A
    query asking for a kind of memory lists the memories themselves (up to k of one line: the steps
    of a plan), lines.
    """
    words = words or {}
    out, spans, per_origin, chosen = [], 0, {}, []
    for cand in ranked:
        if cand.kind == "span":
            if spans >= max_spans:
                continue
            spans += 1
        elif cand.origin is not None:
            if per_origin.get(cand.origin, 0) >= per_line:
                continue
            bag = words.get(cand.origin)
            if cand.origin not in per_origin and (twin := _twin(bag, chosen)) is not None:
                if cand.origin != twin.origin and all(c.origin != cand.origin for c in twin.also):
                    twin.also.append(cand)
                continue
            per_origin[cand.origin] = per_origin.get(cand.origin, 0) + 1
            if bag is not None:
                chosen.append((cand, bag))
        out.append(cand)
        if len(out) >= k:
            break
    return out


def order_chains(db: Database, top: list[Candidate]) -> list[Candidate]:
    """Evolution chains: a superseded idea is listed right after the idea that replaced it."""
    successors = superseded_by(db, [c.id for c in top if c.kind == "idea"])
    present = {c.id for c in top if c.kind == "idea"}
    held = {c.id: c for c in top if c.kind == "idea" and any(s in present for s in successors.get(c.id, []))}
    out: list[Candidate] = []
    placed: set[int] = set()

    def place(c: Candidate) -> None:
        if c.kind == "idea" and c.id in placed:
            return
        out.append(c)
        if c.kind == "idea":
            placed.add(c.id)
            for old_id, succ in successors.items():
                if c.id in succ and old_id in held:
                    place(held[old_id])

    for cand in top:
        if cand.kind == "idea" and cand.id in held:
            continue
        place(cand)
    out += [c for c in held.values() if c.id not in placed]
    return out


EXCERPT_CHARS = 400


EXCERPT_HITS = 64  # places of one query word read in a message (a word on every line says little)


def excerpt(text: str, terms: Iterable[str] = (), limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of a message: the stretch that holds the most of the query's words,
    each weighed by how rare it is in the message (a word said once, an error's name, counts more than
    one said on every line), centred on where its rarest words are; the message's start when it holds
    none."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    centre = _densest(text.lower(), terms, limit * 3 // 4)
    start = max(0, min(centre - limit // 2, len(text) - limit)) if centre is not None else 0
    if start and (space := text.find(" ", start, start + 20)) >= 0:
        start = space + 1  # open at a word
    return (
        ("…" if start else "")
        + text[start : start + limit].strip()
        + ("…" if start + limit < len(text) else "")
    )


def _densest(low: str, terms: Iterable[str], span: int) -> int | None:
    """The middle (weighed by rarity) of the stretch of `span` characters that holds the largest
    rarity-weighed share of the query's distinct words, each matched at a word's start; None when
    none is there."""
    hits: list[tuple[int, str]] = []
    for term in dict.fromkeys(t for t in terms if t):
        for n, m in enumerate(re.finditer(r"\b" + re.escape(term), low)):
            if n >= EXCERPT_HITS:
                break
            hits.append((m.start(), term))
    if not hits:
        return None
    hits.sort()
    weight = {t: 1 / math.sqrt(sum(1 for _, u in hits if u == t)) for t in {t for _, t in hits}}
    inside: dict[str, int] = {}
    best, best_at, end, score = -1.0, (0, 1), 0, 0.0
    for first, (at, _term) in enumerate(hits):
        while end < len(hits) and hits[end][0] < at + span:
            word = hits[end][1]
            if not inside.get(word):
                score += weight[word]
            inside[word] = inside.get(word, 0) + 1
            end += 1
        if score > best + 1e-9:
            best, best_at = score, (first, end)
        word = hits[first][1]
        inside[word] -= 1
        if not inside[word]:
            score -= weight[word]
    chosen = hits[best_at[0] : best_at[1]]
    return round(sum(at * weight[t] for at, t in chosen) / sum(weight[t] for _, t in chosen))


def build_results(seen: Seen, cands: list[Candidate], terms: Iterable[str] = ()) -> list[dict]:
    db = seen.db
    shown = [c.id for c in cands if c.kind == "idea"]
    twins = [t for c in cands for t in c.also]
    ideas = seen.rows("ideas", IDEA_COLUMNS, shown + [t.id for t in twins if t.kind == "idea"])
    spans = seen.rows("spans", SPAN_COLUMNS, [c.id for c in cands if c.kind == "span"])
    chunks = seen.rows("chunks", CHUNK_COLUMNS, [c.id for c in cands + twins if c.kind == "chunk"])
    terms = list(terms)
    span_ids = {ideas[i]["span_id"] for i in shown if i in ideas and ideas[i]["span_id"]}
    parents = seen.rows("spans", SPAN_COLUMNS, span_ids)
    ents = _entities(db, shown)
    rels = _relations(db, shown)
    succ = superseded_by(db, shown)
    sources = _sources(db, shown)
    results = []
    for c in cands:
        if c.kind == "idea":
            r = ideas[c.id]
            span = parents.get(r["span_id"])
            results.append(
                {
                    "kind": "idea",
                    "id": c.id,
                    "content": r["content"],
                    "intent": r["intent"],
                    "confidence": round(float(r["confidence"]), 3),
                    "answered": bool(r["answered"]),
                    "score": round(c.score, 6),
                    "session": r["session_id"],
                    "project": r["project"],
                    "timestamp": r["message_time"],
                    "source_file": r["source_file"],
                    "source_line": r["source_line"],
                    "machine": r["machine"],
                    "span": {
                        "id": span["id"],
                        "name": span["name"],
                        "start_line": span["start_line"],
                        "end_line": span["end_line"],
                    }
                    if span
                    else None,
                    "entities": ents.get(c.id, []),
                    "relations": rels.get(c.id, []),
                    "superseded_by": succ.get(c.id, []),
                    "matched_by": sorted(c.strategies),
                    "mention_count": r["mention_count"],
                    "pinned": bool(r["pinned"]),
                    "closed": r["closed_source_line"] is not None,
                    "sources": _with_twins(
                        sources.get(
                            c.id,
                            [
                                {
                                    "source_file": r["source_file"],
                                    "source_line": r["source_line"],
                                    "timestamp": r["message_time"],
                                    "machine": r["machine"],
                                }
                            ],
                        ),
                        c.also,
                        ideas,
                        chunks,
                    ),
                }
            )
        elif c.kind == "chunk":
            r = chunks[c.id]
            results.append(
                {
                    "kind": "message",
                    "id": c.id,
                    "content": excerpt(r["content"], terms),
                    "role": r["role"],
                    "message_kind": r["kind"],
                    "intent": None,
                    "confidence": None,
                    "answered": False,
                    "score": round(c.score, 6),
                    "session": r["session_id"],
                    "project": r["project"],
                    "timestamp": r["timestamp"],
                    "source_file": r["source_file"],
                    "source_line": r["source_line"],
                    "machine": r["machine"],
                    "message_start_line": r["message_line"],
                    "span": None,
                    "entities": [],
                    "relations": [],
                    "superseded_by": [],
                    "matched_by": sorted(c.strategies),
                    "mention_count": 1 + len(c.also),
                    "pinned": False,
                    "sources": _with_twins(
                        [
                            {
                                "source_file": r["source_file"],
                                "source_line": r["source_line"],
                                "timestamp": r["timestamp"],
                                "machine": r["machine"],
                            }
                        ],
                        c.also,
                        ideas,
                        chunks,
                    ),
                }
            )
        else:
            r = spans[c.id]
            results.append(
                {
                    "kind": "span",
                    "id": c.id,
                    "name": r["name"],
                    "summary": r["summary"],
                    "content": r["summary"],
                    "intent": None,
                    "confidence": None,
                    "score": round(c.score, 6),
                    "session": r["session_id"],
                    "project": r["project"],
                    "timestamp": r["started_at"],
                    "source_file": r["source_file"],
                    "start_line": r["start_line"],
                    "end_line": r["end_line"],
                    "depth": r["depth"],
                    "span": None,
                    "entities": [],
                    "relations": [],
                    "superseded_by": [],
                    "matched_by": sorted(c.strategies),
                }
            )
    return results


def _with_twins(places: list[dict], twins: list[Candidate], ideas: dict, chunks: dict) -> list[dict]:
    """A result's places and, after them, those of the lines that say the same text (_select)."""
    seen = {(p["source_file"], p["source_line"]) for p in places}
    out = list(places)
    for twin in twins:
        row = (ideas if twin.kind == "idea" else chunks).get(twin.id)
        if row is None or twin.origin in seen:
            continue
        seen.add(twin.origin)
        out.append(
            {
                "source_file": twin.origin[0],
                "source_line": twin.origin[1],
                "timestamp": row["message_time" if twin.kind == "idea" else "timestamp"],
                "machine": row["machine"],
            }
        )
    return out


def _sources(db: Database, ids: list[int]) -> dict[int, list[dict]]:
    """Every place an idea was said (merged duplicates keep all of them)."""
    if not ids:
        return {}
    out: dict[int, list[dict]] = {}
    for r in lookup.sources(db, ids):
        out.setdefault(r["idea_id"], []).append(
            {
                "source_file": r["source_file"],
                "source_line": r["source_line"],
                "timestamp": r["message_time"],
                "machine": r["machine"],
            }
        )
    return out


def _entities(db: Database, ids: list[int]) -> dict[int, list[str]]:
    if not ids:
        return {}
    out: dict[int, list[str]] = {}
    for r in lookup.entity_names(db, ids):
        out.setdefault(r["idea_id"], []).append(r["name"])
    return out


def _relations(db: Database, ids: list[int]) -> dict[int, list[dict]]:
    if not ids:
        return {}
    out: dict[int, list[dict]] = {}
    wanted = set(ids)
    for r in lookup.relations_of(db, ids):
        from_id, to_id, rtype = r["from_id"], r["to_id"], r["relation_type"]
        from_text, to_text = r["from_text"], r["to_text"]
        if from_id in wanted:
            out.setdefault(from_id, []).append(
                {"type": rtype, "direction": "out", "id": to_id, "content": to_text}
            )
        if to_id in wanted:
            out.setdefault(to_id, []).append(
                {"type": rtype, "direction": "in", "id": from_id, "content": from_text}
            )
    return out


# -- entry points used by the CLI and the daemon ---------------------------------------------
def wants_hyde(settings: config.Settings, text: str, forced: bool) -> bool:
    if not settings.llm_enabled():
        return False
    if querymod.analyze(text).lists_newest_first():
        # "where did we leave off", "todos", "what did we do in February": an imagined answer's words
        # would add lines to the list (hyde_bm25) after a wait for the endpoint.
        return False
    mode = settings.search.hyde
    if forced or mode == "on":
        return True
    return mode == "auto" and len(querymod.terms_of(text)) <= 3


BUDGET_SPENT = "today's LLM token budget (llm.daily_token_budget) is spent; it renews at midnight UTC"


def hyde_for(ctx: SearchContext, text: str) -> str | None:
    from total_recall.extract import llm

    if ctx.llm_budget_spent():
        ctx._note(f"HyDE skipped: {BUDGET_SPENT}")
        return None
    try:
        return llm.hyde(ctx.settings, text, record_call=ctx.llm_calls.append)
    except (ExtractionError, TotalRecallError) as exc:
        ctx._note(f"HyDE skipped: {exc}")
        return None


def run(
    db: Database,
    settings: config.Settings,
    embedder: Any,
    request: dict,
    *,
    spare: Any = None,
    executor: Any = None,
) -> dict:
    """One search request (CLI or socket): {query, k, project, all_projects, cwd, hyde, intent}.

    The socket server also passes `spare` (a second connection when one is free) and `executor`
    so that two threads share the strategies (_run_jobs)."""
    ctx = SearchContext(db, embedder, settings, spare=spare, executor=executor)
    text = str(request.get("query") or "")
    k = int(request.get("k") or settings.search.k)
    wanted = wants_hyde(settings, text, bool(request.get("hyde")))
    hyde_text = hyde_for(ctx, text) if wanted else None
    ctx.llm_failed = wanted and hyde_text is None
    if request.get("hyde") and not settings.llm_enabled():
        ctx._note("--hyde needs an LLM endpoint (llm.base_url); searched without it")
    results = search(
        ctx,
        text,
        k=k,
        project=request.get("project"),
        all_projects=bool(request.get("all_projects")),
        cwd=request.get("cwd"),
        hyde_text=hyde_text,
        session=request.get("session"),
        current_session=request.get("current_session"),
        intent=request.get("intent") or None,
    )
    record_llm_calls(db, ctx.llm_calls)
    sessions = [r["session"] for r in results if r.get("session")]
    titles, prs = memories.session_titles(db, sessions), memories.session_prs(db, sessions)
    for r in results:
        r["session_title"] = titles.get(r.get("session"))  # the /resume picker's name for it, or None
        r["session_prs"] = prs.get(r.get("session"), [])  # the pull requests it opened (PR link lines)
    return {"results": results, "notes": ctx.notes}


def record_llm_calls(db: Database, calls: list[dict]) -> None:
    """A search's HyDE and re-ranking calls, written to llm_calls after the search so that they
    count against the daily token budget and show in `stats`. A store that refuses the write (busy
    past its timeout, read-only) costs the accounting of these calls, never the search's answer."""
    if not calls:
        return
    try:
        with db.write():
            state.record_calls(db, calls, time.time())
    except Exception as exc:  # boundary: the user asked for results, which are ready
        log.warning("search_llm_calls_not_recorded", calls=len(calls), error=str(exc))


def wants_rerank(settings: config.Settings | None, q: querymod.Query) -> bool:
    """Whether the LLM orders this search's first results: asked for (`search.rerank = on`), an
    endpoint set, and a query whose order is not its own list's (Query.lists_newest_first)."""
    return bool(
        settings is not None
        and settings.search.rerank == "on"
        and settings.llm_enabled()
        and not q.lists_newest_first()
    )


def llm_order(ctx: SearchContext, text: str, results: list[dict], k: int) -> list[dict]:
    """The first k of results after the LLM ordered the first `search.rerank_depth` of them: the
    ones it judged to help answer the query in its order, then the ones it left out in ours, then
    the rest. Nothing is dropped by its judgement, and when it fails (no endpoint answering, an
    answer that orders nothing) a note says so and our order stands."""
    head = results[: ctx.settings.search.rerank_depth]
    if len(head) < 2:
        return results[:k]
    from total_recall.extract import llm

    try:
        order = llm.rerank(ctx.settings, text, [_passage(r) for r in head], record_call=ctx.llm_calls.append)
    except (ExtractionError, TotalRecallError) as exc:
        ctx._note(f"re-ranking skipped: {exc}")
        return results[:k]
    if not order:
        ctx._note(f"the model judged none of the first {len(head)} results to answer this: our order")
        return results[:k]
    chosen = set(order)
    ordered = [head[i] for i in order] + [r for i, r in enumerate(head) if i not in chosen]
    return (ordered + results[len(head) :])[:k]


def _passage(result: dict) -> str:
    """A result as the re-ranking model reads it: what it is, when, and its text."""
    if result.get("kind") == "span":
        what, text = "topic", f"{result.get('name') or ''}: {result.get('summary') or ''}"
    elif result.get("kind") == "idea":
        what, text = str(result.get("intent") or "memory"), str(result.get("content") or "")
    else:
        what, text = f"{result.get('role') or 'someone'} said", str(result.get("content") or "")
    day = str(result.get("timestamp") or "")[:10]
    return f"({what}{', ' + day if day else ''}) {text}"


def local_embedder(settings: config.Settings) -> Any:
    try:
        from total_recall.embed import get_embedder

        return get_embedder(settings)
    except (EmbeddingError, TotalRecallError) as exc:
        log.warning("embedder_unavailable", error=str(exc))
        return None


def run_queries_file(
    settings: config.Settings, path: Path, *, all_projects: bool, k: int | None
) -> Iterable[dict]:
    """`search --queries FILE`: one JSON object per line in, one {query, results} line out, same order."""
    from total_recall import db as dbmod

    database = dbmod.open_store(settings)  # the memory store: memory.db or [store] url
    embedder = local_embedder(settings)
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    req = json.loads(line)
                except ValueError:
                    raise TotalRecallError(f"{path}:{number}: not a JSON object") from None
                req = req if isinstance(req, dict) else {"query": str(req)}
                req.setdefault("all_projects", all_projects or not req.get("project"))
                req["k"] = req.get("k") or k
                answer = run(database, settings, embedder, req)
                yield {"query": req.get("query"), "results": answer["results"]}
    finally:
        database.close()
