"""The database driver's worker registry: one row per worker process in ``jobbridge_workers``.

A beat replaces the row (``id``, ``last_beat``, ``body`` the record as JSON)
in one short transaction: an UPDATE, and an INSERT when it touched no row
(the first beat). Pruning deletes by ``last_beat``, which is indexed. A
database migrated before schema version 4 has no table: a worker's start
migrates it; the read-only commands report no workers until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, delete, insert, select, update

from jobbridge.drivers.database.failures import translated, write_transaction
from jobbridge.drivers.database.schema import workers
from jobbridge.drivers.worker_registry_port import WorkerBeat

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver


class DatabaseWorkers:
    """`jobbridge.drivers.worker_registry_port.WorkerRegistry` on one database driver's engine."""

    def __init__(self, driver: DatabaseDriver) -> None:
        self._driver = driver

    def now(self) -> float:
        return self._driver.clock.now()

    def beat(self, worker: WorkerBeat) -> None:
        values = {"last_beat": worker.last_beat, "body": worker.encode().decode()}

        def work(conn: Connection) -> None:
            if conn.execute(update(workers).where(workers.c.id == worker.id).values(**values)).rowcount == 0:
                conn.execute(insert(workers).values(id=worker.id, **values))

        write_transaction(self._driver.engine, "record a worker's heartbeat", work)

    def forget(self, worker_id: str) -> None:
        write_transaction(self._driver.engine, "forget a worker",
                          lambda conn: conn.execute(delete(workers).where(workers.c.id == worker_id)))

    def list(self) -> list[WorkerBeat]:
        engine = self._driver.engine
        with translated("list workers"), engine.connect() as conn:
            if not engine.dialect.has_table(conn, workers.name):
                return []
            rows = conn.execute(select(workers.c.body).order_by(workers.c.last_beat.desc())).scalars().all()
        return [beat for beat in map(WorkerBeat.decode, rows) if beat is not None]

    def prune(self, before: float) -> int:
        def work(conn: Connection) -> int:
            return int(conn.execute(delete(workers).where(workers.c.last_beat < before)).rowcount or 0)

        return write_transaction(self._driver.engine, "prune stale workers", work)
