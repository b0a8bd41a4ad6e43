"""The failed store, ``jobbridge_failed_jobs``: what gave up, listed, retried and flushed.

A failed row keeps the job's id, so a retry (`FailedStore.retry`) puts the same
job back and the id a user saw in a log or an alert still finds it.

The failed store must take every outcome, or the worker that cannot store one
holds its whole batch: so a failed row's name and queue are cut to fit their
columns, its error text to `limits.ERROR_CHARS`, and its body is copied by
the server from the job's own row (`move`), never sent again by the client,
so a body as large or as odd as the jobs table took is taken here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Insert,
    Integer,
    LargeBinary,
    Select,
    String,
    Text,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
)

from jobbridge.clock import Clock
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database.engine import MYSQL, SQLITE
from jobbridge.drivers.database.error_search import error_contains
from jobbridge.drivers.database.failures import read_transaction, write_transaction
from jobbridge.drivers.database.limits import fitted, fitted_error
from jobbridge.drivers.database.notify import notify
from jobbridge.drivers.database.schema import failed_jobs, jobs
from jobbridge.drivers.database.types import TIME
from jobbridge.envelope import Envelope
from jobbridge.errors import NoFailedJob, PayloadDecodeError
from jobbridge.store_reports import FailedJob

#: how many failed rows ``retry("all")`` moves per transaction
RETRY_BATCH = 500
#: MariaDB: an error search reads this many of the newest failures in order before it scans the rest
RECENT = 5_000

_FORGET = delete(failed_jobs).where(failed_jobs.c.id == bindparam("job_id"))
_COUNT = select(func.count()).select_from(failed_jobs)
_ROW = select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.attempts,
             failed_jobs.c.error, failed_jobs.c.failed_at, failed_jobs.c.body)
_ONE = _ROW.where(failed_jobs.c.id == bindparam("job_id"))
_PICK = select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.body)
_NEWEST = (failed_jobs.c.failed_at.desc(), failed_jobs.c.id.desc())


def _move(body: ColumnElement[Any]) -> Insert:
    copied = select(jobs.c.id, bindparam("f_queue", type_=String()), bindparam("f_name", type_=String()),
                    bindparam("f_attempts", type_=Integer()), bindparam("f_error", type_=Text()),
                    bindparam("f_failed_at", type_=TIME), body).where(jobs.c.id == bindparam("job_id"))
    return insert(failed_jobs).from_select(
        ["id", "queue", "name", "attempts", "error", "failed_at", "body"], copied)


_MOVE = _move(jobs.c.body)
# SQLite keeps any type in any column: a TEXT body becomes the bytes every reader expects
_MOVE_SQLITE = _move(cast(jobs.c.body, LargeBinary))


def _fitted(failed: FailedJob) -> dict[str, object]:
    return {"job_id": failed.id, "f_queue": fitted(failed.queue), "f_name": fitted(failed.name),
            "f_attempts": failed.attempts, "f_error": fitted_error(failed.error), "f_failed_at": failed.failed_at}


def move(conn: Connection, failed: FailedJob, dialect: str) -> None:
    """Copy a job's row into the failed store, replacing an older failure of the same id.

    The caller holds the job's row (and deletes it after): the body is the
    one stored, copied by the server; ``failed.body`` is not sent.
    """
    conn.execute(_FORGET, {"job_id": failed.id})
    conn.execute(_MOVE_SQLITE if dialect == SQLITE else _MOVE, _fitted(failed))


class FailedStore:
    """The database driver's failed store, on the driver's engine; a retry wakes PostgreSQL's listeners."""

    def __init__(self, engine: Engine, dialect: str, clock: Clock) -> None:
        self.engine, self.dialect, self.clock = engine, dialect, clock

    def retry(self, id_or_all: str) -> int:
        """Back on its queue with the same id, in batches of `RETRY_BATCH` so no transaction grows unbounded."""
        now = self.clock.now()  # read before the transaction: the server's clock takes a connection of its own

        def retry(conn: Connection) -> list[str]:
            queues = _retry_batch(conn, id_or_all, now)
            notify(conn, self.dialect, queues)
            return queues

        total = 0
        while True:
            queues = write_transaction(self.engine, "retry failed jobs", retry)
            total += len(queues)
            if id_or_all != "all" or len(queues) < RETRY_BATCH:
                return total

    def flush(self) -> int:
        return write_transaction(self.engine, "flush failed jobs", _flush)

    def forget(self, job_ids: Sequence[str]) -> int:
        """Delete these failed jobs (`jobbridge.drivers.base.ForgettingFailedStore`)."""
        ids = list(job_ids)
        if not ids:
            return 0
        statement = delete(failed_jobs).where(failed_jobs.c.id.in_(ids))
        return int(write_transaction(self.engine, "delete failed jobs", lambda conn: conn.execute(statement).rowcount))

    def count(self) -> int:
        with read_transaction(self.engine, "count failed jobs") as conn:
            return _count(conn)

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        with read_transaction(self.engine, "list failed jobs") as conn:
            return _list(conn, limit, where or FailedFilter(), self.dialect)

    def get(self, job_id: str) -> FailedJob | None:
        with read_transaction(self.engine, "read a failed job") as conn:
            row = conn.execute(_ONE, {"job_id": job_id}).first()
        return None if row is None else FailedJob(*row)


def _list(conn: Connection, limit: int, where: FailedFilter, dialect: str) -> list[FailedJob]:
    """The newest ``limit`` failures first, filtered in the query: each filter has an index that
    ends in ``failed_at`` (`schema.failed_jobs`), so the newest matches are read off it in order;
    the error text, on PostgreSQL, a trigram index (`error_search`); on MariaDB, `_list_in_two`."""
    query = _filtered(_ROW, where, dialect)
    if dialect == MYSQL and where.error:
        return _list_in_two(conn, query, limit, where)
    return [FailedJob(*row) for row in conn.execute(query.order_by(*_NEWEST).limit(limit))]


def _filtered(query: Select[Any], where: FailedFilter, dialect: str) -> Select[Any]:
    if where.queue is not None:
        query = query.where(failed_jobs.c.queue == where.queue)
    if where.name is not None:
        query = query.where(failed_jobs.c.name == where.name)
    if where.since is not None:
        query = query.where(failed_jobs.c.failed_at >= where.since)
    if where.until is not None:
        query = query.where(failed_jobs.c.failed_at <= where.until)
    if where.error:
        query = query.where(error_contains(failed_jobs.c.error, where.error, dialect))
    return query


def _list_in_two(conn: Connection, query: Select[Any], limit: int, where: FailedFilter) -> list[FailedJob]:
    """MariaDB's error search: the newest `RECENT` failures in index order, then the older ones by a scan.

    Left to itself MariaDB reads the ``failed_at`` index backwards and looks each row up, which finds
    a common text at once but, for a rare one, looks up every row at random (twice the time of
    reading the table through). So: the failures at or after the `RECENT`-th newest one the other
    filters leave, in index order; then, if those hold fewer than ``limit`` matches, the older ones,
    without that index. The two parts do not overlap and together hold every row: exact.
    """
    others = _filtered(select(failed_jobs.c.failed_at), replace(where, error=None), MYSQL)
    boundary = conn.execute(others.order_by(*_NEWEST).offset(RECENT - 1).limit(1)).scalar()
    if boundary is None:  # fewer failures than that: the index order reads them all, and few
        return [FailedJob(*row) for row in conn.execute(query.order_by(*_NEWEST).limit(limit))]
    newest = [FailedJob(*row) for row in conn.execute(
        query.where(failed_jobs.c.failed_at >= boundary).order_by(*_NEWEST).limit(limit))]
    if len(newest) == limit:
        return newest
    older = query.where(failed_jobs.c.failed_at < boundary).with_hint(
        failed_jobs, "IGNORE INDEX (jobbridge_failed_jobs_failed_at)", "mysql")
    return newest + [FailedJob(*row) for row in conn.execute(
        older.order_by(*_NEWEST).limit(limit - len(newest)))]


def _count(conn: Connection) -> int:
    """How many failures the store holds."""
    return int(conn.execute(_COUNT).scalar_one())


def _flush(conn: Connection) -> int:
    """Delete every failure; return how many there were."""
    return int(conn.execute(delete(failed_jobs)).rowcount)


def _retry_batch(conn: Connection, id_or_all: str, now: float) -> list[str]:
    """Move one failed job, or up to `RETRY_BATCH` of all of them, back; return each one's queue.

    The failed rows are read ``FOR UPDATE`` (SQLite: under its write lock) so
    that two concurrent retries cannot both put the same job back.
    """
    query = _PICK.with_for_update()
    if id_or_all == "all":
        query = query.order_by(failed_jobs.c.id).limit(RETRY_BATCH)
    else:
        query = query.where(failed_jobs.c.id == id_or_all)
    rows = conn.execute(query).all()
    if not rows and id_or_all != "all":
        raise NoFailedJob(f"there is no failed job with id {id_or_all}")
    if not rows:
        return []
    conn.execute(insert(jobs), [_back_on_queue(row, now) for row in rows])
    conn.execute(delete(failed_jobs).where(failed_jobs.c.id.in_([row.id for row in rows])))
    return [row.queue for row in rows]


def _back_on_queue(row: Any, now: float) -> dict[str, Any]:
    # A fresh start: no attempts, due now, and no unique key, whose lock is long gone.
    body: bytes = row.body
    # an undecodable body goes back as it was, to be failed again by the worker that reads it
    with suppress(PayloadDecodeError):
        body = Envelope.decode(body).replace(attempts=0, available_at=now, unique_key=None).encode()
    return {
        "id": row.id, "queue": row.queue, "name": row.name, "body": body, "attempts": 0,
        "available_at": now, "created_at": now, "token": None, "reserved_until": None,
    }
