"""How many jobs the worker's loop reserves, and when it starts a batch it reserved.

**The window.** The loop reserves jobs for its free threads, plus a few ahead
while attempts are short: about `PREFETCH_MS` of work, never more than
`MAX_AHEAD` x concurrency jobs, none once attempts average `PREFETCH_MS` x 5.
It reserves again once the threads have worked off half of those, not all.

**The overlap.** On a driver whose combined call can run something while the
store works (``meanwhile`` of `jobbridge.drivers.base.AcknowledgingReserve`:
Redis, the database driver), the loop *holds back* the batch a call returned (`HeldBack`) and
starts it the moment its next call is on its way, so the threads run one batch
while the store serves the next. Without it the two are serial: the attempt threads keep the
GIL while their queue has work, so the loop gets to its next call only once
they have finished everything, and they then wait, idle, for the store's reply
(docs/benchmarks.md, "The store call and the attempts overlap"). Two batches
are then in hand at once, so the window is larger (`MAX_AHEAD_OVERLAPPING`) and
each call asks for half of it. A held-back batch never waits for anything else:
it is started before the loop waits, before any other reserve, and when the
worker drains, and a batch held back is held (leased and renewed) like any.
A batch with a rate-limited job is never held back: starting it takes the
limit's turns, a store call that must not be made from inside another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.drivers.base import AcknowledgingReserve
from jobbridge.envelope import Reservation

#: how much work (in attempt-milliseconds) the worker may reserve ahead of its threads
PREFETCH_MS = 20.0
#: never more than this many times ``concurrency`` jobs ahead
MAX_AHEAD = 7
#: the same, when the loop overlaps its store calls with the attempts: the batch running and the batch
#: reserved meanwhile are both in hand, and each call reserves half of the window
MAX_AHEAD_OVERLAPPING = 31


def room(size: int, held: int, avg_ms: float, *, overlapping: bool = False) -> int:
    """How many jobs to reserve now, with ``held`` jobs in hand that will need a thread and attempts
    averaging ``avg_ms``; may be negative (nothing to reserve)."""
    most = MAX_AHEAD_OVERLAPPING if overlapping else MAX_AHEAD
    ahead = int(size * min(most, PREFETCH_MS / avg_ms)) if avg_ms < PREFETCH_MS * 5 else 0
    # with jobs ahead, reserve again once the threads have worked half of them off, not all: the
    # next batch is asked for while they still run the rest
    wanted = 0 if ahead and held > size + ahead // 2 else size + ahead - held
    return min(wanted, (size + ahead + 1) // 2) if overlapping and ahead else wanted


class HeldBack:
    """The batch a combined call returned, held back until the loop's next store call is on its way.

    ``start`` hands a batch to the threads (through the rate gate). `start_now` is
    idempotent: the driver calls it once its request is written, and the loop
    again after the call whatever happened, and before it waits.
    """

    def __init__(self, start: Callable[[list[Reservation]], None]) -> None:
        self._start = start
        self.batch: list[Reservation] = []

    def __bool__(self) -> bool:
        return bool(self.batch)

    def hold(self, got: list[Reservation]) -> None:
        self.batch += got

    def start_now(self) -> None:
        got, self.batch = self.batch, []
        if got:
            self._start(got)

    def call(self, driver: AcknowledgingReserve, done: Sequence[Reservation], queues: Sequence[str],
             limit: int) -> list[Reservation]:
        """The combined call with the held-back batch started while the store works; started in any case."""
        try:
            return driver.acknowledge_and_reserve(done, queues, limit, self.start_now)
        finally:
            self.start_now()
