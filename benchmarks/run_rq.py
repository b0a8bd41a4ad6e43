"""RQ as a benchmark `Runner`: ``enqueue()`` per job, ``enqueue_many()`` (a pipeline) as its batch.

RQ's default worker forks a work horse per job; the 1 x 1 run uses its
``SimpleWorker``, which runs jobs in the worker process itself.
"""

from __future__ import annotations

from benchmarks.apps import redis_url
from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from benchmarks.stores import flush_redis_db


class RqRunner:
    library = "rq"
    batch_note = "Queue.enqueue_many(): one pipeline"
    configs = (("process-1x1", "process, 1 x 1 (SimpleWorker, no fork)"),
               ("process-default", "process, default (1 worker, a fork per job)"))
    latency_config = "process-default"
    poll_interval = 0.0

    def prepare(self) -> None:
        from redis import Redis
        from rq import Queue

        from benchmarks.apps import rq_jobs

        self.jobs = rq_jobs
        self.redis = Redis.from_url(redis_url("rq"))
        self.queue = Queue("default", connection=self.redis)
        self.clean()

    def clean(self) -> None:
        flush_redis_db(redis_url("rq"))

    def enqueue_single(self, count: int) -> None:
        enqueue, noop = self.queue.enqueue, self.jobs.noop
        for _ in range(count):
            enqueue(noop)

    def enqueue_batch(self, count: int) -> None:
        from rq import Queue

        self.queue.enqueue_many([Queue.prepare_data(self.jobs.noop) for _ in range(count)])

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        cmd = [venv_bin("rq"), "worker", "--url", redis_url("rq"), "--quiet"]
        if key == "process-1x1":
            cmd += ["--worker-class", "rq.worker.SimpleWorker"]
        return WorkerGroup(f"rq-{key}", [[*cmd, "default"]], child_env(probe))

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.queue.enqueue(self.jobs.stamp, dispatched_at)

    def close(self) -> None:
        self.redis.close()
