"""Procrastinate (PostgreSQL) as a benchmark `Runner`: ``defer()`` per job, ``batch_defer()`` as its batch.

It gets a database of its own (`benchmarks.stores.PROCRASTINATE_DB`) whose
schema is dropped and re-applied at the start. One process runs Procrastinate's
default concurrency (1); the second configuration is two processes of 8.
"""

from __future__ import annotations

from benchmarks.common import ProbeServer, WorkerGroup, child_env, venv_bin
from benchmarks.stores import PROCRASTINATE_DB, ensure_pg_database, pg_url

APP = "benchmarks.apps.procrastinate_app.app"


class ProcrastinateRunner:
    library = "procrastinate"
    batch_note = "batch_defer(): one INSERT"
    configs = (("process-1p", "process, 1 process (default concurrency 1)"),
               ("process-2x8", "process, 2 processes x concurrency 8"))
    latency_config = "process-1p"
    poll_interval = 0.0

    def prepare(self) -> None:
        import psycopg

        ensure_pg_database(PROCRASTINATE_DB)
        with psycopg.connect(pg_url(PROCRASTINATE_DB), autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        from benchmarks.apps import procrastinate_app

        self.module = procrastinate_app
        self.opened = procrastinate_app.app.open()
        procrastinate_app.app.schema_manager.apply_schema()

    def clean(self) -> None:
        import psycopg

        with psycopg.connect(pg_url(PROCRASTINATE_DB), autocommit=True) as conn:
            conn.execute("TRUNCATE procrastinate_jobs RESTART IDENTITY CASCADE")

    def enqueue_single(self, count: int) -> None:
        defer = self.module.noop.defer
        for _ in range(count):
            defer()

    def enqueue_batch(self, count: int) -> None:
        self.module.noop.batch_defer(*({} for _ in range(count)))

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        cmd = [venv_bin("procrastinate"), f"--app={APP}", "worker"]
        env = child_env(probe)
        if key == "process-2x8":
            return WorkerGroup(f"procrastinate-{key}", [[*cmd, "--concurrency", "8"]] * 2, env)
        return WorkerGroup(f"procrastinate-{key}", [cmd], env)

    def dispatch_stamp(self, dispatched_at: float) -> None:
        self.module.stamp.defer(dispatched_at=dispatched_at)

    def close(self) -> None:
        self.module.app.close()
