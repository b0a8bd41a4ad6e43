"""Waking ``wait``: who in this process waits for which id, and PostgreSQL's LISTEN thread that wakes them.

`Wakeups` is a tick counter. A waiter takes a `Wakeups.mark` *before* it reads
the record; a wake-up for its id (or for everyone) after that mark makes
`Wakeups.wait` return at once, so a store that lands between the read and
the wait is never slept through. Only ids someone waits for are remembered.

On PostgreSQL, the database driver's `ListenThread` LISTENs on
``jobbridge_results`` and calls `Wakeups.wake` with each id; a store of a ready
record sends ``NOTIFY`` with the id in its own transaction, so the notification
arrives when the record is visible. Notifications sent while the connection is
down are lost, so after every reconnect everybody is woken
(`Wakeups.wake_everyone`) to read their record again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

CHANNEL = "jobbridge_results"


class Wakeups:
    """Wake-up ticks per watched id, under one condition variable."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._tick = 0
        self._everyone = 0
        self._last: dict[str, int] = {}
        self._watchers: dict[str, int] = {}

    @contextmanager
    def watching(self, id: str) -> Iterator[None]:
        """Remember wake-ups for ``id`` while the block runs."""
        with self._cond:
            self._watchers[id] = self._watchers.get(id, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._watchers[id] -= 1
                if not self._watchers[id]:
                    del self._watchers[id]
                    self._last.pop(id, None)

    def mark(self) -> int:
        """Where the ticks stand: take it before reading the record."""
        with self._cond:
            return self._tick

    def wait(self, id: str, since: int, timeout: float) -> bool:
        """Sleep until ``id`` (or everyone) is woken after ``since``; False when ``timeout`` passed."""
        with self._cond:
            return self._cond.wait_for(lambda: max(self._last.get(id, 0), self._everyone) > since, timeout)

    def wake(self, id: str) -> None:
        with self._cond:
            if id in self._watchers:
                self._tick += 1
                self._last[id] = self._tick
                self._cond.notify_all()

    def wake_everyone(self) -> None:
        with self._cond:
            self._tick += 1
            self._everyone = self._tick
            self._cond.notify_all()
