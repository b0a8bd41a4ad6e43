"""The failed store, ``jobbridge_failed_jobs``: what gave up, listed, retried and flushed.

A failed row keeps the job's id, so ``retry_failed`` puts the same job back
and the id a user saw in a log or an alert still finds it.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select

from jobbridge.drivers.database.schema import failed_jobs, jobs
from jobbridge.envelope import Envelope, FailedJob
from jobbridge.errors import NoFailedJob, PayloadDecodeError

#: how many failed rows ``retry_failed("all")`` moves per transaction
RETRY_BATCH = 500

_FORGET = delete(failed_jobs).where(failed_jobs.c.id == bindparam("job_id"))
_RECORD = insert(failed_jobs)
_COUNT = select(func.count()).select_from(failed_jobs)
_NEWEST = (
    select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.attempts,
           failed_jobs.c.error, failed_jobs.c.failed_at, failed_jobs.c.body)
    .order_by(failed_jobs.c.failed_at.desc(), failed_jobs.c.id.desc())
    .limit(bindparam("limit"))
)
_PICK = select(failed_jobs.c.id, failed_jobs.c.queue, failed_jobs.c.name, failed_jobs.c.body)


def record(conn: Connection, failed: FailedJob) -> None:
    """Store one failed job, replacing an older failure of the same id."""
    conn.execute(_FORGET, {"job_id": failed.id})
    conn.execute(_RECORD, {
        "id": failed.id, "queue": failed.queue, "name": failed.name, "attempts": failed.attempts,
        "error": failed.error, "failed_at": failed.failed_at, "body": failed.body,
    })


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
