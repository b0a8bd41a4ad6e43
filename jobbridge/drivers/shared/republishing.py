"""The failed store of a broker driver whose failed jobs live in another connection's store (amqp, celery-wire).

The broker holds no failed jobs, so the rows sit in the shared store the app
names (`FailedRows`: a table on a database, keys on Redis). Listing, reading,
counting, flushing and forgetting are that store's; a retry takes a batch of
rows, publishes them back through the driver (each driver says how:
`RepublishingFailedStore.republish`) and only then deletes the rows, so a crash
in between leaves a job both queued and failed, never neither.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from typing import Protocol

from jobbridge.clock import Clock
from jobbridge.drivers.base import FailedFilter
from jobbridge.errors import NoFailedJob
from jobbridge.store_reports import FailedJob

#: failed jobs published back per round
RETRY_BATCH = 500


class FailedRows(Protocol):
    """The shared store's failed rows, as a broker driver's failed store uses them."""

    def take(self, id_or_all: str, limit: int) -> builtins.list[tuple[str, str, bytes]]: ...
    def remove(self, ids: Sequence[str]) -> None: ...
    def flush(self) -> int: ...
    def count(self) -> int: ...
    def list(self, limit: int, where: FailedFilter | None = None) -> builtins.list[FailedJob]: ...
    def get(self, job_id: str) -> FailedJob | None: ...


class RepublishingFailedStore(abc.ABC):
    """``driver.failed`` over `FailedRows`; a driver supplies `republish`."""

    def __init__(self, store: FailedRows, clock: Clock) -> None:
        self._store, self._clock = store, clock

    @abc.abstractmethod
    def republish(self, rows: Sequence[tuple[str, str, bytes]], now: float) -> None:
        """Put ``rows`` (id, queue, stored body) back on their queues, due ``now``, confirmed before returning."""

    def retry(self, id_or_all: str) -> int:
        moved = 0
        while True:
            rows = self._store.take(id_or_all, RETRY_BATCH)
            if not rows and id_or_all != "all" and not moved:
                raise NoFailedJob(f"there is no failed job with id {id_or_all}")
            if not rows:
                return moved
            self.republish(rows, self._clock.now())
            self._store.remove([job_id for job_id, _, _ in rows])
            moved += len(rows)
            if id_or_all != "all" or len(rows) < RETRY_BATCH:
                return moved

    def flush(self) -> int:
        return self._store.flush()

    def count(self) -> int:
        return self._store.count()

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> builtins.list[FailedJob]:
        return self._store.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self._store.get(job_id)

    def forget(self, job_ids: Sequence[str]) -> int:
        """Delete these failed jobs (`jobbridge.drivers.base.ForgettingFailedStore`)."""
        held = [job_id for job_id in dict.fromkeys(job_ids) if self._store.get(job_id) is not None]
        self._store.remove(held)
        return len(held)
