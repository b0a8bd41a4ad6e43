"""Dramatiq (Redis broker) as a benchmark `Runner`: ``send()`` per job; it has no batch enqueue."""

from __future__ import annotations

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

    def prepare(self) -> None:
        from benchmarks.apps import dramatiq_app

        self.app = dramatiq_app
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
        cmd = [venv_bin("dramatiq"), MODULE]
        if key == "process-1x1":
            cmd += ["--processes", "1", "--threads", "1"]
        return WorkerGroup(f"dramatiq-{key}", [cmd], child_env(probe))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.app.stamp.send(dispatched_at)

    def close(self) -> None:
        self.app.broker.close()
