"""Unique-job locks in ``jobbridge_locks``: one row per key, won by exactly one caller.

Taking a key is two statements in one transaction. First a conditional UPDATE
takes the row over if its lock has expired: when two callers race for the same
expired row, the second waits on the first's row lock and then re-reads it, no
longer expired, so it matches nothing. Then, if no row was taken over, an
INSERT that ignores a duplicate key: the primary key lets one insert win.
"""

from __future__ import annotations

from sqlalchemy import Connection, Insert, bindparam, delete, update
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.schema import locks

_TAKE_OVER = (
    update(locks)
    .where(locks.c.key == bindparam("lock_key"), locks.c.expires_at <= bindparam("now"))
    .values(owner=bindparam("new_owner"), expires_at=bindparam("until"))
)

_RELEASE = delete(locks).where(locks.c.key == bindparam("lock_key"), locks.c.owner == bindparam("old_owner"))


def _insert_unless_taken(dialect: str) -> Insert:
    statement: Insert
    if dialect == POSTGRESQL:
        statement = postgresql.insert(locks).on_conflict_do_nothing(index_elements=[locks.c.key])
    elif dialect == MYSQL:
        statement = mysql.insert(locks).prefix_with("IGNORE")
    else:
        statement = sqlite.insert(locks).on_conflict_do_nothing(index_elements=[locks.c.key])
    # SQLAlchemy keeps an INSERT's rowcount only when asked: it is how we learn who won
    return statement.execution_options(preserve_rowcount=True)


class Locks:
    """The two lock operations for one dialect, with their statements built once."""

    def __init__(self, dialect: str) -> None:
        self._insert = _insert_unless_taken(dialect)

    def acquire(self, conn: Connection, *, key: str, owner: str, now: float, until: float) -> bool:
        """Take ``key`` for ``owner`` until ``until`` unless someone holds it past ``now``."""
        params = {"lock_key": key, "now": now, "new_owner": owner, "until": until}
        if conn.execute(_TAKE_OVER, params).rowcount == 1:
            return True
        inserted = conn.execute(self._insert, {"key": key, "owner": owner, "expires_at": until})
        return inserted.rowcount == 1

    def release(self, conn: Connection, *, key: str, owner: str) -> None:
        """Drop ``key`` if ``owner`` holds it; someone else's lock stays."""
        conn.execute(_RELEASE, {"lock_key": key, "old_owner": owner})
