"""`SqlLeaseStore`: the Kafka driver's leases, delayed and failed jobs in a database lock store.

It runs on the engine of the database driver the app opened for the ``locks``
connection (SQLite, PostgreSQL or MariaDB), in tables of its own
(`jobbridge.drivers.kafka.sql_schema`). Each change is one transaction whose
conditional UPDATE or INSERT-unless-present lets exactly one racing worker
win; SQLite serialises writers (``BEGIN IMMEDIATE``), and the servers re-check
a row's condition after waiting for its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, Insert, and_, case, delete, func, insert, or_, select, text, update
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database.failures import as_driver_error, write_transaction
from jobbridge.drivers.kafka.sql_schema import DONE, LEASED, delayed, failed, leases, metadata
from jobbridge.drivers.kafka.store import Delayed, DelayedCounts, Held, Refresh, Reserved, Reserving, Spot
from jobbridge.drivers.shared.sql_failed import SqlFailedRows
from jobbridge.errors import NoFailedJob
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

T = TypeVar("T")

#: failed jobs moved back per transaction by ``retry_failed("all")``
RETRY_BATCH = 500
#: the server's clock, by dialect, as epoch seconds (SQLite has none: the host's clock is the store's)
_NOW = {"postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())",
        "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))", "mariadb": "SELECT UNIX_TIMESTAMP(NOW(6))"}


def _insert_unless_present(dialect: str) -> Insert:
    statement: Insert
    if dialect == "postgresql":
        statement = postgresql.insert(leases).on_conflict_do_nothing()
    elif dialect == "mysql":
        statement = mysql.insert(leases).prefix_with("IGNORE")
    else:
        statement = sqlite.insert(leases).on_conflict_do_nothing()
    return statement.execution_options(preserve_rowcount=True)


class SqlLeaseStore:
    """One scope's rows in the lock store's database, on the engine of the lock store connection's driver."""

    def __init__(self, driver: DatabaseDriver, scope: str) -> None:
        self.engine: Engine = driver.engine
        self.scope = scope
        self.may_lose_an_accepted_job = driver.capabilities.may_lose_an_accepted_job
        self.locks = driver.locks
        self._driver = driver
        self.failures = SqlFailedRows(self.engine, failed, scope)
        self._reserve = _insert_unless_present(self.engine.dialect.name)
        self._settle = (
            update(leases)
            .values(state=DONE, token=None, lease_until=None, body=None)
            .execution_options(preserve_rowcount=True)
        )

    @classmethod
    def on(cls, driver: DatabaseDriver, scope: str) -> SqlLeaseStore:
        """On a `DatabaseDriver`: its engine for these tables, its locks for unique jobs."""
        store = cls(driver, scope)
        store.migrate()
        return store

    def describe(self) -> str:
        return self._driver.describe()

    def check(self) -> None:
        """The database driver's check (on MariaDB, the size its packet allows); no eviction to fear here."""
        self._driver.check()

    def server_clock(self) -> Callable[[], float] | None:
        """The database server's clock (PostgreSQL, MariaDB); None on SQLite, whose every worker shares a host."""
        return self._time if self.engine.dialect.name in _NOW else None

    def _time(self) -> float:
        query = text(_NOW[self.engine.dialect.name])
        return float(self._read("read the server's clock", lambda conn: conn.execute(query).scalar_one()))

    def migrate(self) -> None:
        """Create the tables that are missing (a second process creating them at once retries)."""
        try:
            self._write("create the kafka lease tables", lambda c: metadata.create_all(c, checkfirst=True))
        except Exception:
            self._write("create the kafka lease tables", lambda c: metadata.create_all(c, checkfirst=True))

    # -- transactions -------------------------------------------------------------------------

    def _write(self, action: str, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction; a deadlock victim runs again, other errors become DriverErrors."""
        return write_transaction(self.engine, action, work)

    def _read(self, action: str, work: Callable[[Connection], T]) -> T:
        try:
            with self.engine.connect() as conn:
                return work(conn.execution_options(jobbridge_begin="BEGIN"))
        except SQLAlchemyError as error:
            raise as_driver_error(action, error) from error

    def _at(self, spot: Spot) -> ColumnElement[bool]:
        return and_(leases.c.scope == self.scope, leases.c.topic == spot.topic,
                    leases.c.part == spot.partition, leases.c.kafka_offset == spot.offset)

    def _held(self, held: Held) -> ColumnElement[bool]:
        return and_(self._at(held.spot), leases.c.state == LEASED, leases.c.token == held.token)

    # -- leases -------------------------------------------------------------------------------

    def reserve(self, spots: Sequence[Reserving]) -> list[Reserved]:
        def work(conn: Connection) -> list[Reserved]:
            # in spot order, so that two racing transactions lock their rows in one order
            return [self._reserve_one(conn, ask) for ask in sorted(spots, key=lambda ask: ask.spot.key)]

        if not spots:
            return []
        found = dict(zip(sorted(ask.spot.key for ask in spots), self._write("reserve messages", work), strict=True))
        return [found[ask.spot.key] for ask in spots]

    def _reserve_one(self, conn: Connection, ask: Reserving) -> Reserved:
        spot = ask.spot
        row: dict[str, Any] = {"scope": self.scope, "topic": spot.topic, "part": spot.partition,
                               "kafka_offset": spot.offset, "queue": ask.queue}
        if ask.park:
            row.update(state=DONE, token=None, lease_until=None, job_id=None, body=None)
        else:
            row.update(state=LEASED, token=ask.token, lease_until=ask.at, job_id=ask.job_id, body=ask.body)
        if conn.execute(self._reserve, row).rowcount == 1:
            if ask.park:
                self._add(conn, [Delayed(ask.token, ask.queue, ask.at, ask.job_id, ask.body)])
            return Reserved.WON
        state = conn.execute(select(leases.c.state).where(self._at(spot))).scalar()
        return Reserved.HELD if state == LEASED else Reserved.SETTLED

    def states(self, spots: Sequence[Spot]) -> list[Reserved | None]:
        def work(conn: Connection) -> dict[Spot, int]:
            query = select(leases.c.topic, leases.c.part, leases.c.kafka_offset, leases.c.state).where(
                or_(*(self._at(s) for s in spots)))
            return {Spot(t, p, o): state for t, p, o, state in conn.execute(query)}

        if not spots:
            return []
        found = self._read("read lease states", work)
        named = {LEASED: Reserved.HELD, DONE: Reserved.SETTLED}
        return [named.get(found[s]) if s in found else None for s in spots]

    def extend(self, held: Sequence[Held], until: float) -> list[bool]:
        def work(conn: Connection) -> list[bool]:
            renew = update(leases).values(lease_until=until).execution_options(preserve_rowcount=True)
            return [conn.execute(renew.where(self._held(h))).rowcount == 1 for h in held]

        return self._write("extend leases", work) if held else []

    def acknowledge(self, held: Sequence[Held]) -> list[bool]:
        def work(conn: Connection) -> list[bool]:
            return [conn.execute(self._settle.where(self._held(h))).rowcount == 1 for h in held]

        return self._write("acknowledge leases", work) if held else []

    def release(self, held: Held, row: Delayed) -> bool:
        def work(conn: Connection) -> bool:
            if conn.execute(self._settle.where(self._held(held))).rowcount != 1:
                return False
            self._add(conn, [row])
            return True

        return self._write("release a job", work)

    def fail(self, held: Held, job: FailedJob) -> bool:
        def work(conn: Connection) -> bool:
            if conn.execute(self._settle.where(self._held(held))).rowcount != 1:
                return False
            self._record(conn, job)
            return True

        return self._write("fail a job", work)

    def _record(self, conn: Connection, job: FailedJob) -> None:
        """Write a failed job, replacing an earlier failure of the same id."""
        self.failures.record(conn, job)

    def reclaim(self, now: float, limit: int) -> list[Spot]:
        lapsed = (
            select(leases.c.topic, leases.c.part, leases.c.kafka_offset, leases.c.token, leases.c.queue,
                   leases.c.job_id, leases.c.body)
            .where(leases.c.scope == self.scope, leases.c.state == LEASED, leases.c.lease_until <= now)
            .order_by(leases.c.topic, leases.c.part, leases.c.kafka_offset)
            .limit(limit)
        )

        def work(conn: Connection) -> list[Spot]:
            won: list[Spot] = []
            for topic, part, offset, token, queue, job_id, body in conn.execute(lapsed).all():
                spot = Spot(topic, part, offset)
                still = and_(self._held(Held(spot, token)), leases.c.lease_until <= now)
                if conn.execute(self._settle.where(still)).rowcount == 1:
                    # the lapsed lease's token is unique to it: the delayed row's id
                    self._add(conn, [Delayed(token, queue, now, job_id or "", body or b"")])
                    won.append(spot)
            return won

        return self._write("reclaim lapsed leases", work)

    def forget(self, topic: str, partition: int, below: int) -> None:
        statement = delete(leases).where(
            leases.c.scope == self.scope, leases.c.topic == topic, leases.c.part == partition,
            leases.c.kafka_offset < below, leases.c.state == DONE)
        self._write("forget settled messages", lambda conn: conn.execute(statement))

    # -- delayed jobs -------------------------------------------------------------------------

    def _add(self, conn: Connection, rows: Sequence[Delayed]) -> None:
        conn.execute(insert(delayed), [
            {"id": r.id, "scope": self.scope, "queue": r.queue, "due": r.due, "token": None,
             "job_id": r.job_id, "body": r.body} for r in rows])

    def add_delayed(self, rows: Sequence[Delayed]) -> None:
        if rows:
            self._write("store delayed jobs", lambda conn: self._add(conn, rows))

    def take_due(self, now: float, until: float, token: str, limit: int) -> list[Delayed]:
        due = select(delayed.c.id).where(delayed.c.scope == self.scope, delayed.c.due <= now)

        def work(conn: Connection) -> list[Delayed]:
            ids = list(conn.execute(due.order_by(delayed.c.due).limit(limit)).scalars())
            if not ids:
                return []
            conn.execute(update(delayed).where(delayed.c.id.in_(ids), delayed.c.due <= now)
                         .values(due=until, token=token))
            taken = select(delayed.c.id, delayed.c.queue, delayed.c.due, delayed.c.job_id, delayed.c.body)
            return [Delayed(*row) for row in conn.execute(
                taken.where(delayed.c.id.in_(ids), delayed.c.token == token).order_by(delayed.c.id))]

        return self._write("take due delayed jobs", work)

    def drop_delayed(self, ids: Sequence[str], token: str) -> None:
        if ids:
            statement = delete(delayed).where(delayed.c.id.in_(list(ids)), delayed.c.token == token)
            self._write("drop promoted delayed jobs", lambda conn: conn.execute(statement))

    def fail_delayed(self, id: str, token: str, job: FailedJob) -> bool:
        def work(conn: Connection) -> bool:
            gone = delete(delayed).where(delayed.c.id == id, delayed.c.token == token)
            if conn.execute(gone.execution_options(preserve_rowcount=True)).rowcount != 1:
                return False
            self._record(conn, job)
            return True

        return self._write("fail a delayed job", work)

    # -- counts -------------------------------------------------------------------------------

    def records_from(self, topic: str, starts: Mapping[int, int]) -> int:
        if not starts:
            return 0
        query = select(func.count()).select_from(leases).where(
            leases.c.scope == self.scope, leases.c.topic == topic,
            or_(*(and_(leases.c.part == p, leases.c.kafka_offset >= s) for p, s in starts.items())))
        return int(self._read("count read messages", lambda conn: conn.execute(query).scalar_one()))

    def reserved(self) -> dict[str, int]:
        query = (select(leases.c.queue, func.count()).where(leases.c.scope == self.scope, leases.c.state == LEASED)
                 .group_by(leases.c.queue))
        return {q: int(n) for q, n in self._read("count leases", lambda conn: conn.execute(query).all())}

    def delayed(self, now: float) -> dict[str, DelayedCounts]:
        query = (
            select(delayed.c.queue, func.sum(case((delayed.c.due <= now, 1), else_=0)),
                   func.sum(case((delayed.c.due > now, 1), else_=0)))
            .where(delayed.c.scope == self.scope).group_by(delayed.c.queue)
        )
        rows = self._read("count delayed jobs", lambda conn: conn.execute(query).all())
        return {q: DelayedCounts(int(due or 0), int(later or 0)) for q, due, later in rows}

    # -- the failed store ---------------------------------------------------------------------

    def retry_failed(self, id_or_all: str, now: float, refresh: Refresh, new_id: Callable[[], str]) -> int:
        pick = self.failures.pick(id_or_all, RETRY_BATCH)

        def work(conn: Connection) -> int:
            rows = conn.execute(pick).all()
            if not rows and id_or_all != "all":
                raise NoFailedJob(f"there is no failed job with id {id_or_all}")
            if rows:
                self._add(conn, [Delayed(new_id(), queue, now, job_id, refresh(body)) for job_id, queue, body in rows])
                self.failures.remove(conn, [row[0] for row in rows])
            return len(rows)

        total = 0
        while True:
            moved = self._write("retry failed jobs", work)
            total += moved
            if id_or_all != "all" or moved < RETRY_BATCH:
                return total

    def flush_failed(self) -> int:
        return self.failures.flush()

    def count_failed(self) -> int:
        return self.failures.count()

    def list_failed(self, limit: int, where: FailedFilter | None = None) -> list[FailedJob]:
        return self.failures.list(limit, where)

    def get_failed(self, job_id: str) -> FailedJob | None:
        return self.failures.get(job_id)
