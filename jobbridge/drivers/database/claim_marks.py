"""PostgreSQL's claims start where this process's last claim of the queue ended, not at the index's start.

A claim reads the ready rows of a queue in ``(available_at, id)`` order from the
partial index ``jobbridge_jobs_unreserved``. Every row claimed since the table's
last vacuum leaves a dead entry at the front of that index (the claim's UPDATE
moves the row out of it; the acknowledgement deletes it), and PostgreSQL keeps
those entries until a vacuum, which autovacuum runs at most once a minute by
default. A claim from the start of the index walks every one of them: a worker
draining a backlog slows down as it goes (200,000 jobs: 10,028 and 11,109 jobs/s, against
15,145 and 17,825 with the claims below; docs/benchmarks.md, "Claims from the last claimed row").

So each claim of a queue remembers the last row it claimed (its mark), and the
next claim asks only for rows after it, which the index scan reaches at once.
Rows can fall behind a mark and still be due: a job dispatched with an ``at``
already past, a push from a process whose clock is behind, rows another worker
held when the mark passed them and then released without a commit. None is
lost or held for long:

- a mark is kept only after a claim that took all it asked for (a backlog); after
  a short one the next claim scans from the start, in one statement as before, so
  a queue with a trickle of jobs, or none, pays nothing for marks;
- a claim from a mark that finds fewer rows than it asked for claims the rest
  with a scan from the start, in the same call (once, as a backlog runs out);
- at most `FULL_SCAN_EVERY` seconds after the last scan from the start, the
  next claim scans from the start again, so while a backlog lasts a row behind
  the mark waits at most that long past its turn.

A mark is this process's hint, never shared and never stored: two threads
racing on one mark can only lengthen a scan or leave a row to the next scan
from the start. SQLite needs none of this: it removes a deleted row's index
entries at once. MariaDB keeps delete-marked entries until InnoDB's purge, but
only a locking read pays for them, so its claim finds the ready ids by a plain
read instead (`claims.claim_mysql`); a mark measured there gained nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from sqlalchemy import Connection

from jobbridge.drivers.database.claims import ClaimedRow, claim_order

#: the longest a claim goes on from a mark before it scans the queue from the start again (seconds)
FULL_SCAN_EVERY = 1.0


class MarkedClaim(Protocol):
    """`claims.claim_postgres`: a claim that may start after a mark."""

    def __call__(
        self, conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
        acknowledged: Sequence[tuple[str, str]] = (), cancelled_after: float | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[ClaimedRow]: ...


class _Mark(NamedTuple):
    available_at: float
    id: str
    #: when (monotonic) the queue was last scanned from the start
    scanned_whole: float


class FromLastClaim:
    """A `claims.Claim` that starts each queue's scan after the last row this process claimed (module docstring)."""

    def __init__(self, claim: MarkedClaim, *, monotonic: Callable[[], float] = time.monotonic,
                 full_scan_every: float = FULL_SCAN_EVERY) -> None:
        self.claim, self.monotonic, self.full_scan_every = claim, monotonic, full_scan_every
        self._marks: dict[str, _Mark] = {}

    def __call__(
        self, conn: Connection, *, queue: str, limit: int, token: str, now: float, until: float,
        acknowledged: Sequence[tuple[str, str]] = (), cancelled_after: float | None = None,
    ) -> list[ClaimedRow]:
        mark = self._marks.pop(queue, None)
        if mark is not None and self.monotonic() - mark.scanned_whole >= self.full_scan_every:
            mark = None
        after = None if mark is None else (mark.available_at, mark.id)
        rows = self.claim(conn, queue=queue, limit=limit, token=token, now=now, until=until,
                          acknowledged=acknowledged, cancelled_after=cancelled_after, after=after)
        if mark is not None and len(rows) < limit:  # rows may wait behind the mark: the rest from the start
            rows += self.claim(conn, queue=queue, limit=limit - len(rows), token=token, now=now, until=until,
                               cancelled_after=cancelled_after)
            rows.sort(key=claim_order)
            mark = None
        if len(rows) == limit:  # a backlog: the next claim starts after this one's last row
            scanned_whole = self.monotonic() if mark is None else mark.scanned_whole
            self._marks[queue] = _Mark(rows[-1].available_at, rows[-1].id, scanned_whole)
        return rows
