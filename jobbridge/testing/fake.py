"""`QueueFake`: wraps a bridge, records what is pushed instead of storing it, and asserts on it.

The fake stands in for a `JobBridge` on the dispatch side (``register``,
``envelope``, ``dispatch``, ``dispatch_many``, ``adispatch``, ``dispatch_now``,
``push``, and the bridge's ``settings``, ``registry``, ``clock`` and
``container``). Envelopes are built by the wrapped bridge, so the code under
test dispatches exactly as in production: an unregistered job or an
unencodable payload fails here as it would there (stricter than a fake that
accepts anything), a connection nobody declared is an error, unique
duplicates are dropped, and a job dispatched with ``transaction=`` is
recorded only when that transaction commits.

The assertions live on the fake alone: a real bridge records nothing, so an
assertion on it would pass without checking anything. `as_fake` is how a
test reaches the fake through the place the code under test finds its
bridge, and it raises `NotAFake` when a real bridge is still there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobbridge import payload
from jobbridge.app import Delay, JobBridge, transactions
from jobbridge.clock import Clock
from jobbridge.container import Container
from jobbridge.envelope import Envelope
from jobbridge.errors import NotAFake
from jobbridge.job import options_of
from jobbridge.registry import JobRegistry
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock


class QueueFake:
    """A queue that records; its assertions raise `AssertionError` with what was pushed instead.

    ``QueueFake(bridge)`` shares the bridge's settings, registry, clock and
    container; ``QueueFake()`` wraps a bridge of its own on the memory settings
    and a `FixedClock` (register the jobs on it, or pass ``jobs=``).
    """

    def __init__(self, bridge: JobBridge | None = None, *, jobs: Sequence[type] = ()) -> None:
        if bridge is None:
            bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), clock=FixedClock())
        self.bridge = bridge
        self.register(*jobs)
        self._records: list[tuple[str, Envelope]] = []
        self._unique: set[str] = set()
        self._guard = threading.Lock()

    @property
    def settings(self) -> Settings:
        return self.bridge.settings

    @property
    def registry(self) -> JobRegistry:
        return self.bridge.registry

    @property
    def clock(self) -> Clock:
        return self.bridge.clock

    @property
    def container(self) -> Container:
        return self.bridge.container

    # -- dispatching, as on the bridge -------------------------------------------------------

    def register(self, *classes: type) -> None:
        """Register on the wrapped bridge (so the real bridge knows the jobs too)."""
        self.bridge.register(*classes)

    def envelope(self, job: Any, **options: Any) -> Envelope:
        """The wrapped bridge's envelope for ``job`` (see `JobBridge.envelope`)."""
        return self.bridge.envelope(job, **options)

    def dispatch(self, job: Any, *, queue: str | None = None, delay: Delay | None = None,
                 at: datetime | None = None, tries: int | None = None, connection: str | None = None,
                 transaction: object | None = None, headers: Mapping[str, Any] | None = None) -> str | None:
        env = self.envelope(job, queue=queue, delay=delay, at=at, tries=tries, headers=headers)
        return self.push([env], connection=connection, transaction=transaction)[0]

    def dispatch_many(self, jobs: Iterable[Any], *, queue: str | None = None, delay: Delay | None = None,
                      at: datetime | None = None, tries: int | None = None, connection: str | None = None,
                      transaction: object | None = None) -> list[str | None]:
        envs = [self.envelope(j, queue=queue, delay=delay, at=at, tries=tries) for j in jobs]
        return self.push(envs, connection=connection, transaction=transaction)

    async def adispatch(self, job: Any, **options: Any) -> str | None:
        return await asyncio.to_thread(self.dispatch, job, **options)

    def dispatch_now(self, job: Any) -> None:
        """Recorded like a push: the fake never runs anything."""
        self.push([self.envelope(job)])

    def push(self, envelopes: Sequence[Envelope], *, connection: str | None = None,
             transaction: object | None = None) -> list[str | None]:
        """Record built envelopes (unique duplicates dropped); on commit when a transaction is given."""
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


def as_fake(bridge: object) -> QueueFake:
    """``bridge`` if it is a `QueueFake`; `NotAFake` if it is not (a real bridge records nothing).

    Call it on the bridge where the code under test finds it (``as_fake(myapp.bridge)``):
    if the fake never replaced the real one there, every assertion would check a fake the
    code never pushed to, and ``assert_not_pushed`` would pass without checking anything.
    """
    if isinstance(bridge, QueueFake):
        return bridge
    raise NotAFake(f"a {type(bridge).__name__} is not a jobbridge.testing.QueueFake: it records nothing it pushes, "
                   "so an assertion on what it pushed would pass without checking anything. Replace the bridge "
                   "where the code under test finds it: monkeypatch.setattr(myapp, 'bridge', QueueFake(myapp.bridge))")
