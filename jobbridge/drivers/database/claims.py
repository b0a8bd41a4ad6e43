"""The claim: how each dialect marks up to ``limit`` ready rows of one queue as reserved by a token.

Every claim sets ``token`` and ``reserved_until`` and adds one to ``attempts``
(unless the count is out of range: see `counted`) on rows that were not
reserved and are due, oldest ``available_at`` first, and returns them in that
order as `ClaimedRow`s. They differ in how they keep two workers from taking
the same row:

- SQLite: one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` inside
  the caller's ``BEGIN IMMEDIATE``, which holds the database's single write lock;
- PostgreSQL: one statement, a CTE selecting ``FOR UPDATE SKIP LOCKED`` feeding
  ``UPDATE ... RETURNING``, so concurrent claims pass each other's rows by;
- MariaDB/MySQL (no ``UPDATE ... RETURNING``): ``SELECT ... FOR UPDATE SKIP
  LOCKED`` then ``UPDATE`` of those ids, in the caller's transaction; the rows
  stay locked until it commits, so what the SELECT read is what was claimed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from sqlalchemy import ColumnElement, Connection, Integer, Select, and_, bindparam, case, select, update

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.limits import ATTEMPTS_CEILING, attempts_problem
from jobbridge.drivers.database.schema import jobs
from jobbridge.envelope import Reservation, raw_bytes, reservation_from_body, undecodable


class ClaimedRow(NamedTuple):
    """A row as reserve reads it back, ``attempts`` already counting this attempt."""

    id: str
    queue: str
    body: bytes
    attempts: int
    available_at: float


class Claim(Protocol):
    def __call__(
        self, conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
    ) -> list[ClaimedRow]: ...


_RETURNED = (jobs.c.id, jobs.c.queue, jobs.c.body, jobs.c.attempts, jobs.c.available_at)
# One row's count must never fail the claim of its whole queue ("integer out of range" on a
# 32-bit column): a count no dispatch could have stored is left as it is, to be failed as malformed.
_COUNT_IS_SANE = and_(jobs.c.attempts >= 0, jobs.c.attempts < ATTEMPTS_CEILING)
_MARK = {
    "token": bindparam("new_token"),
    "reserved_until": bindparam("lease_until"),
    "attempts": case((_COUNT_IS_SANE, jobs.c.attempts + 1), else_=jobs.c.attempts),
}


def counted(attempts: Any) -> Any:
    """What `_MARK` makes of a stored count, for the claim that reads it before marking (MariaDB)."""
    sane = isinstance(attempts, int) and 0 <= attempts < ATTEMPTS_CEILING
    return attempts + 1 if sane else attempts


def _ready(*columns: ColumnElement[Any]) -> Select[Any]:
    """The due, unreserved rows of one queue, in the order they are handed out."""
    return (
        select(*(columns or (jobs.c.id,)))
        .where(
            jobs.c.queue == bindparam("in_queue"),
            jobs.c.reserved_until.is_(None),
            jobs.c.available_at <= bindparam("due_by"),
        )
        .order_by(jobs.c.available_at, jobs.c.id)
        .limit(bindparam("batch", type_=Integer))
    )


def _in_order(rows: Iterable[Any]) -> list[ClaimedRow]:
    # RETURNING promises no order: restore the one the claim chose.
    claimed = [ClaimedRow(*row) for row in rows]
    claimed.sort(key=lambda row: (row.available_at, row.id))
    return claimed


_SQLITE_CLAIM = update(jobs).where(jobs.c.id.in_(_ready())).values(**_MARK).returning(*_RETURNED)


def claim_sqlite(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
) -> list[ClaimedRow]:
    """Claim under SQLite's write lock (the caller began with ``BEGIN IMMEDIATE``)."""
    params = {"in_queue": queue, "due_by": now, "batch": limit, "new_token": token, "lease_until": until}
    return _in_order(conn.execute(_SQLITE_CLAIM, params))


_PICKED = _ready().with_for_update(skip_locked=True).cte("picked")
_POSTGRES_CLAIM = update(jobs).where(jobs.c.id == _PICKED.c.id).values(**_MARK).returning(*_RETURNED)


def claim_postgres(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
) -> list[ClaimedRow]:
    """Claim in one statement; rows another transaction has locked are skipped, never waited on."""
    params = {"in_queue": queue, "due_by": now, "batch": limit, "new_token": token, "lease_until": until}
    return _in_order(conn.execute(_POSTGRES_CLAIM, params))


_MYSQL_PICK = _ready(*_RETURNED).with_for_update(skip_locked=True)
_MYSQL_MARK = update(jobs).where(jobs.c.id.in_(bindparam("ids", expanding=True))).values(**_MARK)


def claim_mysql(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
) -> list[ClaimedRow]:
    """Lock the rows, then mark them; the lock lasts until the caller's transaction commits."""
    picked = conn.execute(_MYSQL_PICK, {"in_queue": queue, "due_by": now, "batch": limit}).all()
    if not picked:
        return []
    ids = [row[0] for row in picked]
    conn.execute(_MYSQL_MARK, {"ids": ids, "new_token": token, "lease_until": until})
    return [ClaimedRow(row[0], row[1], row[2], counted(row[3]), row[4]) for row in picked]


CLAIMS: dict[str, Claim] = {MYSQL: claim_mysql, POSTGRESQL: claim_postgres}


def claim_for(dialect: str) -> Claim:
    """The claim the dialect named by SQLAlchemy (``sqlite``, ``postgresql``, ``mysql``) uses."""
    return CLAIMS.get(dialect, claim_sqlite)


def reservation_of(row: ClaimedRow, token: str, until: float, now: float) -> Reservation:
    """What a claimed row is handed out as; an undecodable body or a count out of range, to be failed.

    Never raises: one row that cannot become a job must not fail the claim of
    the rows beside it (they are already marked as reserved by this token).
    """
    receipt = (row.id, token)
    problem = attempts_problem(row.attempts)
    if problem is not None:
        attempts = row.attempts if isinstance(row.attempts, int) else 1
        stand_in = undecodable(id=str(row.id), queue=str(row.queue), attempts=attempts, now=now)
        return Reservation(stand_in, receipt, until, body=raw_bytes(row.body), decode_error=problem)
    # the column counts attempts; the body keeps the value it was pushed with
    return reservation_from_body(row.body, receipt=receipt, lease_until=until, now=now, id_hint=row.id,
                                 queue_hint=row.queue, attempts=row.attempts)
