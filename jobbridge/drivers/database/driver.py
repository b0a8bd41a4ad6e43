"""`DatabaseDriver`: the reservation protocol on SQLAlchemy Core, for SQLite, PostgreSQL and MariaDB.

A reserve call writes one fresh token on every row it claims; the receipt is
``(id, token)``, and acknowledge, release, fail and extend touch a row only
while its token still matches. So a worker whose lease lapsed, and whose job
was reclaimed and handed to another, can no longer finish or keep that job.

Every deadline (a lease, a release's due time, a lock's expiry) is read off
the database server's clock (`server_clock`), so workers whose own clocks
disagree still agree on when a lease lapsed. No one row can stop a queue: a
body that does not decode, or an attempt count out of range, is handed out to
be failed (`jobbridge.envelope.reservation_from_body`), and the failed store
takes every outcome (`failed.move`). The failed store (``driver.failed``) and
the unique-job locks (``driver.locks``) are their own objects on the same engine
(`failed.FailedStore`, `locks.LockStore`); extending and reclaiming leases is
`leases`, and what lets a claim read the result store's cancellations, `cancellations`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Select, and_, bindparam, case, delete, exc, func, select, text, update

from jobbridge.clock import SYSTEM_CLOCK, Clock, offset_of
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.database import failed, leases, migrations, purge
from jobbridge.drivers.database.after_fork import reset_after_fork
from jobbridge.drivers.database.ages import DatabaseAges
from jobbridge.drivers.database.cancellations import cancellations_clock
from jobbridge.drivers.database.claim_marks import FromLastClaim
from jobbridge.drivers.database.claims import ClaimedRow, claim_for, claim_postgres, forget, reservation_of
from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL, build_engine, describe, hot_engine, parse_url
from jobbridge.drivers.database.failures import read_transaction, translated, write_transaction
from jobbridge.drivers.database.joined import joined_connection
from jobbridge.drivers.database.limits import encoded, max_message_bytes, packet_limit
from jobbridge.drivers.database.locks import LockStore
from jobbridge.drivers.database.notify import notify
from jobbridge.drivers.database.rate_buckets import RateBuckets
from jobbridge.drivers.database.schedules import DatabaseSchedules
from jobbridge.drivers.database.schema import jobs
from jobbridge.drivers.database.server_clock import server_clock
from jobbridge.drivers.database.settings import Timeouts
from jobbridge.drivers.database.throughput import DatabaseThroughput
from jobbridge.drivers.database.workers import DatabaseWorkers
from jobbridge.envelope import Envelope, Reservation, new_id
from jobbridge.store_reports import FailedJob, QueueCounts

if TYPE_CHECKING:
    from jobbridge.drivers.database.listen import Listener

T = TypeVar("T")
log = logging.getLogger("jobbridge.drivers.database")

_PUSHED = ("id", "queue", "name", "body", "attempts", "available_at", "created_at")
_IS_HELD = (jobs.c.id == bindparam("job_id")) & (jobs.c.token == bindparam("held_token"))
_RELEASE = update(jobs).where(_IS_HELD).values(token=None, reserved_until=None, available_at=bindparam("due"))
# a job that never started (its rate limit had no turn): back, and the claim's added attempt taken off
_HAND_BACK = update(jobs).where(_IS_HELD).values(
    token=None, reserved_until=None, available_at=bindparam("due"),
    attempts=case((jobs.c.attempts > 0, jobs.c.attempts - 1), else_=jobs.c.attempts))
_FORGET = delete(jobs).where(_IS_HELD)
# locks the held row (SQLite: the write lock is held already) until it is copied and deleted
_HOLDS = select(jobs.c.id).where(_IS_HELD).with_for_update()
_MAX_PACKET = text("SELECT @@max_allowed_packet")
#: pushes of this many rows or more go by COPY on PostgreSQL (`_copy`)
COPY_FROM = 100
_COPY = f"COPY {jobs.name} ({', '.join(_PUSHED)}) FROM STDIN"


def _insert_sql(paramstyle: str) -> str:
    """The push INSERT as the DBAPI's own SQL: a 20,000-row push skips SQLAlchemy's per-row work."""
    mark = "?" if paramstyle == "qmark" else "%s"
    return f"INSERT INTO {jobs.name} ({', '.join(_PUSHED)}) VALUES ({', '.join([mark] * len(_PUSHED))})"


def _copy(conn: Connection, statement: str, rows: list[tuple[Any, ...]]) -> None:
    """``rows`` by one ``COPY ... FROM STDIN`` on the connection's psycopg connection, in its transaction.

    A large push's rows, encoded by the client in C: a fifth of the client CPU of a
    pipelined executemany, and less of the server's time. An error is raised as
    SQLAlchemy raises the INSERT's, so callers (deadlock retries, translations) read it the same.
    """
    import psycopg  # the postgresql driver's client; only this driver's engines reach here

    raw: Any = conn.connection.driver_connection  # a psycopg.Connection
    try:
        with raw.cursor() as cur, cur.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
    except psycopg.Error as error:
        raise exc.DBAPIError.instance(statement, None, error, psycopg.Error) from error


class DatabaseDriver:
    """Jobs as rows of ``jobbridge_jobs``, claimed by a conditional UPDATE under a token."""

    def __init__(self, url: str, *, reservation: float = 60.0, clock: Clock = SYSTEM_CLOCK,
                 timeouts: Timeouts | None = None) -> None:
        self.url = parse_url(url)
        self.reservation = reservation
        self.engine = build_engine(self.url, timeouts)
        self.dialect: str = self.engine.dialect.name
        self.clock = server_clock(self.engine, self.dialect, clock)
        self.max_message_bytes = max_message_bytes(self.dialect)
        self.capabilities = Capabilities(
            is_deferred=True, survives_a_restart=True, needs_a_worker=True,
            may_lose_an_accepted_job=False, delayed_push=True, per_message_release=True,
            priorities=True, transactional_push=True,
            blocking_reserve=self.dialect == POSTGRESQL, max_message_bytes=self.max_message_bytes,
        )
        self.failed = failed.FailedStore(self.engine, self.dialect, self.clock)
        self.rate_buckets = RateBuckets(self.engine, self.dialect, self.clock)
        self.locks = LockStore(self.engine, self.dialect, self.clock, self._joined)
        self.schedules = DatabaseSchedules(self)
        self.workers = DatabaseWorkers(self)
        self.throughput = DatabaseThroughput(self)
        self.ages = DatabaseAges(self)
        # PostgreSQL's claims start after the last row claimed, past the dead index entries (`claim_marks`)
        self._claim = FromLastClaim(claim_postgres) if self.dialect == POSTGRESQL else claim_for(self.dialect)
        self._insert_sql = _insert_sql(self.engine.dialect.paramstyle)
        # the claims and acknowledgements: commits that need not wait for the disk (`hot_engine`)
        self._statements = hot_engine(self.url, timeouts, self.engine)
        self._copies = self.dialect == POSTGRESQL and self.engine.dialect.driver == "psycopg"
        self._returning = self.dialect != MYSQL  # MariaDB has no UPDATE ... RETURNING
        #: the result store's clock, once the claims read its cancellations (`read_cancellations`)
        self._cancellations: Clock | None = None
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()
        reset_after_fork(self, _forget_listener)

    def __repr__(self) -> str:
        return f"<DatabaseDriver {self.describe()}>"

    # -- connections -------------------------------------------------------

    def _write(self, action: str, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction that writes (SQLite: ``BEGIN IMMEDIATE``) and commit it.

        A transaction the server killed to break a deadlock (InnoDB's row locks
        between a claim and a reclaim, say) did nothing, so it is run again.
        """
        return write_transaction(self.engine, action, work)

    def _read(self, action: str) -> AbstractContextManager[Connection]:
        """A read-only look (SQLite: a deferred ``BEGIN``, so readers never queue behind writers)."""
        return read_transaction(self.engine, action)

    def _notify(self, conn: Connection, queues: Sequence[str]) -> None:
        # Delivered by PostgreSQL when (and only if) this transaction commits.
        notify(conn, self.dialect, queues)

    # -- push ---------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        if not envelopes:
            return
        # available_at was read off the dispatching process's clock: place it on the server's
        shift = offset_of(self.clock)
        limit = self.max_message_bytes
        rows = [(env.id, env.queue, env.name, encoded(env, limit, self.dialect), env.attempts,
                 env.available_at + shift, env.created_at) for env in envelopes]
        queues = [env.queue for env in envelopes] if self.dialect == POSTGRESQL else []

        def insert(conn: Connection) -> None:
            if self._copies and len(rows) >= COPY_FROM:
                _copy(conn, _COPY, rows)
            else:
                conn.exec_driver_sql(self._insert_sql, rows)
            self._notify(conn, queues)

        if transaction is None:
            self._write("push jobs", insert)
            return
        conn = self._joined(transaction)
        with translated("push jobs in the caller's transaction"):
            insert(conn)

    def _joined(self, transaction: object) -> Connection:
        """The caller's connection, checked to be on this driver's database."""
        return joined_connection(transaction, self.dialect, self.url, self.describe())

    # -- reserve ------------------------------------------------------------

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        if limit <= 0 or not queues:
            return []
        if wait <= 0 or self.dialect != POSTGRESQL:
            return self._reserve_now(queues, limit)
        return self._reserve_waiting(queues, limit, wait)

    def _reserve_now(self, queues: Sequence[str], limit: int, acknowledged: Sequence[Reservation] = (),
                     meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        """Claim up to ``limit``, after acknowledging ``acknowledged`` in the same transaction.

        On PostgreSQL each queue's claim is one statement run in autocommit, the
        acknowledgement folded into the first (`claims.claim_postgres`): its own
        transaction, one round trip. Elsewhere the whole is one transaction.
        """
        now = self.clock.now()
        until = now + self.reservation
        token = new_id()  # one token for the whole batch; the id tells its rows apart
        receipts = [r.receipt for r in acknowledged]
        cancelled_after = None if self._cancellations is None else self._cancellations.now()

        def claim(conn: Connection) -> list[ClaimedRow]:
            if meanwhile is not None:
                meanwhile()
            claimed: list[ClaimedRow] = []
            for at, queue in enumerate(queues):
                claimed += self._claim(conn, queue=queue, limit=limit - len(claimed), token=token, now=now,
                                       until=until, acknowledged=() if at else receipts,
                                       cancelled_after=cancelled_after)
                if len(claimed) >= limit:
                    break
            return claimed

        action = "acknowledge jobs and reserve more" if receipts else "reserve jobs"
        rows = write_transaction(self._statements, action, claim)
        return [reservation_of(row, token, until, now) for row in rows]

    def read_cancellations(self, store: object) -> bool:
        """`ReadsCancellations`: a database result store on this database is read by every claim from now on.

        Each claimed row then comes with whether its id is in ``jobbridge_cancelled``, judged by
        the store's own clock as `DatabaseResultStore.cancelled` judges it (`cancellations`).
        """
        self._cancellations = cancellations_clock(self.engine, self.url, store)
        return self._cancellations is not None

    def _reserve_waiting(self, queues: Sequence[str], limit: int, wait: float) -> list[Reservation]:
        listener = self._listen()
        deadline = time.monotonic() + wait
        # Mark before looking: a push between the look and the wait still wakes us.
        since = listener.mark()
        got = self._reserve_now(queues, limit)
        while not got:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not listener.wait(queues, since, remaining):
                return self._reserve_now(queues, limit)  # a delayed job may have come due meanwhile
            since = listener.mark()
            got = self._reserve_now(queues, limit)
        return got

    def _listen(self) -> Listener:
        with self._listener_lock:
            if self._listener is None:
                # imported here: psycopg is needed only by PostgreSQL users
                from jobbridge.drivers.database.listen import Listener, connect_like

                engine = self.engine
                self._listener = Listener(lambda: connect_like(engine))
            listener = self._listener
        listener.start()
        return listener

    # -- the outcome of an attempt -------------------------------------------

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        if reservations:
            receipts = [r.receipt for r in reservations]
            write_transaction(self._statements, "acknowledge jobs", lambda conn: forget(conn, receipts))

    def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        """`acknowledge` then a claim, in one transaction: one commit (one fsync) where there were two.

        See `jobbridge.drivers.base.AcknowledgingReserve`; the claim never waits for a push.
        ``meanwhile`` runs in the transaction just before its first statement: the worker's
        threads then run a batch while the database executes the claim and commits it, the
        DBAPI's waits being spent without the interpreter lock.
        """
        if limit <= 0 or not queues:
            self.acknowledge(reservations)
            return []
        return self._reserve_now(queues, limit, reservations, meanwhile)

    def release(self, reservation: Reservation, delay: float) -> None:
        job_id, token = reservation.receipt
        params = {"job_id": job_id, "held_token": token, "due": self.clock.now() + max(delay, 0.0)}

        def release(conn: Connection) -> None:
            if conn.execute(_RELEASE, params).rowcount and delay <= 0:
                self._notify(conn, [reservation.envelope.queue])

        self._write("release a job", release)

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        job_id, token = reservation.receipt
        params = {"job_id": job_id, "held_token": token, "due": self.clock.now() + max(delay, 0.0)}

        def hand_back(conn: Connection) -> None:
            if conn.execute(_HAND_BACK, params).rowcount and delay <= 0:
                self._notify(conn, [reservation.envelope.queue])

        self._write("hand back a job", hand_back)

    def fail(self, reservation: Reservation, error: str) -> None:
        job_id, token = reservation.receipt
        env = reservation.envelope
        # the body is copied from the job's row by the server (failed.move), never sent again
        record = FailedJob(job_id, env.queue, env.name, env.attempts, error, self.clock.now(), b"")
        held = {"job_id": job_id, "held_token": token}

        def move(conn: Connection) -> None:
            if conn.execute(_HOLDS, held).first() is not None:
                failed.move(conn, record, self.dialect)
                conn.execute(_FORGET, held)

        self._write("fail a job", move)

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        return leases.extend(self, reservations, seconds)

    def reclaim_expired(self) -> int:
        return leases.reclaim_expired(self)

    # -- counts, schema, life cycle ------------------------------------------

    def counts(self) -> list[QueueCounts]:
        with self._read("count jobs") as conn:
            rows = conn.execute(_counts_query(self.clock.now())).all()
        return [QueueCounts(q, int(total) - int(r) - int(d), int(d), int(r)) for q, total, r, d in rows]

    def purge(self, queues: Sequence[str]) -> int:
        """Delete the waiting rows of ``queues`` and their unique-job locks, in batches (`purge`)."""
        return purge.purge(self.engine, queues)

    def migrate(self) -> None:
        now = self.clock.now()
        with translated("migrate the jobbridge tables"):
            migrations.migrate(self.engine, now)

    def check(self) -> None:
        """On MariaDB, fit the size limit to the server's ``max_allowed_packet`` (warned when lower).

        `open` runs it too, before the first push: a dispatching process runs no
        worker, and a job the packet cannot carry must be refused at dispatch.
        """
        if self.dialect == MYSQL:
            with translated("read the server's max_allowed_packet"):
                self._fit_packet()

    def _fit_packet(self) -> None:
        """Lower the size limit to what this MariaDB server's ``max_allowed_packet`` lets through."""
        with self.engine.connect() as conn:
            packet = int(conn.execute(_MAX_PACKET).scalar_one())
        limit = packet_limit(packet)
        if limit < self.max_message_bytes:
            log.warning("this MariaDB server's max_allowed_packet is %d bytes: jobs are limited to %d bytes "
                        "encoded (raise it to 16 MiB for the database driver's 6 MiB)", packet, limit)
        self.max_message_bytes = limit
        self.capabilities = dataclasses.replace(self.capabilities, max_message_bytes=limit)

    def describe(self) -> str:
        return describe(self.url)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.engine.dispose()
        self._statements.dispose()


def _counts_query(now: float) -> Select[Any]:
    """Per queue: every row, the reserved ones, and the waiting ones not yet due."""
    reserved = func.sum(case((jobs.c.reserved_until.is_not(None), 1), else_=0))
    delayed = func.sum(case((and_(jobs.c.reserved_until.is_(None), jobs.c.available_at > now), 1), else_=0))
    return select(jobs.c.queue, func.count(), reserved, delayed).group_by(jobs.c.queue).order_by(jobs.c.queue)


def _forget_listener(driver: DatabaseDriver) -> None:
    """In a forked child: the parent's listener thread is not there; empty the claims' pool too."""
    driver._listener = None
    driver._statements.dispose(close=False)
