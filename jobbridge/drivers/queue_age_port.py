"""How long the oldest waiting job of each queue has waited: what says a queue is falling behind.

A queue's depth alone cannot tell a busy queue that keeps up from one whose
workers are gone: ten thousand jobs that all arrived this second are fine, ten
that have waited an hour are not. A job counts as waiting from the moment it
became available (its ``available_at``: a delayed job is not late before it is
due), so the age is the store's clock now minus the oldest ``available_at`` of
the queue's jobs that are available and not reserved.

A driver offers it as ``driver.ages`` (database: one indexed ``MIN`` per
queue; redis: the first entry after the consumer group's last delivered one;
memory); a driver that cannot tell has none, and the metric is left out for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class QueueAges(Protocol):
    """The age of the oldest waiting job per queue."""

    def oldest_waiting(self, queues: Sequence[str]) -> dict[str, float]:
        """Seconds the oldest available, unreserved job of each of ``queues`` has waited; a queue with
        no such job is absent."""
        ...


def queue_ages_of(driver: object) -> QueueAges | None:
    found = getattr(driver, "ages", None)
    return found if isinstance(found, QueueAges) else None
