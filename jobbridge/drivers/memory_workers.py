"""The memory driver's worker registry: records in a dict, gone with the process (tests, one process)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from jobbridge.drivers.worker_registry_port import WorkerBeat

if TYPE_CHECKING:
    from jobbridge.clock import Clock


class MemoryWorkers:
    """`jobbridge.drivers.worker_registry_port.WorkerRegistry` in this process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._records: dict[str, WorkerBeat] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock.now()

    def beat(self, worker: WorkerBeat) -> None:
        with self._lock:
            self._records[worker.id] = worker

    def forget(self, worker_id: str) -> None:
        with self._lock:
            self._records.pop(worker_id, None)

    def list(self) -> list[WorkerBeat]:
        with self._lock:
            return sorted(self._records.values(), key=lambda w: -w.last_beat)

    def prune(self, before: float) -> int:
        with self._lock:
            old = [key for key, worker in self._records.items() if worker.last_beat < before]
            for key in old:
                del self._records[key]
            return len(old)
