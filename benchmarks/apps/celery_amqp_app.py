"""Celery's benchmark app on RabbitMQ: ``celery -A benchmarks.apps.celery_amqp_app worker``.

The broker is ``amqp://`` on the vhost of its own (`benchmarks.vhosts`); results
ignored, otherwise Celery's defaults (its prefork pool at one child per core,
prefetch multiplier 4, acks on receipt).
"""

from __future__ import annotations

from celery import Celery

from benchmarks import probe
from benchmarks.vhosts import amqp_url

app = Celery("jbbench", broker=amqp_url("celery"))
app.conf.update(task_ignore_result=True, broker_connection_retry_on_startup=True,
                worker_hijack_root_logger=False)


@app.task(name="bench.noop")
def noop() -> None:
    probe.hit()


@app.task(name="bench.stamp")
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
