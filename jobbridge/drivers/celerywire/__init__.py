"""The celery-wire driver: Celery's own messages on a Celery broker, so Celery and jobbridge share its queues.

URL: the broker a Celery fleet already uses, ``redis://host:6379/0`` (``rediss://``) or
``amqp://user:password@host:5672/vhost`` (``amqps://``, ``pyamqp://``).
A connection also names its shared store in ``locks`` (a database or redis
connection): the failed store and the unique-job locks live there.

Storage (kombu's Redis layout, what Celery's workers read and write)::

    Redis     <queue>                  a list per queue of kombu messages (Celery protocol 2, JSON)
              <queue>\\x06\\x16<3|6|9>   its priority steps
              unacked, unacked_index   what is reserved: delivery tag -> message, and when delivered
              _kombu.binding.<queue>   the queue's binding to its direct exchange
    shared    failed jobs              the failed store (database, or redis hashes)
    store     unique-job locks         the shared store's own, under this connection's prefix

    RabbitMQ  <queue>                  a classic durable queue, and a direct exchange of that name bound
                                       to it, as a Celery worker declares them

Settings: `jobbridge.drivers.celerywire.settings` declares them (``SCHEMA``).
docs/celery-wire.md says what each side guarantees, and the rolling migration it is for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers import lazy_exports
from jobbridge.drivers.celerywire.settings import REFUSED, SETTINGS, CeleryWireSettings, parse_settings

if TYPE_CHECKING:
    from jobbridge.drivers import Resources
    from jobbridge.drivers.celerywire.driver import CeleryWireDriver

__all__ = ["REFUSED", "SETTINGS", "CeleryWireDriver", "CeleryWireSettings", "open", "parse_settings"]

# the driver (and kombu with it) is imported on first use: the settings above load without it
__getattr__ = lazy_exports(__name__, {"CeleryWireDriver": "driver"})


def open(settings: Mapping[str, Any], resources: Resources) -> CeleryWireDriver:
    """Build the driver from a connection's settings and the shared store's opened driver."""
    from jobbridge.drivers.amqp import store
    from jobbridge.drivers.celerywire import driver

    parsed = parse_settings(settings)
    shared = store.store_for(resources.extra.get("lock_store"), parsed.scope, parsed.locks)
    return driver.CeleryWireDriver(parsed, shared, clock=resources.clock)
