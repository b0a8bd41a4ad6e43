"""The database driver's schedule store: ``jobbridge_schedules``, advanced in the transaction that pushes.

One row per entry: ``name`` (primary key), ``last_tick``, ``job_id`` (that
tick's job, NULL when it was recorded without one) and ``fired_at``. Firing a
tick is one transaction:

1. ``UPDATE ... SET last_tick = :tick WHERE name = :name AND last_tick < :tick``;
   when two schedulers race, the second waits on the first's row lock and then
   re-reads the row, whose tick is no longer earlier, so it matches nothing;
2. if no row matched, an ``INSERT`` that ignores a duplicate key: the entry's
   first tick, won by exactly one inserter (a row that exists means the tick, or
   a later one, is someone else's);
3. the job row is inserted by the driver's own push, in the same transaction
   (and a unique job's lock taken in it, as a transactional dispatch would).

The job row exists exactly when the tick is recorded: a scheduler killed
anywhere in between leaves neither, and the next one fires the tick.

`fire_many` does the same for many ticks in one transaction (their jobs in one
multi-row push), taking the rows in name order, so that two schedulers firing
the same batch wait for each other rather than deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Insert, bindparam, select, update
from sqlalchemy.dialects import mysql, postgresql, sqlite

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.failures import translated, write_transaction
from jobbridge.drivers.database.schema import schedules
from jobbridge.drivers.schedule_port import Fire, Firing, LastTick
from jobbridge.envelope import Envelope

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

#: entry names per SELECT ... IN (...) when reading last ticks
READ_BATCH = 500

_ADVANCE = (
    update(schedules)
    .where(schedules.c.name == bindparam("entry"), schedules.c.last_tick < bindparam("tick"))
    .values(last_tick=bindparam("tick"), job_id=bindparam("job"), fired_at=bindparam("now"))
)
_NO_JOB = update(schedules).where(schedules.c.name == bindparam("entry")).values(job_id=None)


def _insert_unless_there(dialect: str) -> Insert:
    statement: Insert
    if dialect == POSTGRESQL:
        statement = postgresql.insert(schedules).on_conflict_do_nothing(index_elements=[schedules.c.name])
    elif dialect == MYSQL:
        statement = mysql.insert(schedules).prefix_with("IGNORE")
    else:
        statement = sqlite.insert(schedules).on_conflict_do_nothing(index_elements=[schedules.c.name])
    return statement.execution_options(preserve_rowcount=True)  # the rowcount says who inserted


class DatabaseSchedules:
    """`jobbridge.drivers.schedule_port.ScheduleStore` on one database driver's engine."""

    def __init__(self, driver: DatabaseDriver) -> None:
        self._driver = driver
        self._insert = _insert_unless_there(driver.dialect)

    def now(self) -> float:
        return self._driver.clock.now()

    def last(self, entries: Sequence[str]) -> dict[str, LastTick]:
        names = list(dict.fromkeys(entries))
        found: dict[str, LastTick] = {}
        columns = (schedules.c.name, schedules.c.last_tick, schedules.c.job_id, schedules.c.fired_at)
        with translated("read schedule ticks"), self._driver.engine.connect() as conn:
            for start in range(0, len(names), READ_BATCH):
                chosen = select(*columns).where(schedules.c.name.in_(names[start:start + READ_BATCH]))
                for name, tick, job_id, fired_at in conn.execute(chosen):
                    found[name] = LastTick(float(tick), job_id, float(fired_at))
        return found

    def fire(self, entry: str, tick: float, envelope: Envelope | None) -> Fire:
        return self.fire_many([Firing(entry, tick, envelope)])[0]

    def fire_many(self, firings: Sequence[Firing]) -> list[Fire]:
        if not firings:
            return []
        now = self.now()  # before the transaction: the server's clock may take a connection of its own
        order = sorted(range(len(firings)), key=lambda i: (firings[i].entry, firings[i].tick))

        def work(conn: Connection) -> list[Fire]:
            outcomes: dict[int, Fire] = {}
            pushed: list[Envelope] = []
            for index in order:
                outcomes[index] = self._record(conn, firings[index], now)
                envelope = firings[index].envelope
                if outcomes[index] is Fire.PUSHED and envelope is not None:
                    pushed.append(envelope)
            if pushed:
                self._driver.push(pushed, transaction=conn)
            return [outcomes[i] for i in range(len(firings))]

        return write_transaction(self._driver.engine, "fire schedule ticks", work)

    def _record(self, conn: Connection, firing: Firing, now: float) -> Fire:
        """Advance one entry's tick in ``conn``; PUSHED when its job is to be pushed in this transaction."""
        envelope = firing.envelope
        params = {"entry": firing.entry, "tick": firing.tick, "job": None if envelope is None else envelope.id,
                  "now": now}
        if conn.execute(_ADVANCE, params).rowcount != 1:
            row = {"name": firing.entry, "last_tick": firing.tick, "job_id": params["job"], "fired_at": now}
            if conn.execute(self._insert, row).rowcount != 1:
                return Fire.TAKEN
        if envelope is None:
            return Fire.ADVANCED
        key = envelope.unique_key
        if key is not None and not self._driver.locks.acquire(key, envelope.id, envelope.unique_for or 3600.0,
                                                              transaction=conn):
            conn.execute(_NO_JOB, {"entry": firing.entry})  # a unique job still pending: dropped, as a dispatch
            return Fire.ADVANCED
        return Fire.PUSHED
