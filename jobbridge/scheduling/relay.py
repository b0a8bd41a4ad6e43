"""Handing a step's firings to the store in batches, the next one planned while the last is in the store.

When thousands of entries fall due at the same instant (every ``every=60``
entry on the minute), a scheduler's step is two kinds of work: building each
tick's job (this process's CPU) and the store's round trips (the server's
time). Done one after the other, the last tick fires only after both sums.
`Relay` overlaps them: one batch at a time is in the store, in a thread of its
own, while the caller builds the next; batches still reach the store one by
one, in order, so nothing about what the store decides changes. The first
batch is small, so that the earliest ticks go out at once, and each next one
larger (`batch_sizes`), so that a large step pays few round trips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

from jobbridge.drivers.schedule_port import Fire, Firing

T = TypeVar("T")

#: what a batch's outcomes are handed to, in the caller's thread, in the order the batches were sent
Then = Callable[[list[Fire]], None]


def batch_sizes(first: int, most: int) -> Iterator[int]:
    """``first``, then each size twice the last, up to ``most`` (and ``most`` from then on)."""
    size = max(1, min(first, most))
    while True:
        yield size
        size = min(most, size * 2)


def batches(items: Sequence[T], first: int, most: int) -> Iterator[Sequence[T]]:
    """``items`` in consecutive runs of `batch_sizes`."""
    start, sizes = 0, batch_sizes(first, most)
    while start < len(items):
        size = next(sizes)
        yield items[start:start + size]
        start += size


class Relay:
    """Sends batches to ``fire`` one at a time; with ``threaded``, in a thread while the caller goes on.

    Use it as a context manager: leaving it waits for the batch in flight, so no
    store call outlives the step that made it (and a scheduler stopped or failed
    leaves nothing running). The first error of a batch is raised, by the next
    `send` or on leaving; batches after it are never sent.
    """

    def __init__(self, fire: Callable[[list[Firing]], list[Fire]], *, threaded: bool) -> None:
        self._fire = fire
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="jobbridge-fire") if threaded else None
        self._flight: tuple[Future[list[Fire]], Then] | None = None

    def send(self, firings: list[Firing], then: Then) -> None:
        """Fire ``firings`` after the batch in flight (whose ``then`` runs first); ``then`` gets their outcomes."""
        self._land()
        if not firings:
            return
        if self._pool is None:
            then(self._fire(firings))
            return
        self._flight = (self._pool.submit(self._fire, firings), then)

    def _land(self) -> None:
        """Wait for the batch in flight, and hand its outcomes on (its error raised here)."""
        flight, self._flight = self._flight, None
        if flight is not None:
            future, then = flight
            then(future.result())

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if error is None:
                self._land()
            elif self._flight is not None:  # the caller failed: the batch in flight still lands and is heard
                future, then = self._flight
                self._flight = None
                if future.exception() is None:
                    then(future.result())
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
