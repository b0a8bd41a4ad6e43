"""Where jobbridge reads the time: one injectable clock, so tests fix it instead of sleeping.

Leases are deadlines that every worker compares, so they must be read off one
clock that all of them share. A worker's own wall clock is not that clock: a
VM resumed from pause, or a host without NTP, can be a minute out, and a worker
a minute ahead sees every other worker's lease as lapsed and runs its job
again. So a driver that stores deadlines reads the time as its *store* tells
it (`StoreClock`: the server's clock, sampled now and then and carried forward
by this process's monotonic clock), unless a test injected a clock of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("jobbridge.clock")


class Clock(Protocol):
    """Wall-clock seconds since the epoch, as a float."""

    def now(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()


SYSTEM_CLOCK = SystemClock()

#: how often a `StoreClock` samples the server's time again (the monotonic clock carries it between)
RESYNC_SECONDS = 30.0
#: after a failed sample, how long before the next try (meanwhile the last good sample is carried forward)
RETRY_SECONDS = 1.0


class StoreClock:
    """The store's clock: ``read()`` (the server's epoch seconds) sampled, then carried by ``time.monotonic``.

    A sample is taken at the first ``now()`` and again every `RESYNC_SECONDS`;
    it is placed at the midpoint of its round trip, so the error is at most half
    a round trip plus the monotonic clock's drift over one resync period (well
    under a millisecond on a healthy host). This process's wall clock is never
    read for a deadline: however far it is off, every worker's deadlines agree.

    Until a first sample succeeds (the store is down at start), the local wall
    clock stands in, and every call tries again at most once a `RETRY_SECONDS`.
    """

    def __init__(self, read: Callable[[], float], *, resync: float = RESYNC_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._read = read
        self._resync = resync
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._base: float | None = None  # the server's time at monotonic instant self._at
        self._at = 0.0
        self._next_sample = float("-inf")

    def now(self) -> float:
        mono = self._monotonic()
        if mono >= self._next_sample:
            self._sample(mono)
        base = self._base
        if base is None:
            return self._wall()
        return base + (mono - self._at)

    def offset(self) -> float:
        """How far the store's clock is ahead of this process's wall clock (seconds, may be negative)."""
        return self.now() - self._wall()

    def _sample(self, mono: float) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is sampling; carry the last sample meanwhile
        try:
            if mono < self._next_sample:
                return
            before = self._monotonic()
            try:
                server = float(self._read())
            except Exception as exc:  # a sample is best effort: the store call that follows reports the outage
                self._next_sample = self._monotonic() + RETRY_SECONDS
                log.debug("could not read the store's clock (%s); carrying the last sample", exc)
                return
            after = self._monotonic()
            self._base, self._at = server, (before + after) / 2
            self._next_sample = after + self._resync
        finally:
            self._lock.release()


def store_clock(clock: Clock, read: Callable[[], float]) -> Clock:
    """The clock a driver judges leases by: the store's own, unless a test injected a clock of its own."""
    return StoreClock(read) if isinstance(clock, SystemClock) else clock


def offset_of(clock: Clock) -> float:
    """Seconds to add to a time read off this process's wall clock to place it on ``clock``."""
    return clock.offset() if isinstance(clock, StoreClock) else 0.0
