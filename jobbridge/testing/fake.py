"""`QueueFake`: records pushed jobs instead of storing them, and asserts on what was pushed.

It is a `JobBridge` whose push records, so the code under test dispatches
exactly as in production: an unregistered job or an unencodable payload fails
here as it would there (stricter than a fake that accepts anything), unique
duplicates are dropped, and a job dispatched with ``transaction=`` is
recorded only when that transaction commits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from jobbridge import payload
from jobbridge.app import JobBridge, transactions
from jobbridge.envelope import Envelope
from jobbridge.job import options_of
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock


class QueueFake(JobBridge):
    """A queue that records; its assertions raise `AssertionError` with what was pushed instead."""

    def __init__(self, bridge: JobBridge | None = None, *, jobs: Sequence[type] = ()) -> None:
        settings = bridge.settings if bridge is not None else Settings.from_mapping({"driver": "memory"})
        super().__init__(settings, clock=bridge.clock if bridge is not None else FixedClock())
        if bridge is not None:
            self.registry = bridge.registry
            self.container = bridge.container
        self.register(*jobs)
        self._records: list[tuple[str, Envelope]] = []
        self._unique: set[str] = set()
        self._guard = threading.Lock()

    def push(self, envelopes: Sequence[Envelope], *, connection: str | None = None,
             transaction: object | None = None) -> list[str | None]:
        conn = self.settings.connection(connection).name
        with self._guard:
            kept = [e for e in envelopes if e.unique_key is None or e.unique_key not in self._unique]
            self._unique.update(e.unique_key for e in kept if e.unique_key is not None)
        if transaction is None:
            self._record(conn, kept)
        else:
            transactions().defer_until_commit(
                transaction, lambda: self._record(conn, kept), lambda: self._forget(kept))
        ids = {e.id for e in kept}
        return [e.id if e.id in ids else None for e in envelopes]

    def dispatch_now(self, job: Any) -> None:
        """Recorded like a push: the fake never runs anything."""
        self.push([self.envelope(job)])

    def _record(self, connection: str, envelopes: list[Envelope]) -> None:
        with self._guard:
            self._records.extend((connection, e) for e in envelopes)

    def _forget(self, envelopes: list[Envelope]) -> None:
        with self._guard:
            self._unique.difference_update(e.unique_key for e in envelopes if e.unique_key is not None)

    # -- reading what was pushed ---------------------------------------------------------------

    def envelopes(self, cls: type | None = None) -> list[Envelope]:
        """Every recorded envelope, or those of one job class, in push order."""
        name = None if cls is None else options_of(cls).name
        with self._guard:
            return [e for _, e in self._records if name is None or e.name == name]

    def pushed(self, cls: type) -> list[Any]:
        """The pushed jobs of ``cls``, decoded back from their payloads as a worker would."""
        return [payload.decode(cls, e.payload) for e in self.envelopes(cls)]

    def clear(self) -> None:
        with self._guard:
            self._records.clear()
            self._unique.clear()

    # -- assertions ----------------------------------------------------------------------------

    def assert_pushed(self, cls: type, where: Callable[[Any], bool] | None = None) -> None:
        jobs = self.pushed(cls)
        matching = [j for j in jobs if where is None or where(j)]
        if not matching:
            detail = f"{len(jobs)} were pushed, none matching" if jobs else f"nothing was pushed; {self._summary()}"
            raise AssertionError(f"expected a {cls.__name__} to be pushed: {detail}")

    def assert_pushed_times(self, cls: type, times: int) -> None:
        count = len(self.envelopes(cls))
        if count != times:
            raise AssertionError(f"expected {cls.__name__} pushed {times} time(s), it was pushed {count}")

    def assert_pushed_on(self, cls: type, queue: str) -> None:
        queues = [e.queue for e in self.envelopes(cls)]
        if queue not in queues:
            raise AssertionError(f"expected a {cls.__name__} pushed on {queue!r}; it was pushed on {queues}")

    def assert_not_pushed(self, cls: type) -> None:
        count = len(self.envelopes(cls))
        if count:
            raise AssertionError(f"expected no {cls.__name__} to be pushed, {count} were")

    def assert_nothing_pushed(self) -> None:
        if self._records:
            raise AssertionError(f"expected nothing pushed; {self._summary()}")

    def _summary(self) -> str:
        with self._guard:
            names = [e.name for _, e in self._records]
        return f"pushed: {names}" if names else "the fake recorded no job at all"
