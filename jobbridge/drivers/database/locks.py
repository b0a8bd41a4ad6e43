"""Unique-job locks in ``jobbridge_locks``: one row per key, won by exactly one caller.

Taking a key is two statements in one transaction. First a conditional UPDATE
takes the row over if its lock has expired: when two callers race for the same
expired row, the second waits on the first's row lock and then re-reads it, no
longer expired, so it matches nothing. Then, if no row was taken over, an
INSERT that ignores a duplicate key: the primary key lets one insert win.

A key longer than the column (`limits.NAME_WIDTH`) is stored as its start and
a digest of the whole, so long unique ids still lock, each its own row.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, Insert, bindparam, delete, update
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.limits import NAME_WIDTH
from jobbridge.drivers.database.schema import locks
from jobbridge.errors import StoreRefused

_DIGEST = 64  # hex characters of a SHA-256

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


def stored_key(key: object) -> str:
    """The column value for a unique key: the key itself, or its start and digest when it is too long."""
    if not isinstance(key, str):
        raise StoreRefused(f"a unique key must be a string, not {type(key).__name__}: "
                           "make the job's unique_id() return a str (or None)")
    if len(key) <= NAME_WIDTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{key[:NAME_WIDTH - _DIGEST - 1]}#{digest}"


class Locks:
    """The two lock operations for one dialect, with their statements built once."""

    def __init__(self, dialect: str) -> None:
        self._insert = _insert_unless_taken(dialect)

    def acquire(self, conn: Connection, *, key: str, owner: str, now: float, until: float) -> bool:
        """Take ``key`` for ``owner`` until ``until`` unless someone holds it past ``now``."""
        key = stored_key(key)
        params = {"lock_key": key, "now": now, "new_owner": owner, "until": until}
        if conn.execute(_TAKE_OVER, params).rowcount == 1:
            return True
        inserted = conn.execute(self._insert, {"key": key, "owner": owner, "expires_at": until})
        return inserted.rowcount == 1

    def release(self, conn: Connection, *, key: str, owner: str) -> None:
        """Drop ``key`` if ``owner`` holds it; someone else's lock stays (a key no lock can have: nothing)."""
        if isinstance(key, str):
            conn.execute(_RELEASE, {"lock_key": stored_key(key), "old_owner": owner})
