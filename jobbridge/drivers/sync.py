"""The sync driver: every push runs the job at once, in the dispatching thread.

URL: ``sync://``. Storage: none, but a failed store in memory so that
``jobbridge failed`` has something to show in development. Settings: none.
A failed job fails the call that dispatched it, after its tries (run back to
back, without backoff). That coupling is the point in development and
wrong in production: switch before you deploy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobbridge.drivers.base import Capabilities, FailedFilter
from jobbridge.drivers.granted_locks import GrantedLocks
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import ConfigurationError
from jobbridge.setting_schema import DriverSchema, Refusal
from jobbridge.store_reports import FailedJob, QueueCounts

if TYPE_CHECKING:
    from jobbridge.drivers import Resources

#: its settings (`jobbridge.setting_schema`): none, and no reservation, since nothing is reserved
SCHEMA = DriverSchema(fields={}, refused={
    "reservation": Refusal("the sync driver reserves nothing; jobs run inside dispatch", "nothing"),
})
SETTINGS, REFUSED = SCHEMA.keys, SCHEMA.refused
log = logging.getLogger("jobbridge.drivers.sync")

CAPABILITIES = Capabilities(
    is_deferred=False,
    survives_a_restart=False,
    needs_a_worker=False,
    may_lose_an_accepted_job=False,
    delayed_push=False,
    per_message_release=False,
    priorities=False,
    transactional_push=False,
    blocking_reserve=False,
)


class SyncDriver:
    """Runs each pushed envelope inline through ``run``; reserves nothing."""

    capabilities = CAPABILITIES

    def __init__(self, run: Callable[[Envelope], None]) -> None:
        self._run = run
        self._store = MemoryDriver()
        self._warned_delay = False
        self.failed = SyncFailedStore(self._store, run)
        # nothing is ever pending, so there is nothing a duplicate could pile onto: shared, in effect
        self.locks = GrantedLocks(shared=True)

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        for env in envelopes:
            if env.available_at > env.created_at + 0.001 and not self._warned_delay:
                self._warned_delay = True
                log.warning("the sync driver runs delayed jobs at once; use a deferred driver to delay them")
            try:
                self._run(env)
            except Exception as exc:
                self._store.push([env])
                (res,) = self._store.reserve([env.queue], 1) or (None,)
                if res is not None:
                    self._store.fail(res, f"{type(exc).__name__}: {exc}")
                raise

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        return []

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        """Nothing is ever reserved."""

    def release(self, reservation: Reservation, delay: float) -> None:
        """Nothing is ever reserved."""

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """Nothing is ever reserved."""

    def fail(self, reservation: Reservation, error: str) -> None:
        """Nothing is ever reserved."""

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        return []

    def reclaim_expired(self) -> int:
        return 0

    def counts(self) -> list[QueueCounts]:
        return []

    def purge(self, queues: Sequence[str]) -> int:
        """Nothing waits: every job ran inside its dispatch."""
        return 0

    def migrate(self) -> None:
        """Nothing to create."""

    def describe(self) -> str:
        return "sync (jobs run inside dispatch)"

    def check(self) -> None:
        """Nothing to check."""

    def close(self) -> None:
        """Nothing to release."""


class SyncFailedStore:
    """The failed attempts of inline runs, kept in a memory store; a retry runs the jobs again at once."""

    def __init__(self, store: MemoryDriver, run: Callable[[Envelope], None]) -> None:
        self._store, self._run = store, run

    def retry(self, id_or_all: str) -> int:
        count = self._store.failed.retry(id_or_all)
        while got := self._store.reserve([c.queue for c in self._store.counts()], 100):
            self._store.acknowledge(got)
            for res in got:
                self._run(res.envelope.replace(attempts=0))
        return count

    def flush(self) -> int:
        return self._store.failed.flush()

    def count(self) -> int:
        return self._store.failed.count()

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        return self._store.failed.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self._store.failed.get(job_id)


def open(settings: Mapping[str, Any], resources: Resources) -> SyncDriver:
    """Build the sync driver; it needs the app's way of running a job."""
    if resources.run_inline is None:
        raise ConfigurationError("the sync driver needs the app's job runner; build it through JobBridge")
    return SyncDriver(resources.run_inline)


__all__ = ["SyncDriver", "SyncFailedStore"]
