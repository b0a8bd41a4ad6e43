"""A redis connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

Timeouts are milliseconds (a command's budget), ``reservation`` is seconds
(a period a job waits). Timeouts and ``reconnect`` are off unless declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError, RefusedSetting

SETTINGS = frozenset({
    "url",
    "prefix",
    "reservation",
    "connect_timeout_ms",
    "response_timeout_ms",
    "reconnect",
    "reconnect_attempts",
    "reconnect_max_backoff_ms",
})

_NO_POOL = (
    "this driver keeps no pool worth sizing: a redis connection multiplexes, so there is "
    "nothing to pool and everything to time out",
    "response_timeout_ms and reconnect",
)

REFUSED: Mapping[str, tuple[str, str]] = {
    "connection": (
        "it would point at the cache's named store, so the queue would share the cache's "
        "database index, which is the failure a separate queue connection exists to prevent",
        "url, with its own database index (redis://host:6379/1)",
    ),
    "visibility_timeout": (
        "that is Celery's and kombu's redelivery timer; here the lease a worker renews by "
        "heartbeat is called reservation",
        "reservation (seconds)",
    ),
    "retry_after": ("the same setting as reservation under another name", "reservation (seconds)"),
    "block_for": (
        "a reserve blocks only briefly and by itself; how long an idle worker waits is the worker's",
        "nothing; the worker's --sleep",
    ),
    "max_connections": _NO_POOL,
    "min_connections": _NO_POOL,
    "pool_size": _NO_POOL,
}

DEFAULT_PREFIX = "jobbridge:"
DEFAULT_RESERVATION = 60.0
DEFAULT_RECONNECT_ATTEMPTS = 10
DEFAULT_RECONNECT_MAX_BACKOFF_MS = 1000
SCHEMES = ("redis://", "rediss://")


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """One redis connection, validated: where, under which prefix, and how long to wait."""

    url: str
    prefix: str = DEFAULT_PREFIX
    reservation: float = DEFAULT_RESERVATION
    connect_timeout_ms: int | None = None
    response_timeout_ms: int | None = None
    reconnect: bool = False
    reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS
    reconnect_max_backoff_ms: int = DEFAULT_RECONNECT_MAX_BACKOFF_MS


def parse_settings(settings: Mapping[str, Any]) -> RedisSettings:
    """Validate a connection's settings; a refused or unknown key is a boot failure naming it."""
    for key in settings:
        if key in REFUSED:
            why, instead = REFUSED[key]
            raise RefusedSetting(key, why, instead, where="a redis connection")
        if key not in SETTINGS and key != "driver":
            raise ConfigurationError(
                f"unknown setting {key!r} on a redis connection; it accepts {', '.join(sorted(SETTINGS))}"
            )
    url = settings.get("url")
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        raise ConfigurationError(f"a redis connection needs url = redis://... or rediss://..., got {url!r}")
    prefix = str(settings.get("prefix", DEFAULT_PREFIX))
    reservation = _number(settings, "reservation", DEFAULT_RESERVATION)
    if reservation <= 0:
        raise ConfigurationError(f"reservation must be a positive number of seconds, got {reservation}")
    return RedisSettings(
        url=url,
        prefix=prefix,
        reservation=reservation,
        connect_timeout_ms=_millis(settings, "connect_timeout_ms"),
        response_timeout_ms=_millis(settings, "response_timeout_ms"),
        reconnect=_flag(settings.get("reconnect", False)),
        reconnect_attempts=int(_number(settings, "reconnect_attempts", DEFAULT_RECONNECT_ATTEMPTS)),
        reconnect_max_backoff_ms=int(
            _number(settings, "reconnect_max_backoff_ms", DEFAULT_RECONNECT_MAX_BACKOFF_MS)
        ),
    )


def _number(settings: Mapping[str, Any], key: str, default: float) -> float:
    value = settings.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{key} must be a number, got {value!r}") from None


def _millis(settings: Mapping[str, Any], key: str) -> int | None:
    if settings.get(key) is None:
        return None
    value = int(_number(settings, key, 0))
    if value <= 0:
        raise ConfigurationError(f"{key} must be a positive number of milliseconds, got {value}")
    return value


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
