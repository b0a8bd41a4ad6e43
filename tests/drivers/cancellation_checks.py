"""The end-to-end check of a driver that reads cancellations in its reserve (`ReadsCancellations`), shared by
the Redis and database tests: a real `Worker` on ``settings`` runs three jobs, one cancelled before any
reserve; it must acknowledge that one unrun and make no cancellation lookup of its own per batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobbridge import Job, JobBridge, JobContext, Settings
from jobbridge.worker import Worker, WorkerOptions

#: ids of the `Counted` jobs that ran, in this process
RAN: list[str] = []


class Counted(Job, name="cancellation_checks.counted"):
    """Notes that it ran."""

    def handle(self, ctx: JobContext) -> None:
        RAN.append(ctx.id)


def check_a_cancelled_job_is_acknowledged_unrun(settings: Settings | dict[str, Any]) -> None:
    RAN.clear()
    if not isinstance(settings, Settings):
        settings = Settings.from_mapping(settings)
    bridge = JobBridge(settings, jobs=[Counted])
    ids = [str(bridge.dispatch(Counted())) for _ in range(3)]
    bridge.cancel(ids[1])
    worker = Worker(bridge, WorkerOptions(stop_when_empty=True, sleep=0.02))
    lookups: list[Sequence[str]] = []
    looked_up = worker.executor.refresh_cancellations

    def counted(waiting: Sequence[str]) -> None:
        lookups.append(waiting)
        looked_up(waiting)

    worker.executor.refresh_cancellations = counted  # type: ignore[method-assign]
    stats = worker.run()
    assert (stats.succeeded, stats.cancelled) == (2, 1)
    assert sorted(RAN) == sorted([ids[0], ids[2]])
    assert lookups == [], "the reserve read the cancellations: no lookup of its own per batch"
    bridge.close()
