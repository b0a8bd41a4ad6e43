"""The memory driver's queue ages (`jobbridge.drivers.queue_age_port`): a look at every row, under its lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobbridge.drivers.memory import MemoryDriver


class MemoryAges:
    def __init__(self, driver: MemoryDriver) -> None:
        self._driver = driver

    def oldest_waiting(self, queues: Sequence[str]) -> dict[str, float]:
        driver, names = self._driver, set(queues)
        oldest: dict[str, float] = {}
        with driver._cond:
            now = driver.clock.now()
            for row in driver._rows.values():
                queue = row.envelope.queue
                if row.token is None and row.available_at <= now and queue in names:
                    oldest[queue] = min(oldest.get(queue, now), row.available_at)
        return {queue: now - at for queue, at in oldest.items()}
