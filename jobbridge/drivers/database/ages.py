"""The database driver's queue ages (`jobbridge.drivers.queue_age_port`): one indexed MIN per queue.

``MIN(available_at)`` over a queue's unreserved rows that are due is read off
the reserve index (``jobbridge_jobs_ready``, or PostgreSQL's partial
``jobbridge_jobs_unreserved``) whatever the queue's length, in one read-only
transaction for all the queues asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, func, select

from jobbridge.drivers.database.schema import jobs

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver

_OLDEST = select(func.min(jobs.c.available_at)).where(
    (jobs.c.queue == bindparam("queue")) & jobs.c.reserved_until.is_(None)
    & (jobs.c.available_at <= bindparam("now")))


class DatabaseAges:
    def __init__(self, driver: DatabaseDriver) -> None:
        self._driver = driver

    def oldest_waiting(self, queues: Sequence[str]) -> dict[str, float]:
        now = self._driver.clock.now()
        found: dict[str, float] = {}
        with self._driver._read("read the oldest waiting jobs") as conn:
            for queue in dict.fromkeys(queues):
                oldest = conn.execute(_OLDEST, {"queue": queue, "now": now}).scalar()
                if oldest is not None:
                    found[queue] = max(0.0, now - float(oldest))
        return found
