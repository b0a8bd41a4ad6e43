"""arq's benchmark worker settings: ``arq benchmarks.apps.arq_app.WorkerSettings``.

The Redis DB index is in `benchmarks.apps.REDIS_DB`; ``JB_BENCH_ARQ_MAX_JOBS`` overrides
arq's concurrency (``max_jobs``, 10 by default) for the 1 x 1 run.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from arq.connections import RedisSettings

from benchmarks import probe
from benchmarks.apps import redis_url

REDIS = RedisSettings.from_dsn(redis_url("arq"))


async def noop(ctx: dict[str, Any]) -> None:
    probe.hit()


async def stamp(ctx: dict[str, Any], dispatched_at: float) -> None:
    probe.stamp(dispatched_at)


class WorkerSettings:
    functions: ClassVar[list[Any]] = [noop, stamp]
    redis_settings = REDIS
    if "JB_BENCH_ARQ_MAX_JOBS" in os.environ:
        max_jobs = int(os.environ["JB_BENCH_ARQ_MAX_JOBS"])
