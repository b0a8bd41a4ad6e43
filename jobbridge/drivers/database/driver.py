"""`DatabaseDriver`: the reservation protocol on SQLAlchemy Core, for SQLite, PostgreSQL and MariaDB.

A reserve call writes one fresh token on every row it claims; the receipt is
``(id, token)``, and acknowledge, release, fail and extend touch a row only
while its token still matches. So a worker whose lease lapsed, and whose job
was reclaimed and handed to another, can no longer finish or keep that job.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Select,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session, scoped_session
from sqlalchemy.sql.elements import ColumnElement

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.database import failed, migrations
from jobbridge.drivers.database.claims import ClaimedRow, claim_for
from jobbridge.drivers.database.engine import POSTGRESQL, SQLITE, build_engine, describe, parse_url
from jobbridge.drivers.database.failures import translated
from jobbridge.drivers.database.locks import Locks
from jobbridge.drivers.database.schema import jobs
from jobbridge.envelope import Envelope, FailedJob, QueueCounts, Reservation, new_id, undecodable
from jobbridge.errors import PayloadDecodeError

if TYPE_CHECKING:
    from jobbridge.drivers.database.listen import Listener

_INSERT = insert(jobs)
_NOTIFY = text("SELECT pg_notify('jobbridge_jobs', q) FROM unnest(CAST(:queues AS text[])) AS q")
_IS_HELD = (jobs.c.id == bindparam("job_id")) & (jobs.c.token == bindparam("held_token"))
_RELEASE = update(jobs).where(_IS_HELD).values(token=None, reserved_until=None, available_at=bindparam("due"))
_FORGET = delete(jobs).where(_IS_HELD)
_RECLAIM = (
    update(jobs)
    .where(jobs.c.reserved_until <= bindparam("now"))
    .values(token=None, reserved_until=None, available_at=bindparam("due"))
)
_PENDING = select(func.count()).select_from(jobs).where(jobs.c.queue == bindparam("queue"))


def _held(reservations: Sequence[Reservation]) -> ColumnElement[bool]:
    """Rows still held under the given receipts: one ``token = t AND id IN (...)`` per reserve call."""
    by_token: dict[str, list[str]] = {}
    for res in reservations:
        job_id, token = res.receipt
        by_token.setdefault(token, []).append(job_id)
    return or_(*(and_(jobs.c.token == token, jobs.c.id.in_(ids)) for token, ids in by_token.items()))


class DatabaseDriver:
    """Jobs as rows of ``jobbridge_jobs``, claimed by a conditional UPDATE under a token."""

    def __init__(self, url: str, *, reservation: float = 60.0, clock: Clock = SYSTEM_CLOCK) -> None:
        self.url = parse_url(url)
        self.reservation = reservation
        self.clock = clock
        self.engine = build_engine(self.url)
        self.dialect: str = self.engine.dialect.name
        self.capabilities = Capabilities(
            is_deferred=True, survives_a_restart=True, needs_a_worker=True,
            may_lose_an_accepted_job=False, delayed_push=True, per_message_release=True,
            priorities=True, transactional_push=True, shared_locks=True,
            blocking_reserve=self.dialect == POSTGRESQL,
        )
        self._claim = claim_for(self.dialect)
        self._locks = Locks(self.dialect)
        self._returning = self.dialect != "mysql"
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()
        _after_fork_in_child(self)

    def __repr__(self) -> str:
        return f"<DatabaseDriver {self.describe()}>"

    # -- connections -------------------------------------------------------

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        """One transaction that writes (SQLite: ``BEGIN IMMEDIATE``), committed on success."""
        with translated(action), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        """A read-only look (SQLite: a deferred ``BEGIN``, so readers never queue behind writers)."""
        with translated(action), self.engine.connect() as conn:
            yield conn.execution_options(jobbridge_begin="BEGIN")

    def _notify(self, conn: Connection, queues: Sequence[str]) -> None:
        # Delivered by PostgreSQL when (and only if) this transaction commits.
        if self.dialect == POSTGRESQL and queues:
            conn.execute(_NOTIFY, {"queues": sorted(set(queues))})

    # -- push ---------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        if not envelopes:
            return
        rows = [
            {"id": env.id, "queue": env.queue, "name": env.name, "body": env.encode(),
             "attempts": env.attempts, "available_at": env.available_at, "created_at": env.created_at}
            for env in envelopes
        ]
        queues = [env.queue for env in envelopes] if self.dialect == POSTGRESQL else []
        if transaction is None:
            with self._write("push jobs") as conn:
                conn.execute(_INSERT, rows)
                self._notify(conn, queues)
            return
        conn = self._joined(transaction)
        with translated("push jobs in the caller's transaction"):
            conn.execute(_INSERT, rows)
            self._notify(conn, queues)

    def _joined(self, transaction: object) -> Connection:
        """The caller's connection, checked to be on this driver's kind of database."""
        if isinstance(transaction, Session | scoped_session):
            conn = transaction.connection()
        elif isinstance(transaction, Connection):
            conn = transaction
        else:
            raise TypeError(
                f"transaction= takes a SQLAlchemy Connection or Session, not {type(transaction).__name__}"
            )
        ours, theirs = self.dialect, conn.dialect.name
        same_file = ours != SQLITE or parse_url(str(conn.engine.url)).database == self.url.database
        if theirs != ours or not same_file:
            raise ValueError(
                f"transaction= is on {conn.engine.url.render_as_string()} but this driver stores jobs in "
                f"{self.describe()}: a push can join only a transaction on the driver's own database"
            )
        return conn

    # -- reserve ------------------------------------------------------------

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        if limit <= 0 or not queues:
            return []
        if wait <= 0 or self.dialect != POSTGRESQL:
            return self._reserve_now(queues, limit)
        return self._reserve_waiting(queues, limit, wait)

    def _reserve_now(self, queues: Sequence[str], limit: int) -> list[Reservation]:
        now = self.clock.now()
        until = now + self.reservation
        token = new_id()  # one token for the whole batch; the id tells its rows apart
        claimed: list[ClaimedRow] = []
        with self._write("reserve jobs") as conn:
            for queue in queues:
                claimed += self._claim(conn, queue=queue, limit=limit - len(claimed),
                                       token=token, now=now, until=until)
                if len(claimed) >= limit:
                    break
        return [_reservation(row, token, until, now) for row in claimed]

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
        if not reservations:
            return
        with self._write("acknowledge jobs") as conn:
            conn.execute(delete(jobs).where(_held(reservations)))

    def release(self, reservation: Reservation, delay: float) -> None:
        job_id, token = reservation.receipt
        with self._write("release a job") as conn:
            due = self.clock.now() + max(delay, 0.0)
            released = conn.execute(_RELEASE, {"job_id": job_id, "held_token": token, "due": due})
            if released.rowcount and delay <= 0:
                self._notify(conn, [reservation.envelope.queue])

    def fail(self, reservation: Reservation, error: str) -> None:
        job_id, token = reservation.receipt
        env = reservation.envelope
        with self._write("fail a job") as conn:
            if conn.execute(_FORGET, {"job_id": job_id, "held_token": token}).rowcount:
                failed.record(conn, FailedJob(
                    job_id, env.queue, env.name, env.attempts, error, self.clock.now(),
                    reservation.stored_body(),
                ))

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        if not reservations:
            return []
        until = self.clock.now() + seconds
        renew = update(jobs).where(_held(reservations)).values(reserved_until=until)
        with self._write("extend reservations") as conn:
            if self._returning:
                held = {tuple(row) for row in conn.execute(renew.returning(jobs.c.id, jobs.c.token))}
            else:
                # The UPDATE keeps the rows it matched locked, so this reads exactly those.
                conn.execute(renew)
                found = conn.execute(select(jobs.c.id, jobs.c.token).where(_held(reservations)))
                held = {tuple(row) for row in found}
        return [dataclasses.replace(r, lease_until=until) for r in reservations if tuple(r.receipt) in held]

    def reclaim_expired(self) -> int:
        now = self.clock.now()
        with self._write("reclaim lapsed reservations") as conn:
            # Each row is updated by one of several concurrent reclaims: the others
            # re-read it after the winner commits and find it no longer lapsed.
            count = conn.execute(_RECLAIM, {"now": now, "due": now}).rowcount
            if count:
                self._notify(conn, [""])
        return int(count)

    # -- the failed store and counts -----------------------------------------

    def failed_jobs(self, limit: int = 50) -> list[FailedJob]:
        with self._read("list failed jobs") as conn:
            return failed.newest(conn, limit)

    def retry_failed(self, id_or_all: str) -> int:
        total = 0
        while True:
            with self._write("retry failed jobs") as conn:
                queues = failed.retry_batch(conn, id_or_all, self.clock.now())
                self._notify(conn, queues)
            total += len(queues)
            if id_or_all != "all" or len(queues) < failed.RETRY_BATCH:
                return total

    def flush_failed(self) -> int:
        with self._write("flush failed jobs") as conn:
            return failed.flush(conn)

    def failed_count(self) -> int:
        with self._read("count failed jobs") as conn:
            return failed.count(conn)

    def pending_count(self, queue: str) -> int:
        with self._read("count pending jobs") as conn:
            return int(conn.execute(_PENDING, {"queue": queue}).scalar_one())

    def counts(self) -> list[QueueCounts]:
        with self._read("count jobs") as conn:
            rows = conn.execute(_counts_query(self.clock.now())).all()
        return [QueueCounts(q, int(total) - int(r) - int(d), int(d), int(r)) for q, total, r, d in rows]

    # -- locks, schema, life cycle -------------------------------------------

    def acquire_lock(self, key: str, owner: str, ttl: float) -> bool:
        now = self.clock.now()
        with self._write("take a unique lock") as conn:
            return self._locks.acquire(conn, key=key, owner=owner, now=now, until=now + ttl)

    def release_lock(self, key: str, owner: str) -> None:
        with self._write("release a unique lock") as conn:
            self._locks.release(conn, key=key, owner=owner)

    def migrate(self) -> None:
        with translated("migrate the jobbridge tables"):
            migrations.migrate(self.engine, self.clock.now())

    def describe(self) -> str:
        return describe(self.url)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.engine.dispose()


def _counts_query(now: float) -> Select[Any]:
    """Per queue: every row, the reserved ones, and the waiting ones not yet due."""
    reserved = func.sum(case((jobs.c.reserved_until.is_not(None), 1), else_=0))
    delayed = func.sum(case((and_(jobs.c.reserved_until.is_(None), jobs.c.available_at > now), 1), else_=0))
    return select(jobs.c.queue, func.count(), reserved, delayed).group_by(jobs.c.queue).order_by(jobs.c.queue)


def _reservation(row: ClaimedRow, token: str, until: float, now: float) -> Reservation:
    """The reservation for a claimed row; an undecodable body is handed out to be failed."""
    body = row.body if isinstance(row.body, bytes) else bytes(row.body)
    try:
        env = Envelope.decode(body)
    except PayloadDecodeError as exc:
        stand_in = undecodable(id=row.id, queue=row.queue, attempts=row.attempts, now=now)
        return Reservation(stand_in, (row.id, token), until, body=body, decode_error=str(exc))
    if env.attempts != row.attempts:
        env = env.replace(attempts=row.attempts)  # the column counts; the body keeps the pushed value
    return Reservation(env, (row.id, token), until)


def _after_fork_in_child(driver: DatabaseDriver) -> None:
    """A forked child must not share the parent's sockets: it starts with an empty pool and no listener."""
    ref = weakref.ref(driver)

    def reset() -> None:
        child = ref()
        if child is not None:
            child.engine.dispose(close=False)
            child._listener = None

    os.register_at_fork(after_in_child=reset)
