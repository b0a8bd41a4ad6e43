"""Dramatiq as a benchmark `Runner` (Redis broker, or RabbitMQ: `DramatiqAmqpRunner`): ``send()`` per job;
it has no batch enqueue."""

from __future__ import annotations

from benchmarks import vhosts
from benchmarks.apps import redis_url
from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from benchmarks.stores import flush_redis_db

MODULE = "benchmarks.apps.dramatiq_app"


class DramatiqRunner:
    library = "dramatiq"
    batch_note = "no batch API: send() per message"
    configs = (("process-1x1", "process, 1 x 1 (-p 1 -t 1)"),
               ("process-default", "process, default (1 process per core x 8 threads)"))
    latency_config = "process-default"
    poll_interval = 0.0

    module = MODULE

    def prepare(self) -> None:
        import importlib

        self.app = importlib.import_module(self.module)
        self.clean()

    def clean(self) -> None:
        flush_redis_db(redis_url("dramatiq"))

    def enqueue_single(self, count: int) -> None:
        send = self.app.noop.send
        for _ in range(count):
            send()

    def enqueue_batch(self, count: int) -> None:
        self.enqueue_single(count)

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        cmd = [venv_bin("dramatiq"), self.module]
        if key == "process-1x1":
            cmd += ["--processes", "1", "--threads", "1"]
        return WorkerGroup(f"dramatiq-{key}", [cmd], child_env(probe))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.app.stamp.send(dispatched_at)

    def close(self) -> None:
        self.app.broker.close()


class DramatiqAmqpRunner(DramatiqRunner):
    """Dramatiq on RabbitMQ (its RabbitmqBroker, its own vhost), at its defaults."""

    module = "benchmarks.apps.dramatiq_amqp_app"
    configs = (("process-default", "process, default (1 process per core x 8 threads)"),)

    def prepare(self) -> None:
        vhosts.fresh_vhost("dramatiq")
        super().prepare()

    def clean(self) -> None:
        self.app.broker.flush_all()  # its queues, their delay and dead-letter queues

    def close(self) -> None:
        super().close()
        vhosts.drop_vhost("dramatiq")
