"""The memory driver's per-minute counters: a dict in the process (tests, one process)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobbridge.drivers.throughput_port import MinuteCount

if TYPE_CHECKING:
    from jobbridge.clock import Clock


class MemoryThroughput:
    """`jobbridge.drivers.throughput_port.ThroughputStore` in this process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._counts: dict[tuple[int, str], MinuteCount] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock.now()

    def add(self, counts: Sequence[MinuteCount]) -> None:
        with self._lock:
            for count in counts:
                key = (count.minute, count.queue)
                found = self._counts.get(key)
                self._counts[key] = count if found is None else found.plus(count)

    def read(self, since: float) -> list[MinuteCount]:
        with self._lock:
            return sorted((c for c in self._counts.values() if c.minute >= since), key=lambda c: (c.minute, c.queue))

    def prune(self, before: float) -> int:
        with self._lock:
            old = [key for key in self._counts if key[0] < before]
            for key in old:
                del self._counts[key]
            return len(old)
