"""Vectors: the one owner of embedding rows and of the vec0 tables.

Embedding pending ideas, spans and chunks (the repair pass), storing and deleting their vectors,
nearest-neighbour queries, and rebuilding everything for a new model (`reembed`). Vectors are
derived data: a row that has none keeps needs_embedding = 1 and is found by BM25 meanwhile.
"""

from __future__ import annotations

import re
import time
from typing import Any

import structlog

from total_recall import config, vector_cache
from total_recall.db import Database, float_blob, int8_blob, int8_distance, log_vector_changes, table_exists
from total_recall.errors import EmbeddingError, TransientError

log = structlog.get_logger(__name__)

VECTOR_RETRY_SECONDS = 15.0
REFRESH_SLICE = 256  # chunks embedded again per heartbeat after a recipe change (a few seconds)
# owner table -> (vec0 table, key column)
TABLES = {
    "ideas": ("idea_embeddings", "idea_id"),
    "spans": ("span_embeddings", "span_id"),
    "messages": ("message_embeddings", "message_id"),
    "chunks": ("chunk_embeddings", "chunk_id"),
}
OWNER_OF = {table: owner for owner, (table, _) in TABLES.items()}
# What the repair pass embeds, per owner: the text columns (chunks also read their context).
PENDING = (
    ("ideas", "content"),
    ("spans", "name || '. ' || summary AS content"),
    ("chunks", "content, context, seq"),
)

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def embed_text(unit: dict) -> str:
    """What a chunk's vector is made from: its words without the names a speaker addresses
    ("Thanks, Sam!") and, in a line's first window (where a turn opens), without a speaker tag
    ("Melanie: ..."). Either would make a line match every question about that person, whatever it
    says; BM25 still searches both. Only a turn's start can hold a speaker: inside a reply
    "Caching: ..." is a list item. The turn before is not part of it: prefixing it to short replies
    moved recall by 0.00-0.01 on the tune split and cost a quarter of the chunks' embedding time
    (BM25 searches it)."""
    from total_recall.extract.offline import speaker_tag, strip_vocative

    text = unit["content"] if unit.get("seq") else speaker_tag(unit["content"])[1]
    return " ".join(strip_vocative(s) for s in SENTENCE_END.split(text) if s.strip())


# -- rows ------------------------------------------------------------------------------------
def store(db: Database, table: str, key: str, rows: list[tuple[int, str, bytes]]) -> None:
    """Replace the vectors of (id, project, float32 blob) rows and clear their needs_embedding
    mark. SQLite keeps them as int8 (db.int8_blob), PostgreSQL as pgvector's float vectors."""
    owner = OWNER_OF[table]
    postgres = db.dialect == "postgres"
    for object_id, project, blob in rows:
        db.execute(f"DELETE FROM {table} WHERE {key} = ?", (object_id,))
        value = "?::vector" if postgres else "vec_int8(?)"
        db.execute(
            f"INSERT INTO {table} ({key}, project, embedding) VALUES (?, ?, {value})",
            (object_id, project or "", _pg_vector(blob) if postgres else int8_blob(blob)),
        )
        db.execute(f"UPDATE {owner} SET needs_embedding = 0 WHERE id = ?", (object_id,))
    log_vector_changes(db, table, [object_id for object_id, _, _ in rows])


def _pg_vector(blob: bytes) -> str:
    from total_recall import pg

    return pg.vector_text(blob)


def delete(db: Database, owner: str, ids: list[int]) -> None:
    """Drop the vectors of these ideas/spans/messages/chunks (no-op before the tables exist)."""
    table, key = TABLES[owner]
    if ids and table_exists(db, table):
        db.executemany(f"DELETE FROM {table} WHERE {key} = ?", [(i,) for i in ids])
        log_vector_changes(db, table, list(ids))


def vectors_of(db: Database, owner: str, ids: list[int]) -> dict[int, bytes]:
    """The stored vectors (little-endian float32 blobs) of these ideas/spans/chunks, by id."""
    table, key = TABLES[owner]
    if not ids or not table_exists(db, table):
        return {}
    out: dict[int, bytes] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        if db.dialect == "postgres":
            from total_recall import pg

            for row in db.execute(
                f"SELECT {key}, embedding::text FROM {table} WHERE {key} IN ({marks})", part
            ):
                out[int(row[0])] = pg.vector_blob(row[1])
            continue
        for row in db.execute(f"SELECT {key}, embedding FROM {table} WHERE {key} IN ({marks})", part):
            out[int(row[0])] = float_blob(bytes(row[1]))
    return out


def knn(
    db: Database, table: str, key: str, blob: bytes, k: int, project: str | None = None
) -> list[tuple[int, float]]:
    """(id, L2 distance) of the k nearest vectors to a float32 blob, nearest first; within one
    project partition when project is given ('' is the partition of rows without a project).
    Distances are in the units of float vectors on both stores (SQLite's int8 ones are converted)."""
    if db.dialect == "postgres":  # pgvector: L2 distance (<->) ordered by the HNSW index
        where, params = ("WHERE project = ? ", (project,)) if project is not None else ("", ())
        sql = (
            f"SELECT {key} AS id, embedding <-> ?::vector AS distance FROM {table} {where}"
            "ORDER BY distance LIMIT ?"
        )
        return [(int(r["id"]), float(r["distance"])) for r in db.execute(sql, (_pg_vector(blob), *params, k))]
    unit = int8_distance(1.0, len(blob) // 4)
    cache = vector_cache.for_db(db)
    if cache is not None and cache.current(db):
        hits = cache.knn(table, int8_blob(blob), k, project)
        if hits is not None:
            return [(i, d * unit) for i, d in hits]
    sql = f"SELECT {key} AS id, distance FROM {table} WHERE embedding MATCH vec_int8(?) AND k = ?"
    params: tuple = (int8_blob(blob), k)
    if project is not None:
        sql, params = sql + " AND project = ?", params + (project,)
    return [(int(i), float(d) * unit) for i, d in db.execute(sql, params)]


def similar_topics(db: Database, blob: bytes, other_than_session: str, limit: int = 3, k: int = 20) -> list:
    """Top-level topics of other sessions nearest to a vector (among its k nearest spans): name,
    summary, session_id."""
    near = [i for i, _ in knn(db, "span_embeddings", "span_id", blob, k)]
    if not near:
        return []
    rows = {
        r["id"]: r
        for r in db.all(
            f"SELECT id, name, summary, session_id FROM spans WHERE id IN ({','.join('?' * len(near))}) "
            "AND depth = 1 AND session_id != ?",
            (*near, other_than_session),
        )
    }
    return [rows[i] for i in near if i in rows][:limit]


def similar_ideas(
    db: Database, blob: bytes, project: str, k: int = 10, max_distance: float | None = None
) -> list:
    """The k ideas of a project nearest to a vector, nearest first: id, intent, content; only
    those within `max_distance` (L2, float units) when it is given."""
    near = [
        i
        for i, distance in knn(db, "idea_embeddings", "idea_id", blob, k, project)
        if max_distance is None or distance <= max_distance
    ]
    if not near:
        return []
    rows = {
        r["id"]: r
        for r in db.all(
            f"SELECT id, intent, content FROM ideas WHERE id IN ({','.join('?' * len(near))})", near
        )
    }
    return [rows[i] for i in near if i in rows]


# -- the service -----------------------------------------------------------------------------
class Vectors:
    """The embedder of one process and whether vectors can be written now.

    Shared by the indexer, the daemon's heartbeat, maintenance and edits, so each asks the same
    question the same way and the model is loaded once.
    """

    def __init__(self, db: Database, settings: config.Settings, *, embedder: Any = None, clock=time.time):
        self.db = db
        self.settings = settings
        self.clock = clock
        self._embedder = embedder
        self._ok: bool | None = None
        self._retry_at = 0.0

    @property
    def embedder(self):
        if self._embedder is None:
            from total_recall.embed import get_embedder

            self._embedder = get_embedder(self.settings)
        if not hasattr(self._embedder, "inner"):
            from total_recall.embed import CachedEmbedder

            self._embedder = CachedEmbedder(self._embedder)
        return self._embedder

    def known_ok(self) -> bool | None:
        """The last answer of ok() without asking again (None: not decided yet)."""
        return self._ok

    def ok(self) -> bool:
        """Whether vectors can be written now (sqlite-vec loaded, model matches the database)."""
        if self._ok is None and self.clock() >= self._retry_at:
            from total_recall import db as dbmod

            try:
                self._ok = self.db.has_vec and dbmod.ensure_vector_tables(
                    self.db, self.embedder.model_id, self.embedder.dim
                )
            except (EmbeddingError, TransientError) as exc:
                # Trigger: the embedding backend cannot start (e.g. the endpoint is down while
                # its dimension is probed). Why: indexing must go on, and the outage may end.
                # Outcome: memories keep needs_embedding = 1; we ask again in a minute.
                log.warning("embedder_unavailable", error=str(exc))
                self._retry_at = self.clock() + VECTOR_RETRY_SECONDS
                return False
        return bool(self._ok)

    def embed_pending(self, limit: int = 512) -> int:
        """The repair pass: give vectors to every idea, span and chunk still marked needs_embedding.

        Trigger: after each batch and on the daemon's heartbeat. Why: embedding may have failed or
        been skipped; search should not wait for a person. Outcome: vectors written in small
        transactions; on failure the marks stay and the next pass tries again.
        """
        if not self.ok():
            return 0
        done = 0
        for owner, text_sql in PENDING:
            while True:
                rows = self._pending_rows(owner, text_sql, limit)
                if not rows:
                    break
                if not self._embed_rows(owner, rows):
                    return done
                done += len(rows)
                if len(rows) < limit:
                    break
        return done

    def _pending_rows(self, owner: str, text_sql: str, limit: int) -> list:
        only = " AND depth > 0" if owner == "spans" else ""
        return self.db.execute(
            f"SELECT id, project, {text_sql} FROM {owner} WHERE needs_embedding = 1{only} ORDER BY id LIMIT "
            "?",
            (limit,),
        ).fetchall()

    def _embed_rows(self, owner: str, rows: list) -> bool:
        from total_recall.embed import to_blob

        table, key = TABLES[owner]
        texts = [embed_text(dict(r)) if owner == "chunks" else r["content"] for r in rows]
        try:
            vectors = self.embedder.embed(texts)
        except (EmbeddingError, TransientError) as exc:
            log.warning("embedding_failed", table=table, count=len(rows), error=str(exc))
            return False
        with self.db.write():
            store(self.db, table, key, [(r["id"], r["project"], to_blob(v)) for r, v in zip(rows, vectors)])
        return True

    def refresh_stale(self, limit: int = REFRESH_SLICE) -> int:
        """Embed again, `limit` at a time, the chunks whose vectors an older recipe made.

        Trigger: the store's `embed_version` is below db.EMBED_VERSION (indexed before an upgrade
        changed embed_text); the daemon's heartbeat asks for one slice, `reembed` for all. Why: a
        vector is derived data, and an old one ranks its line as the old code would, however the
        search improved. Outcome: each slice is stored with the cursor (`embed_refresh_after`) in
        one transaction, old vectors serve searches until replaced, and the version is raised when
        the last slice is done; on an embedding failure the cursor stays and the next pass resumes.
        """
        from total_recall.embed import to_blob

        if not self.ok() or not stale(self.db):
            return 0
        after = int(self.db.get_meta("embed_refresh_after") or 0)
        rows = self.db.all(
            "SELECT id, project, content, context, seq FROM chunks WHERE id > ? AND needs_embedding = 0 "
            "ORDER BY id LIMIT ?",
            (after, limit),
        )
        have = vectors_of(self.db, "chunks", [r["id"] for r in rows])
        old = [r for r in rows if r["id"] in have]  # a tool line's chunk never had one
        try:
            made = self.embedder.embed([embed_text(dict(r)) for r in old]) if old else []
        except (EmbeddingError, TransientError) as exc:
            log.warning("embedding_failed", table="chunk_embeddings", count=len(old), error=str(exc))
            return 0
        with self.db.write():
            # Only rows that are still as they were read: a chunk forgotten or rewritten while this
            # slice was embedded keeps no vector of its old words.
            current = _contents(self.db, [r["id"] for r in old])
            keep = [
                (r["id"], r["project"], to_blob(v))
                for r, v in zip(old, made)
                if current.get(r["id"]) == r["content"]
            ]
            if keep:
                store(self.db, "chunk_embeddings", "chunk_id", keep)
            if len(rows) < limit:
                from total_recall.db import EMBED_VERSION

                self.db.set_meta("embed_version", EMBED_VERSION)
                self.db.execute("DELETE FROM meta WHERE key = 'embed_refresh_after'")
            else:
                self.db.set_meta("embed_refresh_after", rows[-1]["id"])
        log.info("vectors_refreshed", chunks=len(keep), done=len(rows) < limit)
        return len(keep)

    def embed_idea(self, idea_id: int) -> bool:
        """Give one memory its vector now (an edit), so vector search finds it before any heartbeat.

        Trigger: `edit` changed the text (the old vector is gone). Why: until the daemon's repair
        pass the memory is found by keywords only. Outcome: True when the vector is stored; on any
        embedding failure it keeps needs_embedding = 1 and the repair pass retries.
        """
        from total_recall.errors import TotalRecallError

        row = self.db.one("SELECT content, project FROM ideas WHERE id = ?", (idea_id,))
        try:
            if row is None or not self.ok():
                return False
            from total_recall.embed import to_blob

            vector = self.embedder.embed([row["content"]])[0]
        except (EmbeddingError, TransientError, TotalRecallError) as exc:
            log.warning("edit_embedding_failed", idea=idea_id, error=str(exc))
            return False
        with self.db.write():
            store(self.db, "idea_embeddings", "idea_id", [(idea_id, row["project"], to_blob(vector))])
        return True


def reembed(db: Database, settings: config.Settings) -> dict:
    """Rebuild vectors with the configured model; safe to interrupt and run again."""
    from total_recall import db as dbmod
    from total_recall.embed import get_embedder

    embedder = get_embedder(settings)
    recorded = db.get_meta("embed_model")
    dropped = recorded is not None and (recorded != embedder.model_id or db.get_meta("embed_model_mismatch"))
    if dropped:
        dbmod.drop_vector_tables(db)
    worker = Vectors(db, settings, embedder=embedder)
    count = worker.embed_pending()
    refreshed = 0
    while stale(db):
        cursor = db.get_meta("embed_refresh_after")
        refreshed += worker.refresh_stale()
        if stale(db) and db.get_meta("embed_refresh_after") == cursor:
            break  # the slice failed (the embedder is down): the cursor stayed, the daemon resumes
    return {
        "model": embedder.model_id,
        "dim": embedder.dim,
        "dropped_old_vectors": bool(dropped),
        "embedded": count,
        "refreshed": refreshed,
    }


def _contents(db: Database, ids: list[int]) -> dict[int, str]:
    """The current text of these chunks, by id (a forgotten one is missing)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {
        r["id"]: r["content"] for r in db.all(f"SELECT id, content FROM chunks WHERE id IN ({marks})", ids)
    }


def refresh_left(db: Database) -> int | None:
    """How many chunks an older recipe's vectors may still cover (None: every vector is current);
    `doctor` shows it while the daemon refreshes them."""
    if not stale(db):
        return None
    after = int(db.get_meta("embed_refresh_after") or 0)
    left = db.scalar("SELECT count(*) FROM chunks WHERE id > ? AND needs_embedding = 0", (after,), default=0)
    return int(left)


def stale(db: Database) -> bool:
    """Whether chunk vectors made by an older recipe remain (Vectors.refresh_stale)."""
    from total_recall.db import EMBED_VERSION

    version = db.get_meta("embed_version")
    return version is not None and int(version) < EMBED_VERSION
