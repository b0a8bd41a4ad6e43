"""A redis connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

`SCHEMA` is the one declaration of them: the boot-time checks (`jobbridge.settings`)
and `parse_settings` both read it, and this module imports no client library, so
a configuration is checked the same way whether or not redis-py is installed.

``url`` is ``redis://[[user]:password@]host[:port][/db]`` or ``rediss://...`` (TLS).
Timeouts are milliseconds (a command's budget), ``reservation`` is seconds (a
period a job waits). Nothing waits forever: ``connect_timeout_ms`` (5000 unless
written) bounds opening a connection and ``response_timeout_ms`` (5000) the wait
for one command's answer; a blocking reserve's client waits that plus the
longest block (`jobbridge.drivers.redis.connection`), since a block is not an
unanswered command. ``reconnect`` is off unless declared; with it a command is
retried with exponential backoff across a dropped connection or a restart,
``reconnect_attempts`` times at most. A command that timed out is never retried:
its silence already cost its whole budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, check_keys, describe, within

#: milliseconds to open a connection, and to wait for one command's answer, unless written
DEFAULT_CONNECT_TIMEOUT_MS = 5000
DEFAULT_RESPONSE_TIMEOUT_MS = 5000

_NO_POOL = Refusal(
    "this driver keeps no pool worth sizing: a redis connection multiplexes, so there is "
    "nothing to pool and everything to time out",
    "response_timeout_ms and reconnect",
)

SCHEMA = DriverSchema(
    fields={
        "url": Field("url", schemes=("redis", "rediss")),
        "prefix": Field("str", empty_ok=True, default="jobbridge:"),
        "reservation": RESERVATION,
        "connect_timeout_ms": Field("int", least=1, default=DEFAULT_CONNECT_TIMEOUT_MS),
        "response_timeout_ms": Field("int", least=1, default=DEFAULT_RESPONSE_TIMEOUT_MS),
        "reconnect": Field("bool", default=False),
        "reconnect_attempts": Field("int", least=0, default=10),
        "reconnect_max_backoff_ms": Field("int", least=1, default=1000),
    },
    refused={
        "connection": Refusal(
            "it would point at the cache's named store, so the queue would share the cache's "
            "database index, which is the failure a separate queue connection exists to prevent",
            "url, with its own database index (redis://host:6379/1)",
        ),
        "visibility_timeout": Refusal(
            "that is Celery's and kombu's redelivery timer; here the lease a worker renews by "
            "heartbeat is called reservation",
            "reservation (seconds)",
        ),
        "retry_after": Refusal("the same setting as reservation under another name", "reservation (seconds)"),
        "block_for": Refusal(
            "a reserve blocks only briefly and by itself; how long an idle worker waits is the worker's",
            "nothing; the worker's --sleep",
        ),
        "max_connections": _NO_POOL,
        "min_connections": _NO_POOL,
        "pool_size": _NO_POOL,
    },
    required="url",
    store_keys=("url", "prefix"),
    lock_store=True,
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused
SCHEMES = tuple(f"{scheme}://" for scheme in SCHEMA.fields["url"].schemes)


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """One redis connection, validated: where, under which prefix, and how long to wait."""

    url: str
    prefix: str = SCHEMA.default("prefix")
    reservation: float = SCHEMA.default("reservation")
    connect_timeout_ms: int = SCHEMA.default("connect_timeout_ms")
    response_timeout_ms: int = SCHEMA.default("response_timeout_ms")
    reconnect: bool = SCHEMA.default("reconnect")
    reconnect_attempts: int = SCHEMA.default("reconnect_attempts")
    reconnect_max_backoff_ms: int = SCHEMA.default("reconnect_max_backoff_ms")


def parse_settings(settings: Mapping[str, Any]) -> RedisSettings:
    """Validate a connection's settings; a refused or unknown key is a boot failure naming it."""
    check_keys(SCHEMA, settings, "a redis connection")
    url = settings.get("url")
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        wanted = " or ".join(f"{scheme}..." for scheme in SCHEMES)
        raise ConfigurationError(f"a redis connection needs url = {wanted}, got {quoted(url)}")
    return RedisSettings(
        url=url,
        prefix=str(settings.get("prefix", SCHEMA.default("prefix"))),
        reservation=_number(settings, "reservation"),
        connect_timeout_ms=int(_number(settings, "connect_timeout_ms")),
        response_timeout_ms=int(_number(settings, "response_timeout_ms")),
        reconnect=_flag(settings.get("reconnect", SCHEMA.default("reconnect"))),
        reconnect_attempts=int(_number(settings, "reconnect_attempts")),
        reconnect_max_backoff_ms=int(_number(settings, "reconnect_max_backoff_ms")),
    )


def _number(settings: Mapping[str, Any], key: str) -> float:
    """The key's value (its default when not written) as a number within its declared bounds."""
    value = settings.get(key, SCHEMA.default(key))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{key} must be a number, got {value!r}") from None
    if not within(SCHEMA.fields[key], number):
        raise ConfigurationError(f"{key} must be {describe(SCHEMA.fields[key])}, got {value!r}")
    return number


def _flag(value: object) -> bool:
    """Booleans arrive as JSON booleans or as environment strings."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off", ""}:
            return False
        raise ConfigurationError(f"reconnect must be true or false, got {value!r}")
    return bool(value)
