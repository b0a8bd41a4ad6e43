"""The database driver's schedule store: ``jobbridge_schedules``, advanced in the transaction that pushes.

One row per entry: ``name`` (primary key), ``last_tick``, ``job_id`` (that
tick's job, NULL when it was recorded without one) and ``fired_at``. Firing a
batch of ticks is one transaction of a few set-based statements, whatever the
batch's size (`jobbridge.drivers.database.schedule_sql`):

1. the batch's rows are read and locked, in name order (``SELECT ... ORDER BY
   name FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the database):
   a scheduler firing the same entries waits here for the first to commit, then
   reads the ticks it recorded, so it cannot fire them again; the same order for
   everyone means two schedulers wait for each other rather than deadlock;
2. an entry with no row yet (never fired) gets one, by an ``INSERT`` that
   ignores a duplicate key, and those rows are locked and read again: a row that
   another scheduler inserted meanwhile carries its tick, one of ours carries
   `NEVER`, which every tick is later than;
3. each firing is judged against the locked tick: later, it is ours (PUSHED, or
   ADVANCED when it has no job or its unique lock is held, the lock taken in this
   transaction as a transactional dispatch would); otherwise TAKEN. The entries'
   new ticks are written by one multi-row statement;
4. the jobs are inserted by the driver's own push, in the same transaction.

The job rows exist exactly when their ticks are recorded: a scheduler killed
anywhere in between leaves neither, and the next one fires the ticks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from jobbridge.drivers.database import schedule_sql
from jobbridge.drivers.database.failures import translated, write_transaction
from jobbridge.drivers.schedule_port import Fire, Firing, LastTick
from jobbridge.envelope import Envelope

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

#: the tick a row inserted for a never-fired entry holds until this transaction records the real one
NEVER = schedule_sql.NEVER


class DatabaseSchedules:
    """`jobbridge.drivers.schedule_port.ScheduleStore` on one database driver's engine."""

    def __init__(self, driver: DatabaseDriver) -> None:
        self._driver = driver
        self._sql = schedule_sql.for_dialect(driver.dialect)

    def now(self) -> float:
        return self._driver.clock.now()

    def last(self, entries: Sequence[str]) -> dict[str, LastTick]:
        names = list(dict.fromkeys(entries))
        found: dict[str, LastTick] = {}
        with translated("read schedule ticks"), self._driver.engine.connect() as conn:
            for name, tick, job_id, fired_at in self._sql.read(conn, names):
                found[name] = LastTick(float(tick), job_id, float(fired_at))
        return found

    def fire(self, entry: str, tick: float, envelope: Envelope | None) -> Fire:
        return self.fire_many([Firing(entry, tick, envelope)])[0]

    def fire_many(self, firings: Sequence[Firing]) -> list[Fire]:
        if not firings:
            return []
        now = self.now()  # before the transaction: the server's clock may take a connection of its own
        order = sorted(range(len(firings)), key=lambda i: (firings[i].entry, firings[i].tick))
        names = sorted({firing.entry for firing in firings})

        def work(conn: Connection) -> list[Fire]:
            stored = self._locked(conn, names, now)
            outcomes: list[Fire] = [Fire.TAKEN] * len(firings)
            rows: dict[str, dict[str, Any]] = {}
            pushed: list[Envelope] = []
            for index in order:
                firing = firings[index]
                if firing.tick <= stored[firing.entry]:
                    continue  # this tick (or a later one) is recorded: someone else's
                stored[firing.entry] = firing.tick
                outcomes[index] = self._judged(conn, firing)
                job = firing.envelope if outcomes[index] is Fire.PUSHED else None
                if job is not None:
                    pushed.append(job)
                rows[firing.entry] = {"name": firing.entry, "last_tick": firing.tick, "fired_at": now,
                                      "job_id": None if job is None else job.id}
            if rows:
                self._sql.record(conn, list(rows.values()))
            if pushed:
                self._driver.push(pushed, transaction=conn)
            return outcomes

        return write_transaction(self._driver.engine, "fire schedule ticks", work)

    def _locked(self, conn: Connection, names: list[str], now: float) -> dict[str, float]:
        """Each of ``names``' stored tick, its row locked by ``conn`` (inserted at `NEVER` when it had none)."""
        stored = dict(self._sql.lock(conn, names))
        missing = [name for name in names if name not in stored]
        if missing:
            self._sql.insert_missing(conn, missing, now)
            stored.update(self._sql.lock(conn, missing))  # ours at NEVER, or what another scheduler recorded
        return stored

    def _judged(self, conn: Connection, firing: Firing) -> Fire:
        """A firing whose tick is ours: PUSHED when its job is to be pushed in this transaction."""
        envelope = firing.envelope
        if envelope is None:
            return Fire.ADVANCED
        key = envelope.unique_key
        if key is not None and not self._driver.locks.acquire(key, envelope.id, envelope.unique_for or 3600.0,
                                                              transaction=conn):
            return Fire.ADVANCED  # a unique job still pending: dropped, as a dispatch would drop it
        return Fire.PUSHED
