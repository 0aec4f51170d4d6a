"""The daemon's vectors in memory: nearest neighbours without sqlite-vec's scan.

sqlite-vec has no index: every KNN reads each vector of the partition (or of the table, for a
search over every project) through its own scalar loop, ~0.7 µs a vector (BENCHMARKS.md §3: 3.7 ms
for one project's 5,000 vectors, 36 ms for 100,000). The search server holds the same int8 vectors
in memory, per table and project, and scores them with onnxruntime's MatMulInteger (already a
dependency, for the embedding model), whose int8 kernels take 0.4 ms for 5,000 vectors and 8 ms
for 100,000 on one thread. The distances are the ones sqlite-vec computes (L2 over the int8
vectors, from the dot product and each vector's squared norm), so a search ranks exactly as it
does without the cache.

Staying current: every write of a vector appends (table, key) to vector_changes in the same
transaction (db.log_vector_changes; migration 0012). Before each KNN the cache reads the log's last
sequence number (one indexed seek); when it moved, it reads the changed keys, drops their old
vectors and fetches their current ones by key. A whole-table change (key -1: a new model), a log
trimmed past the cache's position (more than db.VECTOR_CHANGES_KEPT changes): everything is loaded again,
in the background, and searches use sqlite-vec meanwhile. Loading reads every vector through
vec0 (~1 s per 100,000 vectors), so it happens on the server's own thread at start, never in a
search.

Bounded: when a table's vectors would take more than `search.vector_cache_mb` together with the
others (int8: dim bytes each), nothing is held and sqlite-vec serves every search, as at 1M ideas.
SQLite stores only; PostgreSQL has pgvector's index.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog

from total_recall.db import VECTOR_TABLES, WHOLE_TABLE, Database, table_exists

log = structlog.get_logger(__name__)

DEAD_SHARE = 0.25  # a project's block is rewritten without its dropped vectors past this share
_INT8, _INT32 = 3, 6  # ONNX TensorProto data types


# -- a one-node ONNX graph, Y[n, 1] = A[n, dim] x q[dim, 1] over int8, written as protobuf ---------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, elem_type: int, dims: tuple[int | str, ...]) -> bytes:
    shape = b"".join(_field(1, _field(2 if isinstance(d, str) else 1, d)) for d in dims)
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


def matmul_model(dim: int) -> bytes:
    """ModelProto bytes: MatMulInteger of an int8 [n, dim] matrix and an int8 [dim, 1] vector."""
    node = _field(1, "A") + _field(1, "q") + _field(2, "Y") + _field(4, "MatMulInteger")
    graph = (
        _field(1, node)
        + _field(2, "knn")
        + _field(11, _tensor("A", _INT8, ("n", dim)))
        + _field(11, _tensor("q", _INT8, (dim, 1)))
        + _field(12, _tensor("Y", _INT32, ("n", 1)))
    )
    return _field(1, 8) + _field(7, graph) + _field(8, _field(1, "") + _field(2, 13))


class _Block:
    """One project's vectors of one table: keys, int8 matrix, squared norms, live mask. Never
    changed once made (a scan on another thread may be reading it): changes make a new block."""

    __slots__ = ("keys", "matrix", "norms", "live", "dead")

    def __init__(self, keys: Any, matrix: Any, norms: Any = None, live: Any = None):
        import numpy as np

        self.keys, self.matrix = keys, matrix
        if norms is None:
            wide = matrix.astype(np.int32)
            norms = np.einsum("ij,ij->i", wide, wide).astype(np.int64)
        self.norms = norms
        self.live = np.ones(len(keys), dtype=bool) if live is None else live
        self.dead = len(keys) - int(self.live.sum())

    def without(self, gone: Any) -> _Block:
        """The same vectors with those where `gone` is true dropped: marked, or left out once
        they are more than DEAD_SHARE of the block."""
        live = self.live & ~gone
        if len(self.keys) - int(live.sum()) > DEAD_SHARE * len(self.keys):
            return _Block(self.keys[live], self.matrix[live], self.norms[live])
        return _Block(self.keys, self.matrix, self.norms, live)

    def plus(self, other: _Block) -> _Block:
        import numpy as np

        return _Block(
            np.concatenate([self.keys, other.keys]),
            np.concatenate([self.matrix, other.matrix]),
            np.concatenate([self.norms, other.norms]),
            np.concatenate([self.live, other.live]),
        )


def _blocks(rows: Any, dim: int) -> dict[str, _Block]:
    """(key, project, int8 blob) rows as one block per project ('' for rows without one)."""
    import numpy as np

    grouped: dict[str, tuple[list[int], list[bytes]]] = {}
    for k, project, blob in rows:
        keys, blobs = grouped.setdefault(project or "", ([], []))
        keys.append(int(k))
        blobs.append(bytes(blob))
    return {
        project: _Block(
            np.asarray(keys, dtype=np.int64),
            np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(keys), dim),
        )
        for project, (keys, blobs) in grouped.items()
    }


class VectorCache:
    """Every int8 vector of one SQLite store, per table and project; shared by the server's threads."""

    def __init__(self, budget_bytes: int, opener: Any):
        self.budget, self.opener = budget_bytes, opener  # opener() -> a Database of its own
        self.tables: dict[str, dict[str, _Block]] | None = None  # None: not loaded (sqlite-vec serves)
        self.seq = 0
        self.dim = 0
        self.state = "empty"  # empty | loading | ready | too large | failed
        self._lock = threading.Lock()
        self._loading = False
        self._session: Any = None

    # -- loading -----------------------------------------------------------------------------
    def load(self, db: Database) -> None:
        """Read every vector (the server's own thread, not a search); sets state."""
        started = time.perf_counter()
        try:
            seq = int(db.scalar("SELECT coalesce(max(seq), 0) FROM vector_changes", default=0))
            present = [t for t in VECTOR_TABLES if table_exists(db, t)]
            dims = set()
            for table in present:
                sql = db.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (table,)) or ""
                if "int8[" not in sql:
                    raise ValueError(f"{table} does not hold int8 vectors")
                dims.add(int(sql.split("int8[", 1)[1].split("]", 1)[0]))
            if len(dims) > 1:
                raise ValueError(f"vector tables of several dimensions: {sorted(dims)}")
            dim = dims.pop() if dims else 0
            count = sum(int(db.scalar(f"SELECT count(*) FROM {t}", default=0)) for t in present)
            if count * dim > self.budget:
                self._set(None, seq, dim, "too large")
                log.info("vector_cache_off", vectors=count, budget_mb=self.budget >> 20)
                return
            tables = {
                table: _blocks(
                    db.execute(f"SELECT {VECTOR_TABLES[table]}, project, embedding FROM {table}"), dim
                )
                for table in present
            }
            self._set(tables, seq, dim, "ready")
            log.info("vector_cache_loaded", vectors=count, seconds=round(time.perf_counter() - started, 2))
        except Exception as exc:  # a cache that cannot load leaves every search to sqlite-vec
            self._set(None, 0, 0, "failed")
            log.warning("vector_cache_failed", error=str(exc))

    def _set(self, tables: Any, seq: int, dim: int, state: str) -> None:
        """The end of a load: its result and the end of the loading, at once (a search that sees the
        new state and asks for another load must not find this one still running and be dropped)."""
        with self._lock:
            self.tables, self.seq, self.dim, self.state = tables, seq, dim, state
            self._loading = False

    def load_in_background(self) -> threading.Thread | None:
        """Load on a thread of its own with a connection of its own."""
        with self._lock:
            if self._loading:
                return None
            self._loading, self.tables, self.state = True, None, "loading"

        def run() -> None:
            db = None
            try:
                db = self.opener()
                self.load(db)
            except Exception as exc:
                self._set(None, 0, 0, "failed")
                log.warning("vector_cache_failed", error=str(exc))
            finally:
                if db is not None:
                    db.close()

        thread = threading.Thread(target=run, name="vector-cache", daemon=True)
        thread.start()
        return thread

    # -- staying current -------------------------------------------------------------------------
    def current(self, db: Database) -> bool:
        """Apply the vector changes since the last look; False when the cache cannot serve now
        (not loaded, too large, or behind by more than it catches up with: everything is then
        loaded again in the background)."""
        if self.tables is None:
            if self.state == "reloading":  # asked for while a load was ending: ask again
                self.load_in_background()
            return False
        try:
            last = int(db.scalar("SELECT coalesce(max(seq), 0) FROM vector_changes", default=0))
            if last == self.seq or self._catch_up(db, last):
                return True
            if self.state == "too large":
                return False
        except Exception as exc:  # whatever went wrong, sqlite-vec answers this search
            log.warning("vector_cache_behind", error=str(exc))
            with self._lock:
                self.tables, self.state = None, "reloading"
        self.load_in_background()
        return False

    def _catch_up(self, db: Database, last: int) -> bool:
        with self._lock:
            if self.tables is None:
                return False
            if last == self.seq:
                return True
            first = int(db.scalar("SELECT coalesce(min(seq), 0) FROM vector_changes", default=0))
            changes = db.all(
                "SELECT vec_table, key FROM vector_changes WHERE seq > ? AND seq <= ?", (self.seq, last)
            )
            if (
                last < self.seq
                or not self.dim  # loaded before there was any vector table
                or first > self.seq + 1
                or any(int(r[1]) == WHOLE_TABLE for r in changes)
            ):
                self.tables, self.state = None, "reloading"
                return False
            by_table: dict[str, set[int]] = {}
            for r in changes:
                by_table.setdefault(r[0], set()).add(int(r[1]))
            for table, keys in by_table.items():
                self._apply(db, table, keys)
            self.seq = last
            held = sum(len(b.keys) for blocks in (self.tables or {}).values() for b in blocks.values())
            if held * self.dim > self.budget:  # the store grew past the budget: let sqlite-vec serve
                self.tables, self.state = None, "too large"
                log.info("vector_cache_off", vectors=held, budget_mb=self.budget >> 20)
                return False
            return True

    def _apply(self, db: Database, table: str, keys: set[int]) -> None:
        """Drop these keys' vectors and add their current ones (copy-on-write: a scan running on
        another thread keeps the blocks it started with)."""
        import numpy as np

        if self.tables is None or table not in VECTOR_TABLES:
            return
        blocks = dict(self.tables.get(table, {}))
        wanted = np.fromiter(keys, dtype=np.int64, count=len(keys))
        for project, block in list(blocks.items()):
            gone = np.isin(block.keys, wanted) & block.live
            if gone.any():
                blocks[project] = block.without(gone)
        if table_exists(db, table):
            key = VECTOR_TABLES[table]
            marks = ",".join("?" * len(keys))
            rows = db.execute(
                f"SELECT {key}, project, embedding FROM {table} WHERE {key} IN ({marks})", tuple(keys)
            )
            for project, new in _blocks(rows, self.dim).items():
                blocks[project] = blocks[project].plus(new) if project in blocks else new
        self.tables = {**self.tables, table: {p: b for p, b in blocks.items() if len(b.keys)}}

    # -- nearest neighbours ----------------------------------------------------------------------
    def knn(self, table: str, q8: bytes, k: int, project: str | None) -> list[tuple[int, float]] | None:
        """(key, L2 distance between int8 vectors) of the k nearest, nearest first, as sqlite-vec's
        KNN gives them; None when the cache does not hold this table."""
        import numpy as np

        tables = self.tables
        if tables is None or table not in tables or len(q8) != self.dim:
            return None
        blocks = tables[table]
        chosen = list(blocks.values()) if project is None else [blocks[project]] if project in blocks else []
        q = np.frombuffer(q8, dtype=np.int8)
        qcol = q.reshape(self.dim, 1)
        qnorm = int(np.dot(q.astype(np.int64), q.astype(np.int64)))
        session = self._scorer()
        found: list[tuple[float, int]] = []
        for block in chosen:
            dots = session.run(None, {"A": block.matrix, "q": qcol})[0][:, 0].astype(np.int64)
            d2 = block.norms + qnorm - 2 * dots
            if block.dead:
                d2 = np.where(block.live, d2, np.iinfo(np.int64).max)
                n = min(k, int(block.live.sum()))
            else:
                n = min(k, len(d2))
            if n <= 0:
                continue
            top = np.argpartition(d2, n - 1)[:n] if n < len(d2) else np.arange(len(d2))
            found += [(float(d2[i]), int(block.keys[i])) for i in top]
        found.sort()
        return [(key, d2**0.5) for d2, key in found[:k]]

    def _scorer(self) -> Any:
        if self._session is None:
            from total_recall.embed import import_onnxruntime

            ort = import_onnxruntime()
            options = ort.SessionOptions()
            # One thread: the search server's two threads already scan two tables at once.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(
                matmul_model(self.dim), options, providers=["CPUExecutionProvider"]
            )
        return self._session


def for_db(db: Database) -> VectorCache | None:
    """The cache a connection of the search server carries; none for any other connection (the
    indexer's duplicate checks read their own uncommitted vectors, which the cache must never
    take in) and none inside a transaction."""
    cache = getattr(db, "vectors_in_memory", None)
    if cache is None or db.dialect == "postgres" or db.in_transaction:
        return None
    return cache
