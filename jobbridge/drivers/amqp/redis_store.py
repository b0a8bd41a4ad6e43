"""`RedisSharedStore`: the amqp connection's failed jobs and queue names in a redis shared store."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from jobbridge.drivers.amqp.store import DriverBacked
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.redis.connection import as_text, translated
from jobbridge.drivers.shared.redis_failed import RedisFailedRows
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver


class RedisSharedStore(DriverBacked):
    def __init__(self, driver: RedisDriver, scope: str) -> None:
        super().__init__(driver)
        self.client = driver.client
        self.prefix = f"{driver.settings.prefix}amqp:{{{scope}}}:"
        self.rows = RedisFailedRows(self.client, self.prefix)
        self._known: set[str] = set()

    def migrate(self) -> None:
        """Nothing to create: keys appear when first written."""

    def server_clock(self) -> Callable[[], float]:
        def now() -> float:
            with translated():
                seconds, micros = self.client.time()
            return float(seconds) + float(micros) / 1e6
        return now

    def record(self, job: FailedJob) -> None:
        self.rows.record(job)

    def take(self, id_or_all: str, limit: int) -> list[tuple[str, str, bytes]]:
        ids = self.rows.ids()[:limit] if id_or_all == "all" else [id_or_all]
        return self.rows.bodies(ids)

    def remove(self, ids: Sequence[str]) -> None:
        self.rows.remove(ids)

    def flush(self) -> int:
        ids = self.rows.ids()
        self.rows.remove(ids)
        return len(ids)

    def count(self) -> int:
        return self.rows.count()

    def list(self, limit: int, where: FailedFilter | None = None) -> builtins.list[FailedJob]:
        return self.rows.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self.rows.get(job_id)

    def remember(self, names: Sequence[str]) -> None:
        new = [q for q in names if q not in self._known]
        if new:
            with translated():
                self.client.sadd(f"{self.prefix}queues", *new)
            self._known.update(new)

    def queues(self) -> builtins.list[str]:
        with translated():
            return sorted(as_text(q) for q in self.client.smembers(f"{self.prefix}queues"))
