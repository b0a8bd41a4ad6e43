"""The app `jobbridge worker -A tests.worker.drain_app:make_bridge` runs in the memory test.

Its one job does nothing and keeps nothing, so whatever the worker process
grows by while it drains a backlog is the worker's own.
"""

from __future__ import annotations

from jobbridge import Job, JobBridge, JobContext


class Nothing(Job, name="drain.nothing"):
    """A no-op job: it neither allocates nor records anything."""

    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        return None


def make_bridge() -> JobBridge:
    """Settings from the environment (JOBBRIDGE_DATABASE_URL names the SQLite file)."""
    return JobBridge.from_env(jobs=[Nothing])
