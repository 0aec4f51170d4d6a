"""The one place that opens SQLite: driver choice, settings, migrations, vector tables.

Driver chain (DESIGN.md, "Loading sqlite-vec"): stdlib sqlite3 when it can load extensions,
else sqlean-py, else pysqlite3; each candidate must pass a vec0 KNN and FTS5 smoke test. When
none can load sqlite-vec the database still opens (stdlib) and search runs on FTS5 alone.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, transactions
from total_recall.errors import MigrationError, SchemaError

log = structlog.get_logger(__name__)

DRIVERS = {"stdlib": "sqlite3", "sqlean": "sqlean", "pysqlite3": "pysqlite3.dbapi2"}
VEC_FIX_HINT = (
    "vector search is off: install sqlean-py (pip install sqlean-py) or use a Python whose "
    "sqlite3 can load extensions; keyword search (FTS5) still works"
)
MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass
class Database:
    conn: Any
    dbapi: Any  # the DB-API module that made conn: catch dbapi.Error, not sqlite3.Error
    path: Path
    driver: str
    vec_version: str | None = None
    vec_error: str | None = None
    _depth: int = field(default=0, repr=False)  # write() blocks open on this connection
    dialect: str = "sqlite"  # pg.PgDatabase says "postgres"; the storage owners branch on it
    # The search server's connections only: the store's vectors in memory (vector_cache.py).
    vectors_in_memory: Any = field(default=None, repr=False)

    def lock(self, *parts: Any, shared: bool = False) -> None:
        """Serialise writers of one key until the transaction ends (``shared``: with each other, only
        against an exclusive holder): BEGIN IMMEDIATE already holds SQLite's single writer lock, so
        there is nothing more to take (pg.PgDatabase.lock)."""

    @property
    def has_vec(self) -> bool:
        return self.vec_version is not None

    @property
    def in_transaction(self) -> bool:
        return bool(self.conn.in_transaction)

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> Any:
        return self.conn.executemany(sql, rows)

    def one(self, sql: str, params: Any = ()) -> Any:
        """The first row (a sqlite3.Row: by name, row["id"]) or None."""
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: Any = ()) -> list:
        """Every row, as sqlite3.Row (read by column name)."""
        return self.conn.execute(sql, params).fetchall()

    def column(self, sql: str, params: Any = ()) -> list:
        """The first column of every row (ids, paths, names)."""
        return [row[0] for row in self.conn.execute(sql, params)]

    def scalar(self, sql: str, params: Any = (), default: Any = None) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return default if row is None or row[0] is None else row[0]

    @contextlib.contextmanager
    def write(self, *, commit: bool = True) -> Iterator[Database]:
        """The one way to write (DESIGN.md "Transactions"): BEGIN IMMEDIATE ... COMMIT, rolled back
        on any exception, or at the end when commit=False (a dry run).

        Inside another write() block it is a SAVEPOINT instead: an exception undoes only its own
        changes (and propagates), and what it did commits or rolls back with the outer block. So
        a function that writes opens write() whether or not its caller already has.
        """
        if self.in_transaction:
            yield from transactions.savepoint(self, commit)
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            self._depth = 0

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        return self.scalar("SELECT value FROM meta WHERE key = ?", (key,), default)

    def set_meta(self, key: str, value: Any) -> None:
        self.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def _load_vec(conn: Any, dbapi: Any) -> str:
    """Load sqlite-vec and prove it works (vec0 KNN and FTS5); return its version."""
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)
    version = conn.execute("SELECT vec_version()").fetchone()[0]
    conn.execute("CREATE VIRTUAL TABLE temp._tr_probe USING vec0(e float[2])")
    conn.execute("INSERT INTO temp._tr_probe (rowid, e) VALUES (1, '[1, 0]')")
    conn.execute("SELECT rowid FROM temp._tr_probe WHERE e MATCH '[1, 0]' AND k = 1").fetchall()
    conn.execute("DROP TABLE temp._tr_probe")
    return version


_DRIVER_CHOICE: dict[str, tuple[str, Any, str | None, str | None]] = {}
_DRIVER_LOCK = threading.Lock()


def choose_driver(forced: str = "") -> tuple[str, Any, str | None, str | None]:
    """(name, dbapi module, sqlite-vec version, error), probed once per process on ":memory:".

    The probe never touches the real file: opening and closing it with a driver we then reject
    would drop this process's POSIX locks on it, and another process's close could then
    checkpoint and delete the live WAL under us.
    """
    with _DRIVER_LOCK:
        if forced not in _DRIVER_CHOICE:
            _DRIVER_CHOICE[forced] = _probe_drivers(forced)
        return _DRIVER_CHOICE[forced]


def _probe_drivers(forced: str) -> tuple[str, Any, str | None, str | None]:
    names = [forced] if forced else list(DRIVERS)
    errors: list[str] = []
    for name in names:
        if name not in DRIVERS:
            raise SchemaError(f"unknown SQLite driver {name!r}; use one of {', '.join(DRIVERS)}")
        try:
            dbapi = importlib.import_module(DRIVERS[name])
        except ImportError as exc:
            errors.append(f"{name}: not installed ({exc})")
            continue
        conn = dbapi.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            if not hasattr(conn, "enable_load_extension"):
                errors.append(f"{name}: built without loadable extensions")
                continue
            return name, dbapi, _load_vec(conn, dbapi), None
        except (AttributeError, ImportError, dbapi.Error) as exc:
            errors.append(f"{name}: {exc}")
        finally:
            conn.close()
    # Trigger: no driver could load sqlite-vec. Why: memory must keep working without vectors.
    # Outcome: stdlib connections, FTS5-only search, doctor/stats show the fix.
    return "stdlib", sqlite3, None, "; ".join(errors) or "sqlite-vec unavailable"


def _open_raw(path: Path, busy_timeout: float, driver: str) -> Database:
    name, dbapi, version, error = choose_driver(driver)
    conn = dbapi.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    conn.row_factory = dbapi.Row  # rows are read by column name (row["project"]), never by position
    if version is not None:
        try:
            _load_vec(conn, dbapi)
        except (AttributeError, ImportError, dbapi.Error) as exc:  # worked on the probe; report, don't fail
            version, error = None, f"{name}: {exc}"
    return Database(conn, dbapi, path, name, vec_version=version, vec_error=error)


MMAP_SIZE = 268435456  # 256 MB; see _configure


def _configure(db: Database, busy_timeout: float, mmap_size: int = MMAP_SIZE) -> None:
    conn = db.conn
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        log.warning("wal_unavailable", journal_mode=mode, path=str(db.path))
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted rows are overwritten with zeros, so a forgotten memory leaves no bytes in free pages.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    # Reads of the first 256 MB go through a memory map (no copy into SQLite's page cache). The
    # mapped pages count in the process's RSS; at 1 GB a 1M-idea database kept the daemon's
    # VmRSS over 600 MB while it served searches (BENCHMARKS.md §3, "1M ideas").
    conn.execute(f"PRAGMA mmap_size = {int(mmap_size)}")


def create_private_file(path: Path) -> None:
    """Create (or tighten) a file readable by the user only.

    An existing file is never opened here: closing any descriptor of the database file drops
    every POSIX lock this process holds on it (SQLite's included), after which another process
    may checkpoint and delete the live WAL. chmod works on the path without opening it.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.close(fd)
    except FileExistsError:
        pass
    os.chmod(path, 0o600)


def connect(
    path: Path | None = None,
    *,
    settings: config.Settings | None = None,
    migrate_to_head: bool = True,
    migrations_dir: Path | None = None,
    mapped: bool = True,
) -> Database:
    """Open (creating if needed) the memory database with every setting applied.

    mapped=False reads without a memory map: the search socket's pooled connections, because the
    pages each map holds count again in the daemon's RSS (2.2 GB VmRSS at 1M ideas with four).
    """
    settings = settings or config.load()
    if path is None:
        config.ensure_home()
        path = config.paths().db
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    create_private_file(path)
    busy = settings.db.busy_timeout
    db = _open_raw(path, busy, settings.db.driver or os.environ.get("TOTAL_RECALL_DB_DRIVER", ""))
    try:
        _configure(db, busy, MMAP_SIZE if mapped else 0)
        if migrate_to_head:
            migrate(db, migrations_dir)
    except BaseException:
        db.close()
        raise
    return db


def open_store(settings: config.Settings | None = None) -> Any:
    """The memory store of this setup: the PostgreSQL store `[store] url` names, else memory.db.

    The work queue is always the local SQLite file (`connect`): hooks never wait on a network.
    """
    settings = settings or config.load()
    url = settings.store.url.strip()
    if not url:
        return connect(settings=settings)
    from total_recall import pg

    if not pg.is_url(url):
        raise SchemaError(
            "[store] url must be empty (SQLite) or start with postgresql://, "
            f"not {config.without_password(url)!r}"
        )
    return pg.connect(url)


def memory_store_for(settings: config.Settings, local: Database) -> Any:
    """The memory store a worker next to the local queue file uses: `local` itself, or the
    PostgreSQL store [store] url names, connected (and migrated) on first use and again after an
    outage, so a server that is down leaves queue items pending instead of stopping the worker."""
    url = settings.store.url.strip()
    if not url:
        return local
    from total_recall import pg

    return pg.connect(url, lazy=True)


def migration_files(migrations_dir: Path | None = None) -> list[tuple[int, Path]]:
    folder = migrations_dir or config.resource_dir("migrations")
    found = []
    for p in sorted(folder.glob("*.sql")):
        m = MIGRATION_NAME.match(p.name)
        if not m:
            raise SchemaError(f"migration file {p.name} does not match NNNN_slug.sql")
        found.append((int(m.group(1)), p))
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        raise SchemaError(f"migration numbers must be 1..N without gaps, found {numbers}")
    return found


def _statements(script: str) -> list[str]:
    """Split a SQL script into complete statements (trigger bodies stay whole)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in buf.splitlines()
    ):
        raise SchemaError(f"incomplete SQL statement at end of migration: {buf.strip()[:80]!r}")
    return out


def schema_version(db: Database) -> int:
    return int(db.scalar("PRAGMA user_version", default=0))


def migrate(db: Database, migrations_dir: Path | None = None) -> int:
    """Apply pending migrations, each in one transaction with its user_version."""
    files = migration_files(migrations_dir)
    head = len(files)
    current = schema_version(db)
    if current > head:
        raise SchemaError(
            f"{db.path} has schema version {current}, newer than this total-recall knows "
            f"({head}); upgrade total-recall (pip install -U total-recall)"
        )
    for number, path in files[current:]:
        statements = _statements(path.read_text(encoding="utf-8"))
        # Foreign keys are off while a migration runs (the pragma is a no-op inside a transaction):
        # a migration that rebuilds a table (0009) drops the old one, which with them on would
        # delete every row that references it. foreign_key_check stands in for them: a migration
        # may not add a broken reference (one already there, from whatever made it, is not its own).
        db.conn.execute("PRAGMA foreign_keys = OFF")
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            broken = len(db.conn.execute("PRAGMA foreign_key_check").fetchall())
            for stmt in statements:
                db.conn.execute(stmt)
            added = len(db.conn.execute("PRAGMA foreign_key_check").fetchall()) - broken
            if added > 0:
                raise MigrationError(f"migration {path.name} left {added} broken references; rolled back")
            db.conn.execute(f"PRAGMA user_version = {number}")
        except (db.dbapi.Error, MigrationError) as exc:
            db.conn.execute("ROLLBACK")
            db.conn.execute("PRAGMA foreign_keys = ON")
            if isinstance(exc, MigrationError):
                raise
            raise MigrationError(f"migration {path.name} failed and was rolled back: {exc}") from None
        db.conn.execute("COMMIT")
        db.conn.execute("PRAGMA foreign_keys = ON")
        log.info("migrated", version=number, file=path.name)
    return head


# The vec0 tables, their key column, and how many vectors each chunk of a partition holds.
VECTOR_TABLES = {"idea_embeddings": "idea_id", "span_embeddings": "span_id", "chunk_embeddings": "chunk_id"}
# The recipe of the stored vectors (meta `embed_version`): what a chunk's vector is made from
# (vectors.embed_text). Bump it when that changes: a store whose chunks were embedded by an older
# recipe has them embedded again in the background, a slice per heartbeat (vectors.refresh_stale),
# so what was indexed before an upgrade is searched as what is indexed after it.
# 1: the line's words as said; 2: without the names it addresses and a turn's speaker tag (I88, I90).
EMBED_VERSION = 2
# vec0 allocates whole chunks per partition (project); its default of 1,024 slots (1.5 MB at 384
# dimensions) made most of a small project's file empty slots. Measured on 100k vectors in 20
# projects (BENCHMARKS.md §5): 128 costs ~5% on a KNN over every project, nothing measurable on
# one project, and inserts run ~10x faster; spans are ~10x fewer than ideas, hence 64.
CHUNK_SIZES = {"idea_embeddings": 128, "span_embeddings": 64, "chunk_embeddings": 128}
# Vectors are stored as int8 (a quarter of float32's bytes; they were half the file). A unit
# vector's components are spread around 1/sqrt(dim); INT8_SPREAD of those spreads map to +-127
# and the rare component beyond is clipped. MiniLM's largest component over the ~11.6k vectors of
# bench/recall.py's four sets is 0.27 (the scale at 384 dimensions is 0.31); every confirm-split
# figure of bench/recall.py is the same as with float32. Changing INT8_SPREAD needs `reembed`.
INT8_SPREAD = 6.0


def int8_scale(dim: int) -> float:
    """The float that int8 127 stands for, for unit vectors of this dimension."""
    return min(1.0, INT8_SPREAD / math.sqrt(dim)) if dim > 0 else 1.0


def int8_blob(blob: bytes) -> bytes:
    """A float32 vector blob as the int8 blob the vec0 tables store (and KNN queries take)."""
    import numpy as np

    vec = np.frombuffer(blob, dtype="<f4")
    scale = int8_scale(len(vec))
    return np.clip(np.rint(vec * (127.0 / scale)), -127, 127).astype(np.int8).tobytes()


def float_blob(blob: bytes) -> bytes:
    """The inverse of int8_blob (to within half a step): a float32 blob of a stored vector."""
    import numpy as np

    vec = np.frombuffer(blob, dtype=np.int8).astype("<f4")
    return (vec * (int8_scale(len(vec)) / 127.0)).astype("<f4").tobytes()


def int8_distance(distance: float, dim: int) -> float:
    """A vec0 L2 distance between int8 vectors in the units of the float vectors they stand for."""
    return distance * int8_scale(dim) / 127.0


def _vec_sql(table: str, key: str, dim: int) -> str:
    return (
        f"CREATE VIRTUAL TABLE {table} USING vec0({key} INTEGER PRIMARY KEY, project TEXT PARTITION KEY, "
        f"embedding int8[{dim}], chunk_size={CHUNK_SIZES[table]})"
    )


def _create_or_rebuild_vec(db: Database, table: str, key: str, dim: int) -> None:
    """Create the vec0 table; rebuild one of another layout, keeping its vectors.

    Trigger: a database whose vector tables predate CHUNK_SIZES (vec0's 1,024-slot chunks), used
    other sizes, or stored float32 vectors. Why: their empty slots and float32 vectors were most
    of the file. Outcome: the vectors are copied out (a temp table), the table re-created with
    the layout above and refilled (float32 vectors quantised to int8), in the caller's
    transaction; the freed pages are reused (and returned to the disk by `vacuum`). vec0 cannot
    be renamed, hence the copy.
    """
    current = db.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
    wanted = _vec_sql(table, key, dim)
    if current is None:
        db.execute(wanted)
        return
    if current.replace(" ", "") == wanted.replace(" ", ""):
        return
    was_float = "float[" in current
    db.execute(
        f"CREATE TEMP TABLE _tr_vec_copy AS SELECT {key} AS k, project AS p, embedding AS e FROM {table}"
    )
    db.execute(f"DROP TABLE {table}")
    db.execute(wanted)
    insert = f"INSERT INTO {table} ({key}, project, embedding) VALUES (?, ?, vec_int8(?))"
    last = -1
    while True:  # in slices: a large store's vectors are not all held in memory at once
        rows = db.all("SELECT k, p, e FROM temp._tr_vec_copy WHERE k > ? ORDER BY k LIMIT 5000", (last,))
        if not rows:
            break
        db.executemany(
            insert, [(r["k"], r["p"], int8_blob(r["e"]) if was_float else bytes(r["e"])) for r in rows]
        )
        last = rows[-1]["k"]
    db.execute("DROP TABLE temp._tr_vec_copy")
    log_vector_changes(db, table, [WHOLE_TABLE])
    log.info("vector_table_rebuilt", table=table, chunk_size=CHUNK_SIZES[table], int8_from_float=was_float)


# vector_changes keeps this many of its newest rows (migration 0012): the daemon's vectors in memory
# (vector_cache.py) catch up from them; further behind, reading every vector again costs less.
VECTOR_CHANGES_KEPT = 5_000
WHOLE_TABLE = -1  # the key of a change to every vector of a table (dropped, rebuilt)


def log_vector_changes(db: Database, table: str, keys: list[int]) -> None:
    """Record in vector_changes that these vectors changed (WHOLE_TABLE: all of them), in the
    caller's transaction, and keep only the newest VECTOR_CHANGES_KEPT rows. SQLite only:
    PostgreSQL keeps no vectors in memory (pgvector's index serves every search)."""
    if db.dialect == "postgres" or not keys or not table_exists(db, "vector_changes"):
        return
    db.executemany("INSERT INTO vector_changes (vec_table, key) VALUES (?, ?)", [(table, k) for k in keys])
    db.execute(
        "DELETE FROM vector_changes WHERE seq <= (SELECT max(seq) FROM vector_changes) - ?",
        (VECTOR_CHANGES_KEPT,),
    )


def vacuum_if_sparse(db: Database, share: float = 0.25) -> bool:
    """VACUUM when free pages are at least `share` of the file (after a vector-table rebuild).

    Trigger: many free pages. Why: free pages are reused, but the file keeps its size until
    vacuumed. Outcome: VACUUM, or nothing when another connection is busy (logged, retried at the
    next start); never inside a transaction.
    """
    pages = int(db.scalar("PRAGMA page_count", default=0))
    free = int(db.scalar("PRAGMA freelist_count", default=0))
    if db.in_transaction or pages == 0 or free < share * pages:
        return False
    try:
        db.execute("VACUUM")
    except db.dbapi.Error as exc:
        log.warning("vacuum_skipped", error=str(exc), free_pages=free, pages=pages)
        return False
    return True


def ensure_vector_tables(db: Database, model: str, dim: int) -> bool:
    """Create the vec0 tables for this model's dimension; report whether vectors are usable.

    A model or dimension different from the one recorded in meta is flagged
    (`embed_model_mismatch`) and vectors are not written until `total-recall reembed` rebuilds
    them; keyword search keeps working meanwhile.
    """
    if not db.has_vec:
        return False
    if db.dialect == "postgres":
        from total_recall import pg

        return pg.ensure_vector_tables(db, model, dim, EMBED_VERSION)
    recorded_model, recorded_dim = db.get_meta("embed_model"), db.get_meta("embed_dim")
    if recorded_model is not None and (recorded_model != model or int(recorded_dim or 0) != dim):
        with db.write():
            db.set_meta("embed_model_mismatch", f"{recorded_model}/{recorded_dim} -> {model}/{dim}")
        return False
    with db.write():
        for table, key in VECTOR_TABLES.items():
            _create_or_rebuild_vec(db, table, key, dim)
        if recorded_model is None:  # new vector tables: every vector is made by this recipe
            db.set_meta("embed_version", EMBED_VERSION)
        db.set_meta("embed_model", model)
        db.set_meta("embed_dim", dim)
        db.execute("DELETE FROM meta WHERE key = 'embed_model_mismatch'")
    vacuum_if_sparse(db)
    return True


def mark_all_for_embedding(db: Database) -> None:
    """Flag every idea, span and chunk that has a vector for the repair pass (in the caller's
    transaction): the vectors are gone or about to be. A tool line's chunk never had one."""
    db.execute("UPDATE ideas SET needs_embedding = 1")
    db.execute("UPDATE spans SET needs_embedding = 1")
    db.execute(
        "UPDATE chunks SET needs_embedding = 1 WHERE kind != 'tool_result' AND content NOT LIKE '[tool %'"
    )


def drop_vector_tables(db: Database) -> None:
    """Forget all vectors (before re-embedding with another model)."""
    with db.write():
        if db.dialect == "postgres":  # vec0 tables there are pgvector tables; the same statements
            db.lock("vector tables")
        for table in VECTOR_TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
            log_vector_changes(db, table, [WHOLE_TABLE])
        mark_all_for_embedding(db)
        for key in (
            "embed_model",
            "embed_dim",
            "embed_model_mismatch",
            "embed_version",
            "embed_refresh_after",
        ):
            db.execute("DELETE FROM meta WHERE key = ?", (key,))


def sqlite_version(db: Database) -> str:
    return db.scalar("SELECT sqlite_version()")


def fts5_available(db: Database) -> bool:
    """Whether this SQLite has FTS5 (a throwaway temp table is created and dropped)."""
    try:
        db.execute("CREATE VIRTUAL TABLE temp._tr_fts USING fts5(x)")
        db.execute("DROP TABLE temp._tr_fts")
        return True
    except db.dbapi.Error:
        return False


def checkpoint(db: Database) -> Any:
    """PRAGMA wal_checkpoint(TRUNCATE): the row (busy, log, checkpointed); None on PostgreSQL,
    whose write-ahead log is the server's."""
    if db.dialect == "postgres":
        return None
    return db.one("PRAGMA wal_checkpoint(TRUNCATE)")


def integrity(db: Database) -> str:
    """PRAGMA integrity_check's first line: "ok" when the file is sound (on PostgreSQL: "ok"
    once it answers; the server checks its own pages)."""
    if db.dialect == "postgres":
        return "ok" if db.scalar("SELECT 1") == 1 else "no answer"
    return db.scalar("PRAGMA integrity_check")


def table_exists(db: Database, name: str) -> bool:
    """Whether a table (or virtual table) of that name exists: vec0 tables appear only once the
    embedding model's dimension is known, and migrations add tables to older databases."""
    if db.dialect == "postgres":
        from total_recall import pg

        return pg.table_exists(db, name)
    return bool(db.scalar("SELECT count(*) FROM sqlite_master WHERE name = ?", (name,), 0))


def vector_tables_exist(db: Database) -> bool:
    if db.dialect == "postgres":
        return table_exists(db, "idea_embeddings") and table_exists(db, "span_embeddings")
    return bool(
        db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('idea_embeddings', 'span_embeddings')",
            default=0,
        )
        == 2
    )
