"""The database driver's leases after the claim: extended by their holder, reclaimed once they lapse.

An extend renews only rows still held under their receipt's token, so a worker
whose lease lapsed (and whose job another worker took) keeps nothing. A reclaim
hands lapsed rows back to the queue; every worker runs it, so it first looks,
without locks, whether any lease lapsed at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update
from sqlalchemy.sql.elements import ColumnElement

from jobbridge.drivers.database.schema import jobs
from jobbridge.envelope import Reservation

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

_RECLAIM = (
    update(jobs)
    .where(jobs.c.reserved_until <= bindparam("now"))
    .values(token=None, reserved_until=None, available_at=bindparam("due"))
)
# min() is read off the lease index's first entry on every dialect, whatever the planner's statistics
_EARLIEST_LEASE = select(func.min(jobs.c.reserved_until))


def _held(reservations: Sequence[Reservation]) -> ColumnElement[bool]:
    """Rows still held under the given receipts: one ``token = t AND id IN (...)`` per reserve call."""
    by_token: dict[str, list[str]] = {}
    for res in reservations:
        job_id, token = res.receipt
        by_token.setdefault(token, []).append(job_id)
    return or_(*(and_(jobs.c.token == token, jobs.c.id.in_(ids)) for token, ids in by_token.items()))


def extend(driver: DatabaseDriver, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
    """`Driver.extend`: the reservations still held, their leases now ``seconds`` from the server's now."""
    if not reservations:
        return []
    until = driver.clock.now() + seconds
    renew = update(jobs).where(_held(reservations)).values(reserved_until=until)

    def renewed(conn: Connection) -> set[tuple[Any, ...]]:
        if driver._returning:
            return {tuple(row) for row in conn.execute(renew.returning(jobs.c.id, jobs.c.token))}
        # The UPDATE keeps the rows it matched locked, so this reads exactly those.
        conn.execute(renew)
        found = conn.execute(select(jobs.c.id, jobs.c.token).where(_held(reservations)))
        return {tuple(row) for row in found}

    held = driver._write("extend reservations", renewed)
    return [dataclasses.replace(r, lease_until=until) for r in reservations if tuple(r.receipt) in held]


def reclaim_expired(driver: DatabaseDriver) -> int:
    """`Driver.reclaim_expired`: lapsed leases back to their queues, due at once; how many."""
    now = driver.clock.now()
    # Look first, without locks: usually nothing lapsed, and then no reclaim (run by every
    # worker) takes row locks that a claim in another transaction would have to wait for.
    with driver._read("look for lapsed reservations") as conn:
        earliest = conn.execute(_EARLIEST_LEASE).scalar()
    if earliest is None or earliest > now:
        return 0

    def reclaim(conn: Connection) -> int:
        # Each row is updated by one of several concurrent reclaims: the others
        # re-read it after the winner commits and find it no longer lapsed.
        count = int(conn.execute(_RECLAIM, {"now": now, "due": now}).rowcount)
        if count:
            driver._notify(conn, [""])
        return count

    return driver._write("reclaim lapsed reservations", reclaim)
