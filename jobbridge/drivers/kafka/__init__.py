"""The kafka driver: a topic per queue; leases, delayed and failed jobs in a shared lock store.

URL: ``kafka://host:port,host:port`` selects this driver; a connection names
its brokers in ``brokers`` (``JOBBRIDGE_KAFKA_BROKERS``), through confluent-kafka.

Storage::

    Kafka   {topic_prefix}{queue}     a topic per queue (created when first used, 4 partitions,
                                      the brokers' replication): jobs that are due, as envelopes,
                                      keyed by job id; consumer group {group} reads them, and its
                                      committed offset never passes a job that is not settled
    lock    leases                    a record per message read (topic/partition/offset): leased
    store                             under a token until a deadline, or done
            delayed                   jobs not yet due (delayed pushes, releases, lapsed leases,
                                      retried failures), produced to their topic when due
            failed                    the failed store
            unique-job locks          through the lock store driver's own locks

The lock store is the connection named by ``locks``, a database or redis
connection: its tables are ``jobbridge_kafka_leases``, ``jobbridge_kafka_delayed``
and ``jobbridge_kafka_failed``; its redis keys sit under the redis prefix plus
``kafka:{<group>@<topic_prefix>}:``. The app passes that connection's opened
driver as ``resources.extra["lock_store"]``; `open` fails naming ``locks``
when it is missing.

Settings: `jobbridge.drivers.kafka.settings` declares them (``SCHEMA``: each key's
type, bounds and default, and the keys refused with what to write instead).
Client options beyond these (TLS, SASL) come from code, and win over the
settings' timeouts:
``resources.extra["kafka_config"]`` for every client and
``resources.extra["kafka_consumer_config"]`` for the consumer alone.

docs/kafka.md gives each choice, why, and the failure it prevents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers import lazy_exports
from jobbridge.drivers.kafka.settings import REFUSED, SETTINGS, KafkaSettings, brokers_from_url, parse_settings

if TYPE_CHECKING:
    from jobbridge.drivers import Resources
    from jobbridge.drivers.kafka.driver import KafkaDriver, Receipt
    from jobbridge.drivers.kafka.store import LeaseStore

__all__ = [
    "REFUSED", "SETTINGS", "KafkaDriver", "KafkaSettings", "LeaseStore", "Receipt", "brokers_from_url",
    "open", "parse_settings",
]

# the driver (and confluent-kafka with it) is imported on first use: the settings above load without it
__getattr__ = lazy_exports(__name__, {"KafkaDriver": "driver", "Receipt": "driver", "LeaseStore": "store"})


def open(settings: Mapping[str, Any], resources: Resources) -> KafkaDriver:
    """Build the driver from a connection's settings and the lock store's opened driver.

    ``resources.extra["lock_store"]`` is the driver of the connection ``locks``
    names (a `DatabaseDriver` or `RedisDriver`), or any `LeaseStore`.
    """
    from jobbridge.drivers.kafka import driver, store

    parsed = parse_settings(settings)
    lock_store = store.store_for(resources.extra.get("lock_store"), parsed.scope, parsed.locks)
    # the connection's timeouts under every client, and a client option given in code over them
    config = {**parsed.client_config(), **(resources.extra.get("kafka_config") or {})}
    return driver.KafkaDriver(parsed, lock_store, clock=resources.clock, config=config,
                              consumer=resources.extra.get("kafka_consumer_config"))
