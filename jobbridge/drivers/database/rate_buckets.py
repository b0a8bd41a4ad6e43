"""Shared rate limits in ``jobbridge_rate_buckets``: one row per bucket, booked under its row lock.

A take is one write transaction: lock the bucket's row (``SELECT ... FOR
UPDATE`` on PostgreSQL and MariaDB; SQLite's ``BEGIN IMMEDIATE`` holds the
database's one write lock already), read the time, book the turns with
`jobbridge.rate_limits.book` and write the row back. Concurrent takers queue on
the row, so the turns they are granted are spaced exactly as one taker's would
be. The time is the server's, read inside the locked transaction on
PostgreSQL and MariaDB (every worker measures from one clock, whatever its
own says) and the driver's clock on SQLite, a file on one host. A bucket
nobody took yet is inserted first, with a duplicate ignored, so two first
takers still meet on one row.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, Insert, bindparam, select, update
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.clock import Clock
from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.failures import write_transaction
from jobbridge.drivers.database.locks import stored_key
from jobbridge.drivers.database.schema import rate_buckets
from jobbridge.drivers.database.server_clock import SERVER_TIME
from jobbridge.rate_limits import Grants, RateLimit, book

_LOCKED = select(rate_buckets.c.tat).where(rate_buckets.c.key == bindparam("bucket")).with_for_update()
_WRITE = update(rate_buckets).where(rate_buckets.c.key == bindparam("bucket")).values(tat=bindparam("new_tat"))


def _insert_if_missing(dialect: str) -> Insert:
    if dialect == POSTGRESQL:
        return postgresql.insert(rate_buckets).on_conflict_do_nothing(index_elements=[rate_buckets.c.key])
    if dialect == MYSQL:
        return mysql.insert(rate_buckets).prefix_with("IGNORE")
    return sqlite.insert(rate_buckets).on_conflict_do_nothing(index_elements=[rate_buckets.c.key])


class RateBuckets:
    """The database driver's shared buckets (``driver.rate_buckets``)."""

    shared = True

    def __init__(self, engine: Engine, dialect: str, clock: Clock) -> None:
        self.engine, self.dialect, self.clock = engine, dialect, clock
        self._insert = _insert_if_missing(dialect)
        self._time = SERVER_TIME.get(dialect)

    def take(self, key: str, limit: RateLimit, count: int, horizon: float) -> Grants:
        bucket = stored_key(f"rate:{key}")

        def work(conn: Connection) -> Grants:
            tat = conn.execute(_LOCKED, {"bucket": bucket}).scalar()
            if tat is None:
                conn.execute(self._insert, {"key": bucket, "tat": 0.0})
                tat = conn.execute(_LOCKED, {"bucket": bucket}).scalar_one()
            now = float(conn.execute(self._time).scalar_one()) if self._time is not None else self.clock.now()
            new_tat, grants = book(float(tat), now, limit, count, horizon)
            if grants.starts:
                conn.execute(_WRITE, {"bucket": bucket, "new_tat": new_tat})
            return grants

        return write_transaction(self.engine, "take a rate limit's turns", work)
