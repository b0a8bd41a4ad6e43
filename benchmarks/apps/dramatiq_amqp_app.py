"""Dramatiq's benchmark actors on RabbitMQ: ``dramatiq benchmarks.apps.dramatiq_amqp_app``.

Its `RabbitmqBroker` on the vhost of its own (`benchmarks.vhosts`); no retries
(a no-op never fails); otherwise the broker's defaults (publisher confirms off,
prefetch of twice the threads).
"""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from benchmarks import probe
from benchmarks.vhosts import amqp_url

broker = RabbitmqBroker(url=amqp_url("dramatiq"))
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="bench_noop", max_retries=0, broker=broker)
def noop() -> None:
    probe.hit()


@dramatiq.actor(actor_name="bench_stamp", max_retries=0, broker=broker)
def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
