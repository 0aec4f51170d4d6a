"""A synthetic but realistic memory database: N ideas written straight into the schema with SQL.

Text: templated sentences, one template family per intent, filled from a varied vocabulary of
projects, technologies, components, errors, people and files (so FTS5 sees a realistic spread of
rare and common terms). Ideas come in sessions of 40 ideas, with a session span and a topic
span per 10 ideas; entities are linked as the extractor would link them.

Vectors: the first `real` distinct texts are embedded with the packaged MiniLM model
(LocalEmbedder); every other idea takes the vector of a random real one plus Gaussian noise
(sigma 0.03 per dimension, cosine ~0.85 to its parent) and is renormalised. The vector space
therefore has the clustered structure of real embeddings at a fraction of the embedding time.
"""

from __future__ import annotations

import hashlib
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

PROJECTS = (
    "billing-api mobile-app data-pipeline search-service auth-gateway web-dashboard infra-terraform "
    "ml-ranking notification-hub inventory-sync docs-site cli-tools payments-ledger chat-widget "
    "report-builder video-transcoder crm-integration feature-flags analytics-etl edge-cache"
).split()
TECH = (
    "postgres redis sqlite kafka rabbitmq react vue typescript python rust go docker kubernetes terraform "
    "nginx graphql grpc celery fastapi django flask pytest playwright webpack vite tailwind prisma "
    "sqlalchemy alembic elasticsearch opensearch clickhouse duckdb pandas numpy onnxruntime pytorch "
    "airflow dbt s3 cloudfront lambda dynamodb bigquery snowflake sentry prometheus grafana "
    "opentelemetry github-actions jenkins poetry uv ruff mypy black eslint jest storybook stripe "
    "twilio sendgrid auth0 keycloak vault consul envoy istio helm argocd"
).split()
COMPONENTS = (
    "retry queue",
    "login flow",
    "rate limiter",
    "billing webhook",
    "search index",
    "session cache",
    "upload handler",
    "image resizer",
    "export job",
    "migration runner",
    "feature flag client",
    "health check",
    "connection pool",
    "token refresh",
    "email digest",
    "audit log",
    "permission model",
    "onboarding wizard",
    "pricing page",
    "invoice generator",
    "sync worker",
    "event consumer",
    "schema validator",
    "cron scheduler",
    "metrics exporter",
    "websocket gateway",
    "CSV importer",
    "dark mode toggle",
    "pagination widget",
    "backfill script",
)
ERRORS = (
    "a timeout after 30 seconds",
    "ImportError: cannot import name 'settings'",
    "a deadlock on the orders table",
    "HTTP 429 from the upstream API",
    "a memory leak in the worker",
    "flaky snapshot tests",
    "TypeError: undefined is not a function",
    "duplicate key value violates unique constraint",
    "SSL: CERTIFICATE_VERIFY_FAILED",
    "OOMKilled pods at peak traffic",
    "a race condition on startup",
    "stale cache entries after deploy",
    "N+1 queries on the list endpoint",
    "UnicodeDecodeError in the parser",
    "a 502 from the load balancer",
    "missing CORS headers",
    "clock skew between nodes",
    "segfault in the native extension",
    "connection refused on port 5432",
    "disk full on the build agent",
)
PEOPLE = (
    "Alice Martin, Bruno Costa, Chen Wei, Dana Levi, Emeka Obi, Fatima Zahra, Gustavo Lima, Hana Sato, "
    "Ivan Petrov, Jasmine Kaur, Kofi Mensah, Lena Fischer, Mateo Rossi, Nadia Haddad, Oscar Nilsson, "
    "Priya Nair, Quentin Dubois, Rosa Alvarez, Samir Khan, Tomasz Nowak"
).split(", ")
MODULES = ("api", "core", "workers", "models", "utils", "billing", "auth", "search", "ingest", "ui")
NAMES = (
    "handlers",
    "client",
    "settings",
    "schema",
    "tasks",
    "views",
    "routes",
    "cache",
    "retry",
    "parser",
    "exporter",
    "service",
    "store",
    "config",
    "middleware",
    "webhooks",
    "jobs",
    "queries",
)
REASONS = (
    "it halves the p95 latency",
    "the team already knows it",
    "it removes a moving part",
    "the licence is simpler",
    "it works offline",
    "the managed option was too expensive",
    "it survives restarts without losing jobs",
    "the old one is unmaintained",
    "tests run twice as fast",
    "it supports transactions",
    "we need streaming responses",
    "it keeps the bundle small",
)
FIXES = (
    "pinning the dependency to the previous minor version",
    "adding an index on the foreign key",
    "moving the call out of the request path",
    "retrying with exponential backoff and jitter",
    "raising the pool size to 20",
    "using a transaction around both writes",
    "clearing the cache on deploy",
    "batching the inserts in groups of 500",
    "switching the parser to streaming mode",
    "setting an explicit timeout on the client",
    "reading the file as UTF-8 with errors replaced",
)
TEMPLATES = {
    "decision": (
        "We decided to use {tech} instead of {tech2} for the {component} because {reason}.",
        "Going with {tech} for the {component}; {person} agreed since {reason}.",
        "The {component} will move from {tech2} to {tech} next sprint because {reason}.",
    ),
    "problem": (
        "{file} fails with {error} when the {component} runs under load.",
        "The {component} started throwing {error} after the {tech} upgrade.",
        "{person} reported {error} in the {component} on staging.",
    ),
    "solution": (
        "Fixed {error} in {file} by {fix}.",
        "The {component} no longer hits {error} after {fix}.",
        "Worked around {error} in {tech} by {fix}.",
    ),
    "question": (
        "Should the {component} retry on {error} or fail fast?",
        "Do we still need {tech2} once the {component} runs on {tech}?",
        "Who owns the {component} now that {person} moved to another team?",
    ),
    "todo": (
        "Add an integration test for the {component} in {file}.",
        "Remove the {tech2} fallback from {file} once {tech} is stable.",
        "Ask {person} to review the {component} changes before Friday.",
    ),
    "conclusion": (
        "The slowdown in the {component} comes from {error}, not from {tech}.",
        "{tech} handles the {component} load fine; the bottleneck is {tech2}.",
        "Benchmarks show {tech} is faster than {tech2} for the {component}.",
    ),
    "context": (
        "{person} prefers {tech} for anything touching the {component}.",
        "The {component} lives in {file} and is deployed with {tech}.",
        "{person} maintains the {tech} setup for the {project} project.",
    ),
}
QUERIES = (
    "why did we switch from {tech2} to {tech}",
    "problems with the {component}",
    "how did we fix {error}",
    "what did {person} say about {tech}",
    "{error} in {file}",
    "decisions about the {component}",
    "who owns the {component}",
    "todos for {tech}",
    "is {tech} faster than {tech2}",
    "{component} {tech} timeout",
)
INTENT_WEIGHTS = {
    "context": 30,
    "decision": 15,
    "problem": 15,
    "solution": 15,
    "conclusion": 10,
    "todo": 8,
    "question": 7,
}
SESSION_IDEAS = 40
TOPIC_IDEAS = 10
NOISE_SIGMA = 0.03


# Cached databases are reused only when built by this exact generator.
FINGERPRINT = hashlib.sha256(
    repr(
        (
            PROJECTS,
            TECH,
            COMPONENTS,
            ERRORS,
            PEOPLE,
            MODULES,
            NAMES,
            REASONS,
            FIXES,
            TEMPLATES,
            INTENT_WEIGHTS,
            SESSION_IDEAS,
            TOPIC_IDEAS,
            NOISE_SIGMA,
            "chunks",
        )
    ).encode()
).hexdigest()[:12]


@dataclass
class Idea:
    project: str
    session: str
    line: int
    intent: str
    text: str
    entities: list[tuple[str, str]]


def _fill(template: str, rng: random.Random, project: str) -> tuple[str, list[tuple[str, str]]]:
    tech, tech2 = rng.sample(TECH, 2)
    values = {
        "tech": tech,
        "tech2": tech2,
        "component": rng.choice(COMPONENTS),
        "error": rng.choice(ERRORS),
        "person": rng.choice(PEOPLE),
        "reason": rng.choice(REASONS),
        "fix": rng.choice(FIXES),
        "file": f"src/{rng.choice(MODULES)}/{rng.choice(NAMES)}.{rng.choice(('py', 'ts', 'go', 'rs'))}",
        "project": project,
    }
    text = template.format(**values)
    kinds = {"tech": "technology", "tech2": "technology", "person": "person", "file": "file"}
    ents = [(values[k], kind) for k, kind in kinds.items() if "{" + k + "}" in template]
    return text[0].upper() + text[1:], ents


def ideas(n: int, seed: int = 11) -> Iterator[Idea]:
    rng = random.Random(seed)
    intents = [i for i, w in INTENT_WEIGHTS.items() for _ in range(w)]
    for index in range(n):
        session_no = index // SESSION_IDEAS
        project = PROJECTS[session_no % len(PROJECTS)]
        intent = rng.choice(intents)
        text, ents = _fill(rng.choice(TEMPLATES[intent]), rng, project)
        yield Idea(project, f"sess-{session_no:06d}", 1 + (index % SESSION_IDEAS) * 3, intent, text, ents)


def queries(n: int, seed: int = 5) -> list[str]:
    """n distinct queries (distinct so that no text cache answers a repeated one)."""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    for i in range(n * 50):
        found.setdefault(_fill(QUERIES[i % len(QUERIES)], rng, "")[0].lower(), None)
        if len(found) >= n:
            break
    return list(found)


def project_path(name: str) -> str:
    return f"/home/dev/projects/{name}"


def build(db: Any, n: int, *, real: int = 3000, seed: int = 11, progress: Any = None) -> dict:
    """Fill an empty, migrated database with n ideas; return timings."""
    import numpy as np

    from total_recall import db as dbmod
    from total_recall.embed import LocalEmbedder, normalise, to_blob

    progress = progress or _stderr

    embedder = LocalEmbedder()
    dbmod.ensure_vector_tables(db, embedder.model_id, embedder.dim)
    rows = list(ideas(n, seed))
    distinct = list(dict.fromkeys(r.text for r in rows))[:real]
    started = time.perf_counter()
    progress(f"[synthetic] embedding {len(distinct)} real texts ...")
    base = embedder.embed(distinct)
    embed_seconds = time.perf_counter() - started
    rng = np.random.default_rng(seed)
    position = {t: i for i, t in enumerate(distinct)}
    parents = np.array([position.get(r.text, -1) for r in rows])
    vectors = base[np.where(parents >= 0, parents, rng.integers(0, len(distinct), len(rows)))]
    noisy = parents < 0
    vectors[noisy] = normalise(vectors[noisy] + rng.normal(0, NOISE_SIGMA, (int(noisy.sum()), embedder.dim)))
    progress(f"[synthetic] writing {n} ideas ...")
    with db.write():
        _write(db, rows, vectors, to_blob)
        db.set_meta("bench_synthetic_ideas", f"{n}/{FINGERPRINT}")
        # As a user's database that the daemon maintains weekly: without this the daemon's first
        # heartbeat runs the weekly maintenance over every idea during the measurement.
        db.set_meta("last_maintain", time.time())
    return {
        "real_embedded": len(distinct),
        "embed_seconds": embed_seconds,
        "total_seconds": time.perf_counter() - started,
    }


def _write(db: Any, rows: list[Idea], vectors: Any, to_blob: Any) -> None:
    from total_recall import state
    from total_recall.db import int8_blob

    base_time = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
    now = time.time()
    spans: dict[tuple[str, int], int] = {}
    first_idea: dict[int, int] = {}  # span id -> index of its first idea, whose vector it takes
    entity_ids: dict[str, int] = {}
    chunks = bool(db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'chunk_embeddings'", default=0))
    previous = ""
    for index, (row, vec) in enumerate(zip(rows, vectors)):
        when = (base_time + timedelta(minutes=7 * index)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        source = f"/home/dev/.claude/projects/-home-dev-projects-{row.project}/{row.session}.jsonl"
        span_id = _span(db, spans, row, index, source, when, now)
        first_idea.setdefault(span_id, index)
        first_idea.setdefault(int(db.scalar("SELECT parent_id FROM spans WHERE id = ?", (span_id,))), index)
        cur = db.execute(
            "INSERT INTO ideas (span_id, content, content_hash, intent, confidence, file_id, "
            "source_line, "
            "session_id, project, git_branch, message_time, created_at, updated_at, needs_embedding) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'main', ?, ?, ?, 0)",
            (
                span_id,
                row.text,
                hashlib.sha256(row.text.encode()).hexdigest(),
                row.intent,
                0.7,
                state.file_id(db, source),
                row.line,
                row.session,
                project_path(row.project),
                when,
                now,
                now,
            ),
        )
        idea_id = int(cur.lastrowid)
        db.execute(
            "INSERT INTO idea_embeddings (idea_id, project, embedding) VALUES (?, ?, vec_int8(?))",
            (idea_id, project_path(row.project), int8_blob(to_blob(vec))),
        )
        if chunks:  # the line's own words, searched like the idea (one chunk per source line)
            cid = int(
                db.execute(
                    "INSERT INTO chunks (file_id, source_line, message_line, seq, session_id, project, "
                    "role, kind, "
                    "timestamp, content, context, needs_embedding) VALUES (?, ?, ?, 0, ?, ?, 'user', "
                    "'prompt', ?, ?, ?, 0)",
                    (
                        state.file_id(db, source),
                        row.line,
                        row.line,
                        row.session,
                        project_path(row.project),
                        when,
                        row.text,
                        previous,
                    ),
                ).lastrowid
            )
            db.execute(
                "INSERT INTO chunk_embeddings (chunk_id, project, embedding) VALUES (?, ?, vec_int8(?))",
                (cid, project_path(row.project), int8_blob(to_blob(vec))),
            )
        previous = " ".join(row.text.split()[-40:])
        for name, kind in row.entities:
            if name not in entity_ids:
                entity_ids[name] = int(
                    db.execute("INSERT INTO entities (name, type) VALUES (?, ?)", (name, kind)).lastrowid
                )
            db.execute(
                "INSERT OR IGNORE INTO idea_entities (idea_id, entity_id) VALUES (?, ?)",
                (idea_id, entity_ids[name]),
            )
    db.executemany(
        "INSERT INTO span_embeddings (span_id, project, embedding) "
        "SELECT id, project, vec_int8(?) FROM spans WHERE id = ?",
        [(int8_blob(to_blob(vectors[i])), span_id) for span_id, i in first_idea.items()],
    )
    if db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'idea_sources'", default=0):
        db.execute(
            "INSERT OR IGNORE INTO idea_sources (idea_id, file_id, source_line, session_id, "
            "message_time) "
            "SELECT id, file_id, source_line, session_id, message_time FROM ideas"
        )


def _span(db: Any, spans: dict, row: Idea, index: int, source: str, when: str, now: float) -> int:
    """The topic span of an idea (creating the session span and topic spans as sessions go)."""
    session_key = (row.session, -1)
    if session_key not in spans:
        spans[session_key] = _insert_span(db, None, row, 0, f"session {row.session}", source, when, now)
    topic_key = (row.session, (index % SESSION_IDEAS) // TOPIC_IDEAS)
    if topic_key not in spans:
        spans[topic_key] = _insert_span(db, spans[session_key], row, 1, row.text[:60], source, when, now)
    return spans[topic_key]


def _insert_span(
    db: Any, parent: int | None, row: Idea, depth: int, name: str, source: str, when: str, now: float
) -> int:
    end = row.line + (SESSION_IDEAS * 3 if depth == 0 else TOPIC_IDEAS * 3)
    cur = db.execute(
        "INSERT INTO spans (parent_id, session_id, project, git_branch, source_file, depth, name, summary, "
        "start_line, end_line, closed, started_at, ended_at, created_at, updated_at, needs_embedding) "
        "VALUES (?, ?, ?, 'main', ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, 0)",
        (
            parent,
            row.session,
            project_path(row.project),
            source,
            depth,
            name,
            row.text,
            row.line,
            end,
            when,
            when,
            now,
            now,
        ),
    )
    return int(cur.lastrowid)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def open_cached(path: Path, n: int, progress: Any = None) -> tuple[Any, dict | None]:
    """The database at path with n synthetic ideas: reused when it already holds exactly that, else built."""
    from total_recall import db as dbmod

    if path.exists():
        database = dbmod.connect(path)
        if database.get_meta("bench_synthetic_ideas") == f"{n}/{FINGERPRINT}":
            # A cache made by older code gets today's vector layout now, not during a measurement.
            dbmod.ensure_vector_tables(
                database, database.get_meta("embed_model"), int(database.get_meta("embed_dim"))
            )
            return database, None
        database.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    database = dbmod.connect(path)
    return database, build(database, n, progress=progress)
