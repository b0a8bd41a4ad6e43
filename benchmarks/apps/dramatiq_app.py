"""Dramatiq's benchmark actors: ``dramatiq benchmarks.apps.dramatiq_app`` (Redis DB: `benchmarks.apps.REDIS_DB`).

No retries (a no-op never fails); otherwise the Redis broker's defaults.
"""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks import probe
from benchmarks.apps import redis_url

broker = RedisBroker(url=redis_url("dramatiq"))
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="bench_noop", max_retries=0)
def noop() -> None:
    probe.hit()


@dramatiq.actor(actor_name="bench_stamp", max_retries=0)
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
