"""The memory driver's schedule store: last ticks in a dict, advanced under one lock with the push.

Within one process that is as atomic as the database's transaction: no other
scheduler thread can see the tick recorded without its job, or the job without
its tick. Like every memory store it is gone with the process (tests, and
single-process development).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobbridge.drivers.schedule_port import Fire, Firing, LastTick
from jobbridge.envelope import Envelope

if TYPE_CHECKING:
    from jobbridge.drivers.memory import MemoryDriver


class MemorySchedules:
    """`jobbridge.drivers.schedule_port.ScheduleStore` beside a memory driver."""

    def __init__(self, driver: MemoryDriver) -> None:
        self._driver = driver
        self._ticks: dict[str, LastTick] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._driver.clock.now()

    def last(self, entries: Sequence[str]) -> dict[str, LastTick]:
        with self._lock:
            return {name: self._ticks[name] for name in entries if name in self._ticks}

    def fire(self, entry: str, tick: float, envelope: Envelope | None) -> Fire:
        now = self.now()
        with self._lock:
            stored = self._ticks.get(entry)
            if stored is not None and stored.tick >= tick:
                return Fire.TAKEN
            if envelope is None or not self._unique_lock(envelope):
                self._ticks[entry] = LastTick(tick, None, now)
                return Fire.ADVANCED
            self._driver.push([envelope])  # before the tick is recorded: a push that raises records nothing
            self._ticks[entry] = LastTick(tick, envelope.id, now)
            return Fire.PUSHED

    def fire_many(self, firings: Sequence[Firing]) -> list[Fire]:
        return [self.fire(f.entry, f.tick, f.envelope) for f in firings]

    def _unique_lock(self, envelope: Envelope) -> bool:
        key = envelope.unique_key
        return key is None or self._driver.locks.acquire(key, envelope.id, envelope.unique_for or 3600.0)
