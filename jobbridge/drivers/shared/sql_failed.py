"""Failed jobs in a database shared store: one table per driver, every row filed under a scope.

The scope is the connection's own (a kafka group and topic prefix, an amqp
vhost and queue prefix), so several connections can share one store. Times
are epoch seconds in DOUBLE columns, on the store's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    event,
    func,
    insert,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database.error_search import error_contains, index_where_installed
from jobbridge.drivers.database.failures import as_driver_error, write_transaction
from jobbridge.drivers.database.types import BODY, ERROR_TEXT, MYSQL_TABLE, TIME
from jobbridge.store_reports import FailedJob

T = TypeVar("T")


def failed_table(metadata: MetaData, name: str) -> Table:
    """The failed store's table ``name`` (its index ``<name>_at``: the newest first, per scope).

    On PostgreSQL where ``pg_trgm`` is installed (the database driver's migrate creates it when it
    may), a table created now also gets a trigram index on its error text (`error_search`).
    """
    table = Table(
        name,
        metadata,
        Column("scope", String(191), primary_key=True),
        Column("id", String(191), primary_key=True),
        Column("queue", String(191), nullable=False),
        Column("name", String(191), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("error", ERROR_TEXT, nullable=False),
        Column("failed_at", TIME, nullable=False),
        Column("body", BODY, nullable=False),
        Index(f"{name}_at", "scope", "failed_at"),
        **MYSQL_TABLE,
    )
    event.listen(table, "after_create", index_where_installed)
    return table


class SqlFailedRows:
    """One scope's failed jobs in ``table``, on an engine of the shared store connection's driver."""

    def __init__(self, engine: Engine, table: Table, scope: str) -> None:
        self.engine, self.table, self.scope = engine, table, scope
        t = table.c
        self._row = select(t.id, t.queue, t.name, t.attempts, t.error, t.failed_at, t.body)

    def write(self, action: str, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction; a deadlock victim runs again, other errors become DriverErrors."""
        return write_transaction(self.engine, action, work)

    def read(self, action: str, work: Callable[[Connection], T]) -> T:
        try:
            with self.engine.connect() as conn:
                return work(conn.execution_options(jobbridge_begin="BEGIN"))
        except SQLAlchemyError as error:
            raise as_driver_error(action, error) from error

    def record(self, conn: Connection, job: FailedJob) -> None:
        """Write a failed job inside ``conn``'s transaction, replacing an earlier failure of the same id."""
        t = self.table.c
        conn.execute(delete(self.table).where(t.scope == self.scope, t.id == job.id))
        conn.execute(insert(self.table), {
            "scope": self.scope, "id": job.id, "queue": job.queue, "name": job.name,
            "attempts": job.attempts, "error": job.error, "failed_at": job.failed_at, "body": job.body})

    def pick(self, id_or_all: str, limit: int) -> Any:
        """The rows a retry takes, ``(id, queue, body)``, locked for update: one id, or the first ``limit``."""
        t = self.table.c
        query = select(t.id, t.queue, t.body).where(t.scope == self.scope)
        query = query.order_by(t.id).limit(limit) if id_or_all == "all" else query.where(t.id == id_or_all)
        return query.with_for_update()

    def remove(self, conn: Connection, ids: Sequence[str]) -> None:
        t = self.table.c
        conn.execute(delete(self.table).where(t.scope == self.scope, t.id.in_(list(ids))))

    def flush(self) -> int:
        statement = delete(self.table).where(self.table.c.scope == self.scope)
        return int(self.write("flush failed jobs", lambda conn: conn.execute(statement).rowcount))

    def count(self) -> int:
        query = select(func.count()).select_from(self.table).where(self.table.c.scope == self.scope)
        return int(self.read("count failed jobs", lambda conn: conn.execute(query).scalar_one()))

    def list(self, limit: int, where: FailedFilter | None = None) -> list[FailedJob]:
        where, t = where or FailedFilter(), self.table.c
        query = self._row.where(t.scope == self.scope)
        if where.queue is not None:
            query = query.where(t.queue == where.queue)
        if where.name is not None:
            query = query.where(t.name == where.name)
        if where.since is not None:
            query = query.where(t.failed_at >= where.since)
        if where.until is not None:
            query = query.where(t.failed_at <= where.until)
        if where.error:
            query = query.where(error_contains(t.error, where.error, self.engine.dialect.name))
        query = query.order_by(t.failed_at.desc(), t.id.desc()).limit(limit)
        return [FailedJob(*row) for row in self.read("list failed jobs", lambda conn: conn.execute(query).all())]

    def get(self, job_id: str) -> FailedJob | None:
        t = self.table.c
        query = self._row.where(t.scope == self.scope, t.id == job_id)
        row = self.read("read a failed job", lambda conn: conn.execute(query).first())
        return None if row is None else FailedJob(*row)
