"""The nested half of `write()`, shared by both stores (db.Database and pg.PgDatabase).

A write() inside another one is a SAVEPOINT: an exception undoes only its own changes (and
propagates), and what it did commits or rolls back with the outer block. SQLite and PostgreSQL
accept the same statements for it. It lives apart because `db` imports `pg` lazily: `pg` importing
`db` would make a cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def savepoint(owner: Any, commit: bool) -> Iterator[Any]:
    """Yield `owner` inside SAVEPOINT write_<depth> on its open transaction (owner.conn, owner._depth);
    with commit=False the savepoint's changes are undone at the end (a dry run)."""
    owner._depth += 1
    name = f"write_{owner._depth}"
    owner.conn.execute(f"SAVEPOINT {name}")
    try:
        yield owner
    except BaseException:
        owner.conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
        owner.conn.execute(f"RELEASE SAVEPOINT {name}")
        raise
    else:
        if not commit:
            owner.conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
        owner.conn.execute(f"RELEASE SAVEPOINT {name}")
    finally:
        owner._depth -= 1
