"""The claim: how each dialect marks up to ``limit`` ready rows of one queue as reserved by a token.

Every claim sets ``token`` and ``reserved_until`` and adds one to ``attempts``
(unless the count is out of range: see `counted`) on rows that were not
reserved and are due, oldest ``available_at`` first, and returns them in that
order as `ClaimedRow`s (the SQL itself is in `hot_sql`). They differ in how they keep two workers from taking
the same row:

- SQLite: one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` inside
  the caller's ``BEGIN IMMEDIATE``, which holds the database's single write lock;
- PostgreSQL: one statement, a CTE selecting ``FOR UPDATE SKIP LOCKED`` feeding
  ``UPDATE ... RETURNING``, so concurrent claims pass each other's rows by;
- MariaDB/MySQL (no ``UPDATE ... RETURNING``): a plain read of the ready ids,
  ``SELECT ... FOR UPDATE SKIP LOCKED`` of those rows by primary key, then
  ``UPDATE`` of those ids, in the caller's transaction; the rows stay locked
  until it commits, so what the locking SELECT read is what was claimed.

Given ``cancelled_after`` (the result store's now, for a driver that reads its
cancellations: `jobbridge.drivers.base.ReadsCancellations`), each statement also
reads whether the row's id is cancelled, and `reservation_of` marks it so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection

from jobbridge.drivers.database import hot_sql
from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.limits import ATTEMPTS_CEILING, attempts_problem
from jobbridge.envelope import Reservation, raw_bytes, reservation_as_stored, reservation_from_body, undecodable


class ClaimedRow(NamedTuple):
    """A row as reserve reads it back, ``attempts`` already counting this attempt."""

    id: str
    queue: str
    body: bytes
    attempts: int
    available_at: float
    #: the result store had cancelled the job (read only when the claim was given ``cancelled_after``)
    cancelled: bool = False


class Claim(Protocol):
    """Claim up to ``limit`` rows of ``queue``, having first deleted the rows held under ``acknowledged``.

    ``cancelled_after``: read each row's cancellation too, in force while it expires after this time.
    """

    def __call__(
        self, conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
        acknowledged: Sequence[tuple[str, str]] = (), cancelled_after: float | None = None,
    ) -> list[ClaimedRow]: ...


def counted(attempts: Any) -> Any:
    """What the claim's SET makes of a stored count (`hot_sql`), for the claim that reads it before marking (MariaDB).

    One row's count must never fail the claim of its whole queue ("integer out of range" on a 32-bit
    column): a count no dispatch could have stored is left as it is, to be failed as malformed.
    """
    sane = isinstance(attempts, int) and 0 <= attempts < ATTEMPTS_CEILING
    return attempts + 1 if sane else attempts


def claim_order(row: ClaimedRow) -> tuple[float, str]:
    """The order a claim takes rows in: oldest ``available_at`` first, then by id."""
    return row.available_at, row.id


def _in_order(rows: Iterable[Any]) -> list[ClaimedRow]:
    # RETURNING promises no order: restore the one the claim chose.
    claimed = [ClaimedRow(*row) for row in rows]
    claimed.sort(key=claim_order)
    return claimed


Receipts = Sequence[tuple[str, str]]


def forget(conn: Connection, receipts: Receipts) -> None:
    """Delete the rows still held under ``receipts`` (acknowledge them), in the caller's transaction."""
    dialect = conn.dialect
    for sql, params in hot_sql.forget_statements(dialect.name, dialect.paramstyle, receipts):
        conn.exec_driver_sql(sql, params)


def claim_sqlite(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float, acknowledged: Receipts = (),
    cancelled_after: float | None = None,
) -> list[ClaimedRow]:
    """Claim under SQLite's write lock (the caller began with ``BEGIN IMMEDIATE``), after the acknowledgement."""
    forget(conn, acknowledged)
    if cancelled_after is None:
        return _in_order(conn.exec_driver_sql(hot_sql.SQLITE_CLAIM, (token, until, queue, now, limit)))
    params = (token, until, queue, now, limit, cancelled_after)
    return _in_order(conn.exec_driver_sql(hot_sql.SQLITE_CLAIM_CANCELS, params))


def claim_postgres(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float, acknowledged: Receipts = (),
    cancelled_after: float | None = None, after: tuple[float, str] | None = None,
) -> list[ClaimedRow]:
    """Claim in one statement, the acknowledgement folded in; rows another transaction has locked are skipped.

    The driver runs it in autocommit (`DatabaseDriver._reserve_now`): the statement is its own transaction.
    ``after``: only rows after this ``(available_at, id)`` in claim order (`claim_marks` says why).
    """
    claim: tuple[object, ...] = (queue, now, *(after or ()), limit, token, until)
    if cancelled_after is not None:
        claim = (*claim, cancelled_after)
    sql = hot_sql.postgres_claim(forget=bool(acknowledged), cancels=cancelled_after is not None,
                                 after_mark=after is not None)
    if acknowledged:
        claim = (*hot_sql.receipt_arrays(acknowledged), *claim)
    return _in_order(conn.exec_driver_sql(sql, claim))


def claim_mysql(
    conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float, acknowledged: Receipts = (),
    cancelled_after: float | None = None,
) -> list[ClaimedRow]:
    """After the acknowledgement, lock the rows, then mark them; the lock lasts until the transaction commits.

    The rows to lock are found by a plain read and locked by primary key (`hot_sql.mysql_lock` says why);
    when another claim held some of them, the rest come from a locking read of the ready rows, as many as
    the first lock came short, after this claim's own rows are marked (so it passes over them).
    """
    forget(conn, acknowledged)
    ready = [row[0] for row in conn.exec_driver_sql(hot_sql.MYSQL_READY_IDS, (queue, now, limit))]
    if not ready:
        return []
    cancels = () if cancelled_after is None else (cancelled_after,)
    locked = conn.exec_driver_sql(hot_sql.mysql_lock(len(ready), bool(cancels)), (*cancels, *ready, queue, now))
    claimed = _mark_claimed(conn, locked.all(), token, until)
    if len(claimed) < len(ready):
        sql = hot_sql.MYSQL_PICK_CANCELS if cancels else hot_sql.MYSQL_PICK
        picked = conn.exec_driver_sql(sql, (*cancels, queue, now, limit - len(claimed))).all()
        claimed += _mark_claimed(conn, picked, token, until)
    claimed.sort(key=claim_order)
    return claimed


def _mark_claimed(conn: Connection, picked: Sequence[Any], token: str, until: float) -> list[ClaimedRow]:
    """Mark the locked rows ``picked`` as claimed under ``token``, and return them as `ClaimedRow`s, their
    counts as the marking made them (`counted`)."""
    if not picked:
        return []
    conn.exec_driver_sql(hot_sql.mysql_mark(len(picked)), (token, until, *(row[0] for row in picked)))
    return [ClaimedRow(row[0], row[1], row[2], counted(row[3]), row[4], *row[5:]) for row in picked]


CLAIMS: dict[str, Claim] = {MYSQL: claim_mysql, POSTGRESQL: claim_postgres}


def claim_for(dialect: str) -> Claim:
    """The claim the dialect named by SQLAlchemy (``sqlite``, ``postgresql``, ``mysql``) uses."""
    return CLAIMS.get(dialect, claim_sqlite)


def reservation_of(row: ClaimedRow, token: str, until: float, now: float) -> Reservation:
    """What a claimed row is handed out as; an undecodable body or a count out of range, to be failed.

    Never raises: one row that cannot become a job must not fail the claim of
    the rows beside it (they are already marked as reserved by this token).
    """
    made = _reservation_of(row, token, until, now)
    return dataclasses.replace(made, cancelled=True) if row.cancelled else made


def _reservation_of(row: ClaimedRow, token: str, until: float, now: float) -> Reservation:
    receipt = (row.id, token)
    attempts = row.attempts
    if type(attempts) is int and 1 <= attempts < ATTEMPTS_CEILING:  # `attempts_problem` finds none; the claim counted
        made = reservation_as_stored(row.body, receipt, until, attempts)
        if made is not None:  # the body as dispatch stored it; any other goes the long way below
            return made
    problem = attempts_problem(row.attempts)
    if problem is not None:
        attempts = row.attempts if isinstance(row.attempts, int) else 1
        stand_in = undecodable(id=str(row.id), queue=str(row.queue), attempts=attempts, now=now)
        return Reservation(stand_in, receipt, until, body=raw_bytes(row.body), decode_error=problem)
    # the column counts attempts; the body keeps the value it was pushed with
    return reservation_from_body(row.body, receipt=receipt, lease_until=until, now=now, id_hint=row.id,
                                 queue_hint=row.queue, attempts=row.attempts)
