"""Waking ``wait``: who in this process waits for which id, and PostgreSQL's LISTEN thread that wakes them.

`Wakeups` is a tick counter. A waiter takes a `Wakeups.mark` *before* it reads
the record; a wake-up for its id (or for everyone) after that mark makes
`Wakeups.wait` return at once, so a store that lands between the read and
the wait is never slept through. Only ids someone waits for are remembered.

`NotifyListener` holds one autocommit connection that LISTENs on
``jobbridge_results``; a store of a ready record sends ``NOTIFY`` with the id in
its own transaction, so the notification arrives when the record is visible.
Notifications sent while the connection is down are lost, so after every
reconnect everybody is woken to read their record again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

CHANNEL = "jobbridge_results"
#: how often a quiet LISTEN connection is checked to be alive
HEALTH_CHECK = 30.0
_POLL = 0.5
_MAX_BACKOFF = 5.0

log = logging.getLogger("jobbridge.results")


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


class NotifyListener:
    """A daemon thread reading notifications on `CHANNEL` and turning them into `Wakeups.wake` calls."""

    def __init__(self, connect: Callable[[], Connection], wakeups: Wakeups) -> None:
        self._connect = connect  # an autocommit connection, so LISTEN takes effect at once
        self._wakeups = wakeups
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """LISTEN from now on (idempotent). Once it returns, no later notification is missed."""
        with self._start_lock:
            if self._thread is not None:
                return
            conn = self._open()  # raises: the caller polls instead
            self._thread = threading.Thread(target=self._run, args=(conn,), name="jobbridge-results-listen",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_POLL * 4)

    def _open(self) -> Connection:
        conn = self._connect()
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _run(self, conn: Connection | None) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            if conn is None:
                try:
                    conn = self._open()
                except Exception as error:
                    log.warning("jobbridge results LISTEN reconnect failed: %s", error)
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF)
                    continue
                backoff = 0.1
                self._wakeups.wake_everyone()  # stores while we were away notified nobody
            try:
                self._serve(conn)
            except Exception as error:
                log.warning("jobbridge results LISTEN connection lost (%s); reconnecting", error)
                self._wakeups.wake_everyone()
            conn.close()
            conn = None

    def _serve(self, conn: Connection) -> None:
        checked = time.monotonic()
        while not self._stop.is_set():
            for notify in conn.notifies(timeout=_POLL):
                self._wakeups.wake(notify.payload)
            if time.monotonic() - checked > HEALTH_CHECK:
                conn.execute("SELECT 1")  # a dead peer shows up here, not as a quiet socket
                checked = time.monotonic()
