"""The database driver's per-minute counters: one row per (minute, queue) in ``jobbridge_throughput``.

A worker's beat adds its tally in one transaction: an insert of each
(minute, queue) that on a duplicate key adds to the row instead (``ON CONFLICT
DO UPDATE`` on PostgreSQL and SQLite, ``ON DUPLICATE KEY UPDATE`` on MariaDB),
so workers beating at once never lose a count and never hit a duplicate. The
key leads with the minute: a chart's range and the prune are one index range.
A database migrated before schema version 5 has no table: a worker's start
migrates it; the dashboard draws empty charts until then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, select
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.failures import translated, write_transaction
from jobbridge.drivers.database.limits import fitted
from jobbridge.drivers.database.schema import throughput
from jobbridge.drivers.throughput_port import MinuteCount

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

_COUNTS = ("processed", "failed", "released")


def _upsert(dialect: str) -> Any:
    """An insert that adds to the row already there for its (minute, queue)."""
    c = throughput.c
    if dialect == MYSQL:
        statement = mysql.insert(throughput)
        return statement.on_duplicate_key_update(
            {name: c[name] + statement.inserted[name] for name in _COUNTS})
    module: Any = postgresql if dialect == POSTGRESQL else sqlite
    statement = module.insert(throughput)
    return statement.on_conflict_do_update(
        index_elements=[c.minute, c.queue], set_={name: c[name] + statement.excluded[name] for name in _COUNTS})


class DatabaseThroughput:
    """`jobbridge.drivers.throughput_port.ThroughputStore` on one database driver's engine."""

    def __init__(self, driver: DatabaseDriver) -> None:
        self._driver = driver
        self._upsert = _upsert(driver.engine.dialect.name)

    def now(self) -> float:
        return self._driver.clock.now()

    def add(self, counts: Sequence[MinuteCount]) -> None:
        rows = [{"minute": c.minute, "queue": fitted(c.queue), "processed": c.processed, "failed": c.failed,
                 "released": c.released} for c in counts]
        if rows:
            write_transaction(self._driver.engine, "add to the throughput counters",
                              lambda conn: conn.execute(self._upsert, rows))

    def read(self, since: float) -> list[MinuteCount]:
        c = throughput.c
        query = (select(c.minute, c.queue, func.sum(c.processed), func.sum(c.failed), func.sum(c.released))
                 .where(c.minute >= since).group_by(c.minute, c.queue).order_by(c.minute, c.queue))
        engine = self._driver.engine
        with translated("read the throughput counters"), engine.connect() as conn:
            if not engine.dialect.has_table(conn, throughput.name):
                return []
            rows = conn.execute(query).all()
        return [MinuteCount(int(m), str(q), int(p or 0), int(f or 0), int(r or 0)) for m, q, p, f, r in rows]

    def prune(self, before: float) -> int:
        def work(conn: Connection) -> int:
            return int(conn.execute(delete(throughput).where(throughput.c.minute < before)).rowcount or 0)

        return write_transaction(self._driver.engine, "prune old throughput counters", work)
