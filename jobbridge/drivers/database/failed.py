"""The failed store, ``jobbridge_failed_jobs``: what gave up, listed, retried and flushed.

A failed row keeps the job's id, so ``retry_failed`` puts the same job back
and the id a user saw in a log or an alert still finds it.

The failed store must take every outcome, or the worker that cannot store one
holds its whole batch: so a failed row's name and queue are cut to fit their
columns, its error text to `limits.ERROR_CHARS`, and its body is copied by
the server from the job's own row (`move`), never sent again by the client,
so a body as large or as odd as the jobs table took is taken here too.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Integer,
    LargeBinary,
    String,
    Text,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
)

from jobbridge.drivers.database.engine import SQLITE
from jobbridge.drivers.database.limits import fitted, fitted_error
from jobbridge.drivers.database.schema import failed_jobs, jobs
from jobbridge.drivers.database.types import TIME
from jobbridge.envelope import Envelope, FailedJob
from jobbridge.errors import NoFailedJob, PayloadDecodeError

#: how many failed rows ``retry_failed("all")`` moves per transaction
RETRY_BATCH = 500

_FORGET = delete(failed_jobs).where(failed_jobs.c.id == bindparam("job_id"))
_COUNT = select(func.count()).select_from(failed_jobs)
_NEWEST = (
    select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.attempts,
           failed_jobs.c.error, failed_jobs.c.failed_at, failed_jobs.c.body)
    .order_by(failed_jobs.c.failed_at.desc(), failed_jobs.c.id.desc())
    .limit(bindparam("limit"))
)
_PICK = select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.body)


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


def newest(conn: Connection, limit: int) -> list[FailedJob]:
    """The newest ``limit`` failures first."""
    return [FailedJob(*row) for row in conn.execute(_NEWEST, {"limit": limit})]


def count(conn: Connection) -> int:
    """How many failures the store holds."""
    return int(conn.execute(_COUNT).scalar_one())


def flush(conn: Connection) -> int:
    """Delete every failure; return how many there were."""
    return int(conn.execute(delete(failed_jobs)).rowcount)


def retry_batch(conn: Connection, id_or_all: str, now: float) -> list[str]:
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
