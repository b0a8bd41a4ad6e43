"""Celery's benchmark app: ``celery -A benchmarks.apps.celery_app worker`` (Redis DB: `benchmarks.apps.REDIS_DB`).

Results are ignored (no result backend), as a no-op job needs none; otherwise Celery's defaults.
"""

from __future__ import annotations

from celery import Celery

from benchmarks import probe
from benchmarks.apps import redis_url

app = Celery("jbbench", broker=redis_url("celery"))
app.conf.update(task_ignore_result=True, broker_connection_retry_on_startup=True,
                worker_hijack_root_logger=False)


@app.task(name="bench.noop")
def noop() -> None:
    probe.hit()


@app.task(name="bench.stamp")
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
