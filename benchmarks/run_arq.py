"""arq as a benchmark `Runner`: ``enqueue_job()`` awaited one at a time; gathered 1,000 at a time as its batch.

The worker is started through ``arq.worker.run_worker`` rather than the ``arq``
command, whose logging setup prints a line per job at INFO: every library is
measured without per-job log lines.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from benchmarks.apps import redis_url
from benchmarks.common import ProbeServer, WorkerGroup, child_env
from benchmarks.stores import flush_redis_db

LAUNCH = ("from arq.worker import run_worker; from benchmarks.apps.arq_app import WorkerSettings; "
          "run_worker(WorkerSettings)")


class ArqRunner:
    library = "arq"
    batch_note = "no batch API: enqueue_job() calls gathered 1,000 at a time"
    configs = (("process-1x1", "process, 1 x 1 (max_jobs=1)"),
               ("process-default", "process, default (1 process, max_jobs=10 on asyncio)"))
    latency_config = "process-default"
    poll_interval = 0.5  # arq's poll_delay default

    def prepare(self) -> None:
        from arq import create_pool

        from benchmarks.apps import arq_app

        self.clean()
        self.loop = asyncio.new_event_loop()
        self.pool: Any = self.loop.run_until_complete(create_pool(arq_app.REDIS))

    def clean(self) -> None:
        flush_redis_db(redis_url("arq"))

    def enqueue_single(self, count: int) -> None:
        async def go() -> None:
            for _ in range(count):
                await self.pool.enqueue_job("noop")

        self.loop.run_until_complete(go())

    def enqueue_batch(self, count: int) -> None:
        async def go() -> None:
            for start in range(0, count, 1000):
                await asyncio.gather(*(self.pool.enqueue_job("noop") for _ in range(min(1000, count - start))))

        self.loop.run_until_complete(go())

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        extra = {"JB_BENCH_ARQ_MAX_JOBS": "1"} if key == "process-1x1" else {}
        return WorkerGroup(f"arq-{key}", [[sys.executable, "-c", LAUNCH]], child_env(probe, **extra))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.loop.run_until_complete(self.pool.enqueue_job("stamp", dispatched_at))

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.aclose())
        self.loop.close()
