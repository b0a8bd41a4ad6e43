"""Celery as a benchmark `Runner` (Redis broker, or RabbitMQ: `CeleryAmqpRunner`): ``delay()`` per job,
``group().apply_async()`` as its batch."""

from __future__ import annotations

from benchmarks import vhosts
from benchmarks.apps import redis_url
from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from benchmarks.stores import flush_redis_db

APP = "benchmarks.apps.celery_app"


class CeleryRunner:
    library = "celery"
    batch_note = "group().apply_async(): still one message per job, over one connection"
    configs = (("process-1x1", "process, 1 x 1 (--pool solo)"),
               ("process-default", "process, default (prefork, 1 child per core)"))
    latency_config = "process-default"
    poll_interval = 0.0

    app_module = APP

    def prepare(self) -> None:
        import importlib

        self.app = importlib.import_module(self.app_module)
        self.clean()

    def clean(self) -> None:
        flush_redis_db(redis_url("celery"))

    def enqueue_single(self, count: int) -> None:
        delay = self.app.noop.delay
        for _ in range(count):
            delay()

    def enqueue_batch(self, count: int) -> None:
        from celery import group

        group(self.app.noop.s() for _ in range(count)).apply_async()

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        cmd = [venv_bin("celery"), "-A", self.app_module, "worker", "-l", "WARNING"]
        if key == "process-1x1":
            cmd += ["--pool", "solo"]
        return WorkerGroup(f"celery-{key}", [cmd], child_env(probe))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.app.stamp.delay(dispatched_at)

    def close(self) -> None:
        self.app.app.close()


class CeleryAmqpRunner(CeleryRunner):
    """Celery on RabbitMQ (``amqp://``, its own vhost), at its defaults."""

    app_module = "benchmarks.apps.celery_amqp_app"
    configs = (("process-default", "process, default (prefork, 1 child per core)"),)

    def prepare(self) -> None:
        vhosts.fresh_vhost("celery")
        super().prepare()

    def clean(self) -> None:
        self.app.app.control.purge()  # the celery queue, on the harness's own connection

    def close(self) -> None:
        super().close()
        vhosts.drop_vhost("celery")
