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
from collections.abc import Callable

from sqlalchemy import Connection, Engine, Insert, bindparam, delete, update
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.clock import Clock
from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.failures import translated, write_transaction
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


class LockStore:
    """``jobbridge_locks`` on the driver's engine, shared by every process on the database.

    ``join`` turns a caller's transaction into its connection (checked to be on
    the driver's database), so that a lock taken at a transactional dispatch is
    rolled back with the job row.
    """

    shared = True

    def __init__(self, engine: Engine, dialect: str, clock: Clock, join: Callable[[object], Connection]) -> None:
        self.engine, self.clock, self._join = engine, clock, join
        self._insert = _insert_unless_taken(dialect)

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        now = self.clock.now()
        if transaction is not None:
            # In the caller's transaction: a rollback drops the lock with the job row, and on
            # SQLite a second connection would wait on the caller's own write lock until commit.
            conn = self._join(transaction)
            with translated("take a unique lock in the caller's transaction"):
                return self._acquire(conn, key=key, owner=owner, now=now, until=now + ttl)
        return write_transaction(self.engine, "take a unique lock", lambda conn: self._acquire(
            conn, key=key, owner=owner, now=now, until=now + ttl))

    def release(self, key: str, owner: str) -> None:
        """Drop ``key`` if ``owner`` holds it; someone else's lock stays (a key no lock can have: nothing)."""
        if isinstance(key, str):
            write_transaction(self.engine, "release a unique lock", lambda conn: conn.execute(
                _RELEASE, {"lock_key": stored_key(key), "old_owner": owner}))

    def _acquire(self, conn: Connection, *, key: str, owner: str, now: float, until: float) -> bool:
        """Take ``key`` for ``owner`` until ``until`` unless someone holds it past ``now``."""
        key = stored_key(key)
        params = {"lock_key": key, "now": now, "new_owner": owner, "until": until}
        if conn.execute(_TAKE_OVER, params).rowcount == 1:
            return True
        inserted = conn.execute(self._insert, {"key": key, "owner": owner, "expires_at": until})
        return inserted.rowcount == 1
