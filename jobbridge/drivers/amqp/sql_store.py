"""`SqlSharedStore`: the amqp connection's failed jobs and queue names in a database shared store."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Column, Connection, MetaData, String, Table, select, text
from sqlalchemy.exc import IntegrityError

from jobbridge.drivers.amqp.store import DriverBacked
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database.types import MYSQL_TABLE
from jobbridge.drivers.shared.sql_failed import SqlFailedRows, failed_table
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

metadata = MetaData()
failed = failed_table(metadata, "jobbridge_amqp_failed")
queues = Table(
    "jobbridge_amqp_queues",
    metadata,
    Column("scope", String(191), primary_key=True),
    Column("queue", String(191), primary_key=True),
    **MYSQL_TABLE,
)
#: the server's clock, by dialect, as epoch seconds (SQLite has none: the host's clock is the store's)
_NOW = {"postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())",
        "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))", "mariadb": "SELECT UNIX_TIMESTAMP(NOW(6))"}


class SqlSharedStore(DriverBacked):
    def __init__(self, driver: DatabaseDriver, scope: str) -> None:
        super().__init__(driver)
        self.engine, self.scope = driver.engine, scope
        self.rows = SqlFailedRows(self.engine, failed, scope)
        self._known: set[str] = set()

    @classmethod
    def on(cls, driver: DatabaseDriver, scope: str) -> SqlSharedStore:
        store = cls(driver, scope)
        store.migrate()
        return store

    def migrate(self) -> None:
        """Create the tables that are missing (a second process creating them at once retries)."""
        try:
            self.rows.write("create the amqp tables", lambda c: metadata.create_all(c, checkfirst=True))
        except Exception:
            self.rows.write("create the amqp tables", lambda c: metadata.create_all(c, checkfirst=True))

    def server_clock(self) -> Callable[[], float] | None:
        if self.engine.dialect.name not in _NOW:
            return None
        query = text(_NOW[self.engine.dialect.name])
        return lambda: float(self.rows.read("read the server's clock", lambda c: c.execute(query).scalar_one()))

    def record(self, job: FailedJob) -> None:
        self.rows.write("fail a job", lambda conn: self.rows.record(conn, job))

    def take(self, id_or_all: str, limit: int) -> list[tuple[str, str, bytes]]:
        pick = self.rows.pick(id_or_all, limit)
        found = self.rows.read("read failed jobs", lambda conn: conn.execute(pick).all())
        return [(str(i), str(q), bytes(b)) for i, q, b in found]

    def remove(self, ids: Sequence[str]) -> None:
        if ids:
            self.rows.write("drop retried jobs", lambda conn: self.rows.remove(conn, ids))

    def flush(self) -> int:
        return self.rows.flush()

    def count(self) -> int:
        return self.rows.count()

    def list(self, limit: int, where: FailedFilter | None = None) -> builtins.list[FailedJob]:
        return self.rows.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self.rows.get(job_id)

    def remember(self, names: Sequence[str]) -> None:
        new = [q for q in names if q not in self._known]
        if not new:
            return

        def work(conn: Connection) -> None:
            have = set(conn.execute(select(queues.c.queue).where(
                queues.c.scope == self.scope, queues.c.queue.in_(new))).scalars())
            for queue in new:
                if queue not in have:
                    conn.execute(queues.insert(), {"scope": self.scope, "queue": queue})

        try:
            self.rows.write("remember queues", work)
        except Exception as exc:  # another process remembered one first: every name is there now
            if not isinstance(exc.__cause__, IntegrityError):
                raise
        self._known.update(new)

    def queues(self) -> builtins.list[str]:
        query = select(queues.c.queue).where(queues.c.scope == self.scope).order_by(queues.c.queue)
        return [str(q) for q in self.rows.read("list queues", lambda conn: conn.execute(query).scalars().all())]
