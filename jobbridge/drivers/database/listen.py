"""PostgreSQL's wake-up call: one dedicated LISTEN connection per driver, read by a daemon thread.

``push`` sends ``NOTIFY jobbridge_jobs, '<queue>'`` in the transaction that
stores the jobs, so the notification arrives exactly when they become visible.
The thread counts notifications per queue; ``reserve(wait=...)`` sleeps on a
condition until one arrives for a queue it takes (or the wait runs out).
Notifications sent while the connection is down are lost, so after every
reconnect the thread wakes all waiters to look at the table again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg
from sqlalchemy import Engine

from jobbridge.errors import DriverUnavailable

CHANNEL = "jobbridge_jobs"
#: how often the thread checks a quiet connection is still alive
HEALTH_CHECK = 30.0
_POLL = 0.5
_MAX_BACKOFF = 5.0

log = logging.getLogger("jobbridge.drivers.database")

Connect = Callable[[], "psycopg.Connection[Any]"]


def connect_like(engine: Engine) -> psycopg.Connection[Any]:
    """An autocommit psycopg connection of the engine's own, taken out of its pool for good.

    Taken from the engine so that it is opened exactly as the engine's are: the same
    URL, its connect timeout and its statement timeout (`jobbridge.drivers.database.bounds`).
    A failure to open it is psycopg's own error (the pool does not wrap it).
    """
    pooled = engine.raw_connection()
    pooled.detach()
    conn = cast("psycopg.Connection[Any]", pooled.dbapi_connection)
    conn.autocommit = True
    return conn


class ListenThread:
    """A daemon thread holding one LISTEN connection on ``channel``, reconnecting with backoff.

    Each notification's payload goes to ``on_payload``. Notifications sent while the
    connection is down are lost, so after every gap (a lost connection, a reconnect)
    ``on_gap`` runs: its owner wakes whoever might be owed one.
    """

    def __init__(self, connect: Connect, channel: str, on_payload: Callable[[str], None],
                 on_gap: Callable[[], None], name: str) -> None:
        self._connect = connect
        self._channel = channel
        self._on_payload = on_payload
        self._on_gap = on_gap
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Listen from now on (idempotent); `DriverUnavailable` if the first connection fails.

        Once it returns, no later notification is missed.
        """
        with self._start_lock:
            if self._thread is not None:
                return
            conn = self._open()
            self._thread = threading.Thread(target=self._run, args=(conn,), name=self._name, daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread; it closes its connection within one poll interval."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_POLL * 4)

    def _open(self) -> psycopg.Connection[Any]:
        try:
            conn = self._connect()
        except psycopg.Error as error:
            raise DriverUnavailable(f"cannot open the LISTEN connection: {error}") from error
        try:
            conn.execute(f"LISTEN {self._channel}")
        except psycopg.Error as error:
            conn.close()
            raise DriverUnavailable(f"cannot LISTEN on {self._channel}: {error}") from error
        return conn

    def _run(self, conn: psycopg.Connection[Any] | None) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            if conn is None:
                try:
                    conn = self._open()
                except DriverUnavailable as error:
                    log.warning("%s: LISTEN reconnect failed: %s", self._name, error.__cause__)
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF)
                    continue
                backoff = 0.1
                self._on_gap()  # what was sent while we were away notified nobody
            try:
                self._serve(conn)
            except psycopg.Error as error:
                log.warning("%s: LISTEN connection lost (%s); reconnecting", self._name, error)
            conn.close()
            conn = None
            self._on_gap()  # a waiter may be owed a notification that went down with the connection

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        checked = time.monotonic()
        while not self._stop.is_set():
            for notify in conn.notifies(timeout=_POLL):
                self._on_payload(notify.payload)
            if time.monotonic() - checked > HEALTH_CHECK:
                conn.execute("SELECT 1")  # a dead peer shows up here, not as a quiet socket
                checked = time.monotonic()


class Listener:
    """Job notifications as a sequence number per queue; waiters compare against where they started."""

    def __init__(self, connect: Connect) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._last: dict[str, int] = {}
        self._everyone = 0  # the last sequence number that concerned every queue
        self._thread = ListenThread(connect, CHANNEL, self._note, lambda: self._note(""), "jobbridge-listen")

    def start(self) -> None:
        """Listen from now on (idempotent); `DriverUnavailable` if the first connection fails."""
        self._thread.start()

    def mark(self) -> int:
        """Where the notifications stand now: pass it to `wait` after looking at the table."""
        with self._cond:
            return self._seq

    def wait(self, queues: Sequence[str], since: int, timeout: float) -> bool:
        """Sleep until a notification after ``since`` concerns one of ``queues``; False on timeout."""

        def woken() -> bool:
            return self._everyone > since or any(self._last.get(q, 0) > since for q in queues)

        with self._cond:
            return self._cond.wait_for(woken, timeout)

    def close(self) -> None:
        self._thread.close()

    def _note(self, queue: str) -> None:
        with self._cond:
            self._seq += 1
            if queue:
                self._last[queue] = self._seq
            else:
                self._everyone = self._seq
            self._cond.notify_all()
