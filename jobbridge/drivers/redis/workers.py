"""The redis driver's worker registry: a hash of records and a sorted set of their last beats.

``{prefix}workers`` maps each worker process's id to its record (JSON);
``{prefix}workers:beats`` scores each id by its last beat (Redis's clock). A
beat is one pipelined round trip (HSET and ZADD); pruning reads the ids whose
beat is older than the cut-off from the sorted set and deletes them from both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.worker_registry_port import WorkerBeat

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver


class RedisWorkers:
    """`jobbridge.drivers.worker_registry_port.WorkerRegistry` on one redis driver's client."""

    def __init__(self, driver: RedisDriver) -> None:
        self._driver = driver
        self.key = f"{driver.keys.prefix}workers"
        self.beats = f"{driver.keys.prefix}workers:beats"

    def now(self) -> float:
        return self._driver.clock.now()

    def beat(self, worker: WorkerBeat) -> None:
        with translated():
            pipe = self._driver.client.pipeline(transaction=True)
            pipe.hset(self.key, worker.id, worker.encode())
            pipe.zadd(self.beats, {worker.id: worker.last_beat})
            pipe.execute()

    def forget(self, worker_id: str) -> None:
        with translated():
            pipe = self._driver.client.pipeline(transaction=True)
            pipe.hdel(self.key, worker_id)
            pipe.zrem(self.beats, worker_id)
            pipe.execute()

    def list(self) -> list[WorkerBeat]:
        with translated():
            raw = self._driver.client.hvals(self.key)
        found = [beat for beat in (WorkerBeat.decode(body) for body in raw) if beat is not None]
        return sorted(found, key=lambda w: -w.last_beat)

    def prune(self, before: float) -> int:
        with translated():
            old = self._driver.client.zrangebyscore(self.beats, "-inf", f"({before!r}")
            if not old:
                return 0
            pipe = self._driver.client.pipeline(transaction=True)
            pipe.hdel(self.key, *old)
            pipe.zrem(self.beats, *old)
            pipe.execute()
        return len(old)
