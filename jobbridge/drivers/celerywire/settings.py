"""A celery-wire connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

``url`` is the broker the Celery fleet already uses: ``redis://host:6379/0`` (``rediss://``)
or ``amqp://user:password@host:5672/vhost`` (``amqps://``, ``pyamqp://``). ``locks`` names
the database or redis connection that keeps the failed store and the unique-job locks
(Celery's brokers keep neither). ``visibility_timeout`` is kombu's on Redis (3600 s, as
Celery's default; write the one your Celery apps set in ``broker_transport_options``): a
message held unacknowledged longer than that is delivered again; RabbitMQ has none (refused
there). ``reservation`` is the worker's lease, renewed every quarter of it; on Redis it may not exceed the visibility
timeout, since a lease the worker believes it holds must never be restored to another.
Nothing waits forever: ``connect_timeout`` (5 s) bounds a connect, ``request_timeout`` (10 s)
one request. This module imports no client library (the boot-time checks read it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, check_keys, coerce

REDIS_SCHEMES = ("redis", "rediss")
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
#: Celery's own default visibility timeout on Redis (kombu's ``Channel.visibility_timeout``)
DEFAULT_VISIBILITY_TIMEOUT = 3600.0

SCHEMA = DriverSchema(
    fields={
        "url": Field("url", secret=True, schemes=REDIS_SCHEMES + AMQP_SCHEMES),
        "locks": Field("str", top_level=False),
        "reservation": RESERVATION,
        "visibility_timeout": Field("float", above=0, default=DEFAULT_VISIBILITY_TIMEOUT),
        "connect_timeout": Field("float", least=0.1, most=300, default=5.0),
        "request_timeout": Field("float", least=0.1, most=300, default=10.0),
    },
    refused={
        "global_keyprefix": Refusal(
            "the celery wire reads and writes kombu's keys unprefixed, as Celery does by default",
            "nothing (remove global_keyprefix from the Celery apps' broker_transport_options too, or keep "
            "those queues on Celery)"),
        "priority_steps": Refusal("the celery wire reads kombu's default priority steps (0, 3, 6, 9)", "nothing"),
        "retry_after": Refusal("it is another library's name for the visibility timeout", "visibility_timeout"),
        "prefix": Refusal("Celery's queues are named by the queue alone", "nothing"),
    },
    required="url",
    store_keys=("url",),
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused


@dataclass(frozen=True, slots=True)
class CeleryWireSettings:
    """One celery-wire connection, validated."""

    url: str
    locks: str
    reservation: float = SCHEMA.default("reservation")
    visibility_timeout: float = SCHEMA.default("visibility_timeout")
    connect_timeout: float = SCHEMA.default("connect_timeout")
    request_timeout: float = SCHEMA.default("request_timeout")

    @property
    def transport(self) -> str:
        """``redis`` or ``amqp``: which of kombu's transports the broker is reached with."""
        return "redis" if self.url.split("://", 1)[0].lower() in REDIS_SCHEMES else "amqp"

    @property
    def broker_url(self) -> str:
        return "amqp://" + self.url.split("://", 1)[1] if self.url.startswith("pyamqp://") else self.url

    @property
    def scope(self) -> str:
        """What the shared store files this connection's rows under: the broker's address, never credentials."""
        return "celery-wire:" + self.url.split("://", 1)[1].rsplit("@", 1)[-1]


def parse_settings(settings: Mapping[str, Any]) -> CeleryWireSettings:
    """Validate a connection's settings; a refused, unknown or missing key is a boot failure naming it."""
    check_keys(SCHEMA, settings, "a celery-wire connection")
    url = settings.get("url")
    schemes = REDIS_SCHEMES + AMQP_SCHEMES
    if not isinstance(url, str) or "://" not in url or url.split("://", 1)[0].lower() not in schemes:
        raise ConfigurationError(
            "a celery-wire connection needs url = the Celery broker's URL, redis://host:6379/0 or "
            f"amqp://user:password@host:5672/vhost, got {quoted(url)}")
    locks = settings.get("locks")
    if not isinstance(locks, str) or not locks.strip():
        raise ConfigurationError(
            "a celery-wire connection needs locks = \"<name of a database or redis connection>\": Celery's broker "
            "cannot list, retry or flush failed jobs nor hold a lock, so those live in that shared store")
    values = {key: _value(settings, key) for key in
              ("reservation", "visibility_timeout", "connect_timeout", "request_timeout")}
    parsed = CeleryWireSettings(url=url, locks=locks.strip(), **values)
    if parsed.transport == "amqp" and "visibility_timeout" in settings:
        raise ConfigurationError(
            "visibility_timeout on a celery-wire connection to RabbitMQ: RabbitMQ holds a job while its worker's "
            "connection lives and has no visibility timeout to set. Remove visibility_timeout")
    if parsed.transport == "redis" and parsed.reservation > parsed.visibility_timeout:
        raise ConfigurationError(
            f"reservation = {parsed.reservation:g} s on a celery-wire connection to Redis is longer than its "
            f"visibility_timeout = {parsed.visibility_timeout:g} s: kombu would hand a job to another worker while "
            "this one still believes it holds it. Lower reservation, or raise visibility_timeout (to the one the "
            "Celery apps set)")
    return parsed


def _value(settings: Mapping[str, Any], key: str) -> Any:
    field = SCHEMA.fields[key]
    return coerce(field, settings.get(key, field.default), f"{key} on a celery-wire connection",
                  text=isinstance(settings.get(key), str))
