"""The amqp driver: RabbitMQ through kombu; the failed store and unique-job locks in a shared store.

URL: ``amqp://user:password@host:5672/vhost`` (``amqps://`` for TLS; the
facade's ``pyamqp://`` too) selects this driver; a connection also names its
shared store in ``locks`` (a database or redis connection).

Storage::

    RabbitMQ  {prefix}{queue}             a durable queue per queue (quorum by default, or classic):
                                          the jobs that are due, persistent, each pushed under
                                          publisher confirms; a reserved job is an unacknowledged
                                          delivery
              {prefix}{queue}@delay.{k}   the delay stages: a delayed job waits 2^k ms in each stage
                                          of a set bit of its delay (`topology`), held by the broker
              {prefix}delay.{k}, .ready   the stage exchanges (topic)
    shared    jobbridge_amqp_failed       the failed store (database), or F:<id> and failed (redis)
    store     jobbridge_amqp_queues       the queues pushed to (what counts and status list)
              unique-job locks            the shared store's own, under this connection's prefix

The shared store is the connection named by ``locks``; the app passes that
connection's opened driver as ``resources.extra["lock_store"]`` and `open`
fails naming ``locks`` when it is missing.

Settings: `jobbridge.drivers.amqp.settings` declares them (``SCHEMA``).
docs/rabbitmq.md gives each choice, why, and the failure it prevents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers import lazy_exports
from jobbridge.drivers.amqp.settings import REFUSED, SETTINGS, AmqpSettings, parse_settings

if TYPE_CHECKING:
    from jobbridge.drivers import Resources
    from jobbridge.drivers.amqp.driver import AmqpDriver

__all__ = ["REFUSED", "SETTINGS", "AmqpDriver", "AmqpSettings", "open", "parse_settings"]

# the driver (and kombu with it) is imported on first use: the settings above load without it
__getattr__ = lazy_exports(__name__, {"AmqpDriver": "driver"})


def open(settings: Mapping[str, Any], resources: Resources) -> AmqpDriver:
    """Build the driver from a connection's settings and the shared store's opened driver."""
    from jobbridge.drivers.amqp import driver, store

    parsed = parse_settings(settings)
    shared = store.store_for(resources.extra.get("lock_store"), parsed.scope, parsed.locks)
    return driver.AmqpDriver(parsed, shared, clock=resources.clock)
