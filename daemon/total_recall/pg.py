"""The PostgreSQL + pgvector store: connection, the SQL dialect bridge, migrations, vector tables.

`PgDatabase` answers the same calls as `db.Database` (execute, one, all, column, scalar, write,
get_meta, set_meta), so the storage owner modules run their statements on either store. Their
SQL is written for SQLite; `translate` turns the few SQLite-only forms they use into
PostgreSQL's: `?` placeholders, `INSERT OR IGNORE`, `x IS ?`, two-argument `max`/`min`,
`group_concat`, `instr`, numbered `?2`, empty `IN ()` lists, and `lastrowid` (a `RETURNING id`
on tables that have one).
Full-text and nearest-neighbour queries are not translated: their owners (vectors, lookup)
write each dialect's own.

psycopg (3) is imported inside the functions that need it: it is an optional extra
(`pip install 'total-recall[postgres]'`), and only a configured `[store] url` loads it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from total_recall import config, transactions
from total_recall.errors import MigrationError, SchemaError, StoreUnreachable, TotalRecallError

log = structlog.get_logger(__name__)

MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Tables whose rows have an `id`: an INSERT into them returns it (the cursor's lastrowid).
ID_TABLES = frozenset(
    "messages spans ideas entities relations memory_events llm_calls tombstones proposals chunks "
    "fallback_batches forgotten_scopes paused_ranges".split()
)
MIGRATION_LOCK = 0x7472_6D69  # pg_advisory_xact_lock key: one migrator at a time per database


def is_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


# -- SQL dialect -----------------------------------------------------------------------------------
_INSERT_INTO = re.compile(r"^\s*INSERT\s+(?:OR\s+IGNORE\s+)?INTO\s+(\w+)", re.IGNORECASE)
_MAX_MIN = re.compile(r"\b(max|min)\(", re.IGNORECASE)


def _pairs(text: str) -> str:
    """SQLite's two-argument max(a, b)/min(a, b) as GREATEST/LEAST, whatever the arguments nest
    (`max(1, (SELECT count(*) ...))`); one-argument max/min are the aggregates and stay."""
    out, pos = [], 0
    while match := _MAX_MIN.search(text, pos):
        depth, start, args = 0, match.end(), []
        for end in range(match.end(), len(text)):
            ch = text[end]
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                args.append(text[start:end])
                start = end + 1
        else:
            break  # unbalanced: leave the rest as it is
        args.append(text[start:end])
        out.append(text[pos : match.start()])
        if len(args) == 2:
            name = "GREATEST" if match[1].lower() == "max" else "LEAST"
            out.append(f"{name}({_pairs(args[0])},{_pairs(args[1])})")
        else:
            out.append(text[match.start() : match.end()] + _pairs(text[match.end() : end]) + ")")
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def translate(sql: str) -> str:
    """SQLite's forms used by the storage modules, in PostgreSQL's (module docstring)."""
    out, quoted = [], False
    for n, ch in enumerate(sql):
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            number = re.match(r"\d+", sql[n + 1 :])
            out.append(f"%(p{number[0]})s" if number else "%s")  # ?2: the second parameter, by name
        elif ch.isdigit() and out and out[-1].startswith("%(p") and sql[n - 1] in "?0123456789":
            continue  # the digits of ?N, already in its name
        else:
            out.append(ch)
    text = "".join(out)
    text = re.sub(r"\bIS\s+%s", "IS NOT DISTINCT FROM %s", text)
    # An empty list, `x IN ()` (false) and `x NOT IN ()` (true), is SQLite's; PostgreSQL's form is
    # a comparison with an empty array of x's type.
    text = re.sub(r"\bNOT\s+IN\s*\(\s*\)", "<> ALL ('{}')", text, flags=re.IGNORECASE)
    text = re.sub(r"\bIN\s*\(\s*\)", "= ANY ('{}')", text, flags=re.IGNORECASE)
    text = _pairs(text)
    text = re.sub(r"\binstr\(", "strpos(", text, flags=re.IGNORECASE)
    text = re.sub(r"group_concat\(([^()]+)\)", r"string_agg((\1)::text, ',')", text, flags=re.IGNORECASE)
    insert = _INSERT_INTO.match(text)
    if insert:
        ignore = re.match(r"^\s*INSERT\s+OR\s+IGNORE\s+", text, re.IGNORECASE)
        if ignore:
            text = re.sub(
                r"^\s*INSERT\s+OR\s+IGNORE\s+INTO", "INSERT INTO", text, count=1, flags=re.IGNORECASE
            )
            text += " ON CONFLICT DO NOTHING"
        if insert[1].lower() in ID_TABLES and not re.search(r"\bRETURNING\b", text, re.IGNORECASE):
            text += " RETURNING id"
    return text


class Row(tuple):
    """A result row read by position (row[0]) or by column name (row["project"]), like sqlite3.Row."""

    names: tuple[str, ...] = ()

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


def _row_factory(cursor):
    names = tuple(d.name for d in cursor.description or ())
    row_type = type("Row", (Row,), {"names": names})
    return lambda values: row_type(values)


class Cursor:
    """What the storage code reads from a cursor: rows, rowcount and lastrowid."""

    def __init__(self, cur: Any, returning_id: bool):
        self._cur = cur
        self.rowcount = cur.rowcount
        self.lastrowid = None
        self._rows: list | None = None
        if returning_id:
            self._rows = cur.fetchall() if cur.description else []
            self.lastrowid = int(self._rows[0][0]) if self._rows else None

    def fetchone(self):
        if self._rows is not None:
            return self._rows.pop(0) if self._rows else None
        return self._cur.fetchone() if self._cur.description else None

    def fetchall(self) -> list:
        if self._rows is not None:
            rows, self._rows = self._rows, []
            return rows
        return self._cur.fetchall() if self._cur.description else []

    def __iter__(self):
        return iter(self.fetchall())


@dataclass
class PgDatabase:
    """A connection to the shared store, with db.Database's interface (module docstring)."""

    conn: Any
    dbapi: Any
    url: str  # without the password (config.without_password)
    secret_url: str = field(default="", repr=False)  # the URL to reconnect with; never logged
    migrated: bool = field(default=False, repr=False)
    dialect: str = "postgres"
    driver: str = "psycopg"
    vec_version: str | None = None
    vec_error: str | None = None
    _depth: int = field(default=0, repr=False)

    @property
    def path(self) -> str:
        return self.url

    @property
    def has_vec(self) -> bool:
        return self.vec_version is not None

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def execute(self, sql: str, params: Any = ()) -> Cursor:
        text = translate(sql)
        args: Any = tuple(params or ())  # always parameters, so "%%" is sent as "%"
        if "%(p" in text:
            args = {f"p{n}": v for n, v in enumerate(args, 1)}
        with self._reachable():
            cur = self.conn.execute(text, args)
            return Cursor(cur, text.endswith(" RETURNING id") and bool(_INSERT_INTO.match(text)))

    def executemany(self, sql: str, rows: Any) -> None:
        text = translate(sql)
        with self._reachable(), self.conn.cursor() as cur:
            cur.executemany(text, [tuple(r) for r in rows])

    @contextlib.contextmanager
    def _reachable(self) -> Iterator[None]:
        """Trigger: the server went away (restart, network). Why: a daemon outlives outages and
        must neither crash nor lose work. Outcome: a lost connection is reopened before the next
        statement outside a transaction; a failure mid-way is StoreUnreachable (transient: the
        queue item stays pending and is retried), its message without the password."""
        if (
            self._depth == 0
            and self.secret_url
            and (self.conn is None or self.conn.closed or self.conn.broken)
        ):
            self.conn = _open(self.dbapi, self.secret_url)
            if not self.migrated:
                self.migrated = True
                try:
                    migrate(self)
                    self.vec_version = self.scalar(
                        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                    )
                except BaseException:
                    self.migrated = False
                    raise
        try:
            yield
        except self.dbapi.OperationalError as exc:
            if self.conn is None or self.conn.broken or self.conn.closed:
                raise StoreUnreachable(
                    f"the PostgreSQL store {self.url} is unreachable: {_clean(exc, self.secret_url)}"
                ) from None
            raise

    def one(self, sql: str, params: Any = ()) -> Any:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Any = ()) -> list:
        return self.execute(sql, params).fetchall()

    def column(self, sql: str, params: Any = ()) -> list:
        return [row[0] for row in self.execute(sql, params).fetchall()]

    def scalar(self, sql: str, params: Any = (), default: Any = None) -> Any:
        row = self.execute(sql, params).fetchone()
        return default if row is None or row[0] is None else row[0]

    @contextlib.contextmanager
    def write(self, *, commit: bool = True) -> Iterator[PgDatabase]:
        """db.Database.write on PostgreSQL: BEGIN ... COMMIT, a SAVEPOINT when nested."""
        if self._depth:
            yield from transactions.savepoint(self, commit)
            return
        with self._reachable():
            self.conn.execute("BEGIN")
        self._depth = 1
        try:
            yield self
        except BaseException:
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            self._depth = 0

    def lock(self, *parts: Any, shared: bool = False) -> None:
        """Serialise writers of one key (a project's intent) until this transaction ends: the row
        lock of a fact that has no row yet. ``shared`` holders wait only for an exclusive one (the
        indexer's batches for a forget)."""
        key = "\x1f".join("" if p is None else str(p) for p in parts)
        kind = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        self.conn.execute(f"SELECT {kind}(hashtextextended(%s, 0))", (key,))

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        return self.scalar("SELECT value FROM meta WHERE key = ?", (key,), default)

    def set_meta(self, key: str, value: Any) -> None:
        self.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()


# -- connecting and migrating ----------------------------------------------------------------------
def connect(
    url: str, *, migrate_to_head: bool = True, timeout: float = 10.0, lazy: bool = False
) -> PgDatabase:
    """Open the shared store at `url` (migrated to head); StoreUnreachable when it does not answer.
    `lazy`: connect (and migrate) on the first statement instead, and again after an outage."""
    try:
        import psycopg
    except ImportError:
        raise TotalRecallError(
            "[store] url names a PostgreSQL store but psycopg is not installed: "
            "pip install 'total-recall[postgres]'"
        ) from None
    if lazy:
        return PgDatabase(None, psycopg, config.without_password(url), url, vec_version="lazy")
    database = PgDatabase(_open(psycopg, url, timeout), psycopg, config.without_password(url), url)
    database.migrated = migrate_to_head
    try:
        if migrate_to_head:
            migrate(database)
        database.vec_version = database.scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    except BaseException:
        database.close()
        raise
    return database


# The candidates an HNSW search keeps (pgvector's hnsw.ef_search, 40 by default). A search returns
# at most this many rows, whatever its LIMIT, and a project's filter, when the planner takes the
# index, applies after it: at 40 a strategy's pool (search.POOL, 60) held 40 vectors. BEAM tune split
# on the PostgreSQL store: recall@1 0.262 -> 0.298, MRR 0.681 -> 0.717 at 200 (1000 the same); the
# smaller sets' tables are scanned exactly by the planner. Search at 100k ideas in 20 projects, p50:
# one project 46 ms at 40, 44 at 200, 57 at 400, 81 at 1000; every project 93-98 / 107 / 117 / 149.
PG_EF_SEARCH = 200


def _open(psycopg: Any, url: str, timeout: float = 10.0) -> Any:
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
    except psycopg.Error as exc:
        safe = config.without_password(url)
        raise StoreUnreachable(f"the PostgreSQL store {safe} is unreachable: {_clean(exc, url)}") from None
    conn.row_factory = _row_factory
    conn.execute(f"SET hnsw.ef_search = {PG_EF_SEARCH}")  # pgvector takes it up when it loads
    return conn


def _clean(exc: Exception, url: str) -> str:
    """The driver's message without the URL's password, whatever it quotes."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    password = re.match(r"^[a-z]+://[^:/@]*:([^@]*)@", url)
    if password and password[1]:
        text = text.replace(password[1], "***")
    return config.without_password(text)


def migration_files(folder: Path | None = None) -> list[tuple[int, Path]]:
    folder = folder or config.resource_dir("migrations") / "postgres"
    found = []
    for p in sorted(folder.glob("*.sql")):
        m = MIGRATION_NAME.match(p.name)
        if not m:
            raise SchemaError(f"migration file {p.name} does not match NNNN_slug.sql")
        found.append((int(m.group(1)), p))
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        raise SchemaError(f"PostgreSQL migration numbers must be 1..N without gaps, found {numbers}")
    return found


def schema_version(database: PgDatabase) -> int:
    # A scan of pg_tables, not to_regclass: after waiting for the migration lock a cached "no
    # such table" (an advisory lock does not refresh the catalog caches) would run a migration twice.
    exists = database.scalar(
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'meta'"
    )
    return int(database.get_meta("schema_version") or 0) if exists else 0


def migrate(database: PgDatabase, folder: Path | None = None) -> int:
    """Apply pending migrations, each in one transaction with the version it records; several
    machines starting at once take turns (an advisory lock), so each file applies once."""
    files = migration_files(folder)
    head = len(files)
    if schema_version(database) >= head:
        return _refuse_newer(database, head)
    for number, path in files:
        with database.write():
            database.conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            if schema_version(database) >= number:
                continue
            try:
                database.conn.execute(path.read_text(encoding="utf-8"))
                database.set_meta("schema_version", number)
            except database.dbapi.Error as exc:
                raise MigrationError(
                    f"PostgreSQL migration {path.name} failed and was rolled back: {exc}"
                ) from None
        log.info("migrated", store="postgres", version=number, file=path.name)
    return _refuse_newer(database, head)


def _refuse_newer(database: PgDatabase, head: int) -> int:
    current = schema_version(database)
    if current > head:
        raise SchemaError(
            f"the PostgreSQL store {database.url} has schema version {current}, newer than this "
            f"total-recall knows ({head}); upgrade total-recall on this machine"
        )
    return head


def ensure_vector_tables(database: PgDatabase, model: str, dim: int, version: int) -> bool:
    """pgvector tables for this model's dimension (db.ensure_vector_tables on PostgreSQL); a new
    store records `version` (db.EMBED_VERSION) as the recipe of its vectors."""
    recorded_model, recorded_dim = database.get_meta("embed_model"), database.get_meta("embed_dim")
    if recorded_model is not None and (recorded_model != model or int(recorded_dim or 0) != dim):
        with database.write():
            database.set_meta("embed_model_mismatch", f"{recorded_model}/{recorded_dim} -> {model}/{dim}")
        return False
    with database.write():
        database.conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        for table, key, owner in (
            ("idea_embeddings", "idea_id", "ideas"),
            ("span_embeddings", "span_id", "spans"),
            ("chunk_embeddings", "chunk_id", "chunks"),
        ):
            database.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} ({key} BIGINT PRIMARY KEY REFERENCES {owner} (id) "
                f"ON DELETE CASCADE, project TEXT NOT NULL DEFAULT '', embedding vector({dim}) NOT NULL)"
            )
            database.conn.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw (embedding vector_l2_ops)"
            )
            database.conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_project ON {table} (project)")
        if recorded_model is None:  # new vector tables: every vector is made by this recipe
            database.set_meta("embed_version", version)
        database.set_meta("embed_model", model)
        database.set_meta("embed_dim", dim)
        database.execute("DELETE FROM meta WHERE key = 'embed_model_mismatch'")
    return True


def table_exists(database: PgDatabase, name: str) -> bool:
    return bool(
        database.scalar(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = ?", (name,)
        )
    )


def vector_text(blob: bytes) -> str:
    """A little-endian float32 blob as pgvector's text form '[x,y,...]'."""
    import struct

    values = struct.unpack(f"<{len(blob) // 4}f", blob)
    return "[" + ",".join(repr(v) for v in values) + "]"


def vector_blob(text: str) -> bytes:
    """pgvector's text form back to the little-endian float32 blob every other part uses."""
    import struct

    values = [float(v) for v in text.strip("[]").split(",") if v.strip()]
    return struct.pack(f"<{len(values)}f", *values)
