"""jobbridge's benchmark app: ``jobbridge worker -A benchmarks.apps.jobbridge_app:bridge``.

The store comes from ``JB_BENCH_URL`` (a ``sqlite://``, ``postgresql://``,
``mysql://``, ``redis://`` or ``amqp://`` URL, the last with its shared store in
a PostgreSQL database of its own; ``JB_BENCH_REDIS_PREFIX`` for Redis keys).
Settings are built from that alone, so a ``JOBBRIDGE_*`` variable or a
jobbridge.toml in the working directory cannot change what is measured.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks import probe
from benchmarks.stores import AMQP_SHARED_DB, pg_url
from jobbridge import Job, JobBridge, JobContext, Settings

DEFAULT_URL = "sqlite:////tmp/jb-bench.sqlite3"


class Noop(Job, name="bench.noop"):
    """Does nothing but report that it ran."""

    def handle(self, ctx: JobContext) -> None:
        probe.hit()


class AsyncNoop(Job, name="bench.async-noop"):
    """The same no-op as an ``async def handle``: it runs on the worker's event loop."""

    async def handle(self, ctx: JobContext) -> None:
        probe.hit()


class Stamp(Job, name="bench.stamp"):
    """Reports the moment it started, for dispatch-to-start latency."""

    dispatched_at: float

    def handle(self, ctx: JobContext) -> None:
        probe.stamp(self.dispatched_at)


def settings_for(url: str) -> Settings:
    data: dict[str, Any]
    if url.startswith(("amqp://", "amqps://")):
        # RabbitMQ holds the jobs; the failed store and unique locks live in a PostgreSQL database of their own.
        # ``?jb_queue_type=classic`` on the URL (the harness's classic-queue row): classic queues, not quorum
        url, _, query = url.partition("?")
        rabbit: dict[str, Any] = {"driver": "amqp", "url": url, "locks": "shared"}
        if query == "jb_queue_type=classic":
            rabbit["queue_type"] = "classic"
        data = {"connections": {"default": "rabbit", "rabbit": rabbit,
                                "shared": {"driver": "database", "url": pg_url(AMQP_SHARED_DB)}}}
    elif url.startswith(("redis://", "rediss://")):
        data = {"driver": "redis", "redis_url": url,
                "redis_prefix": os.environ.get("JB_BENCH_REDIS_PREFIX", "jbbench:")}
    else:
        data = {"database_url": url}
    return Settings.from_mapping(data, source="benchmarks")


bridge = JobBridge(settings_for(os.environ.get("JB_BENCH_URL", DEFAULT_URL)), jobs=[Noop, AsyncNoop, Stamp])
