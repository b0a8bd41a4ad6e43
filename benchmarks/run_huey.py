"""Huey (Redis) as a benchmark `Runner`: calling a task enqueues it; Huey has no batch enqueue.

Huey's consumer defaults to one worker thread, so its 1 x 1 and default runs use the same command.
"""

from __future__ import annotations

from benchmarks.apps import redis_url
from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from benchmarks.stores import flush_redis_db


class HueyRunner:
    library = "huey"
    batch_note = "no batch API: one enqueue per call"
    configs = (("process-1x1", "process, 1 x 1 (-w 1 -k thread)"),
               ("process-default", "process, default (1 worker thread)"))
    latency_config = "process-default"
    poll_interval = 0.0

    def prepare(self) -> None:
        from benchmarks.apps import huey_app

        self.app = huey_app
        self.clean()

    def clean(self) -> None:
        flush_redis_db(redis_url("huey"))

    def enqueue_single(self, count: int) -> None:
        noop = self.app.noop
        for _ in range(count):
            noop()

    def enqueue_batch(self, count: int) -> None:
        self.enqueue_single(count)

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        cmd = [venv_bin("huey_consumer"), "benchmarks.apps.huey_app.huey", "--quiet"]
        if key == "process-1x1":
            cmd += ["--workers", "1", "--worker-type", "thread"]
        return WorkerGroup(f"huey-{key}", [cmd], child_env(probe))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.app.stamp(dispatched_at)

    def close(self) -> None:
        return None
