"""Huey's benchmark tasks: ``huey_consumer benchmarks.apps.huey_app.huey``."""

from __future__ import annotations

from huey import RedisHuey

from benchmarks import probe
from benchmarks.apps import redis_url

huey = RedisHuey("jbbench", url=redis_url("huey"))


@huey.task(name="bench.noop")
def noop() -> None:
    probe.hit()


@huey.task(name="bench.stamp")
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
