"""Celery's ``broker_transport_options``, per driver: each one honoured as a jobbridge setting, or refused.

A transport option is one of

- honoured: ``to`` turns its value into the jobbridge settings it means
  (``socket_timeout = 2.5`` is ``redis_response_timeout_ms = 2500``);
- accepted: already true of jobbridge, so the value changes nothing; ``why`` says why;
- refused unless harmless: ``ok(value)`` is false for a value jobbridge cannot
  honour, and the error says ``why`` and what to write ``instead``.

An option read and dropped would be the facade's broken promise: a timeout
that looks set and is not, a retry policy that does not retry. So the socket,
retry and pool options map onto the driver's own settings where one exists
(docs/configuration.md, "Nothing waits forever", gives their defaults), and
are refused, with the reason, where none does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Option:
    """What one transport option does: becomes settings (``to``), changes nothing, or is refused by value."""

    to: Callable[[Any], dict[str, Any]] | None = None
    why: str = ""
    ok: Callable[[Any], bool] | None = None
    instead: str = "remove it"

    @property
    def honoured(self) -> bool:
        return self.to is not None


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ImproperlyConfigured(f"a transport option's timeout is a positive number of seconds, not {quoted(value)}")
    return float(value)


def _as(key: str, scale: float = 1.0, whole: bool = False) -> Callable[[Any], dict[str, Any]]:
    """``key`` = the value in seconds, times ``scale`` (1000 for a key in milliseconds), rounded up if ``whole``."""
    def convert(value: Any) -> dict[str, Any]:
        number = _seconds(value) * scale
        return {key: math.ceil(number) if whole else number}
    return convert


def _off(value: Any) -> bool:
    return value is None or value is False or value == 0


def _whole_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(f"max_retries is a whole number of retries, not {quoted(value)}")
    return value


def _redis_retries(value: Any) -> dict[str, Any]:
    count = _whole_count(value)
    return {"redis_reconnect": count > 0, "redis_reconnect_attempts": count} if count else {"redis_reconnect": False}


def _redis_backoff(value: Any) -> dict[str, Any]:
    return {"redis_reconnect": True, **_as("redis_reconnect_max_backoff_ms", 1000, whole=True)(value)}


def _given(value: Any) -> bool:
    return value is not None


_NO_TIMEOUT = ("None waits for ever, and jobbridge bounds every call to its store", "a number of seconds, or remove "
               "it: the default is 5 s (docs/configuration.md, Nothing waits forever)")
_STEPS = Option(why="the wait between tries is jobbridge's own exponential backoff, which starts at 10 ms and "
                    "has no step to set", ok=_off,
                instead="remove it; interval_max (the longest wait between tries) is honoured")
_RETRY_AT_ONCE = ("a dispatch that cannot reach the store fails at once with DriverUnavailable (within the "
                  "store's connect and answer timeouts), so the caller decides; a worker retries with its own backoff")
_VISIBILITY = Option(why="a reserved job is redelivered once its reservation lapses, which its worker renews by "
                         "heartbeat while it runs: a long task is never redelivered, and a lost worker's comes back "
                         "within the reservation (60 s)")
_SLEEP = Option(to=lambda value: {"sleep": _seconds(value)})

REDIS: dict[str, Option] = {
    "global_keyprefix": Option(to=lambda value: {"redis_prefix": value}),
    "socket_timeout": Option(to=_as("redis_response_timeout_ms", 1000, whole=True), why=_NO_TIMEOUT[0],
                             ok=_given, instead=_NO_TIMEOUT[1]),
    "socket_connect_timeout": Option(to=_as("redis_connect_timeout_ms", 1000, whole=True), why=_NO_TIMEOUT[0],
                                     ok=_given, instead=_NO_TIMEOUT[1]),
    "retry_on_timeout": Option(
        why="a command that timed out is not sent again: the server's silence already cost the whole timeout, "
            "and a retry would double the wait", ok=_off,
        instead="remove it; redis_reconnect retries a dropped or refused connection, and "
                "redis_response_timeout_ms is the wait for an answer"),
    "socket_keepalive": Option(
        why="jobbridge sets no TCP keepalive on its redis connections: every command has an answer timeout, "
            "which finds a dead peer at the next command", ok=_off,
        instead="remove it; socket_timeout (redis_response_timeout_ms) bounds the wait"),
    "health_check_interval": Option(
        why="jobbridge does not ping a connection before using it: a command on a connection that died while "
            "idle fails within the answer timeout, and with redis_reconnect it is sent again on a new one",
        ok=_off, instead="remove it, or set redis_reconnect = true"),
    "max_connections": Option(
        why="jobbridge does not cap its redis connections: each process holds one per thread that talks to "
            "redis at once, and one more for blocking reserves", ok=lambda value: value is None),
    "queue_order_strategy": Option(
        why="a worker takes its queues in the order it lists them, everything from the first before the next",
        ok=lambda value: value in (None, "priority"),
        instead="'priority' (what jobbridge does), or remove it; list the queues in the order you want them "
                "(jobbridge worker -Q high,celery), or run a worker per queue for a fair share"),
    "visibility_timeout": _VISIBILITY,
    "fanout_prefix": Option(why="jobbridge has no broadcast queues"),
    "fanout_patterns": Option(why="jobbridge has no broadcast queues"),
    "max_retries": Option(to=_redis_retries),
    "interval_max": Option(to=_redis_backoff),
    "interval_start": _STEPS,
    "interval_step": _STEPS,
    "polling_interval": _SLEEP,
}
_NOT_RETRIED = Option(why=_RETRY_AT_ONCE, ok=lambda value: value is None)
SQS: dict[str, Option] = {
    "region": Option(to=lambda value: {"sqs_region": value}),
    "predefined_queues": Option(why="read for the queue's URL and credentials"),
    "visibility_timeout": _VISIBILITY,
    "wait_time_seconds": Option(to=lambda value: {"sqs_wait_time": value}),
    "polling_interval": _SLEEP,
    "queue_name_prefix": Option(
        why="the queues are named after the one predefined queue's URL: <name> and <name>-<queue>",
        ok=lambda value: not value, instead="remove it; name the queue in predefined_queues"),
    "max_retries": Option(to=lambda value: {"sqs_max_attempts": _whole_count(value) + 1}),
    "interval_start": _NOT_RETRIED,
    "interval_step": _NOT_RETRIED,
    "interval_max": _NOT_RETRIED,
}
#: the database, memory and kafka drivers: nothing of kombu's transport to configure
COMMON: dict[str, Option] = {
    "max_retries": _NOT_RETRIED,
    "interval_start": _NOT_RETRIED,
    "interval_step": _NOT_RETRIED,
    "interval_max": _NOT_RETRIED,
    "visibility_timeout": _VISIBILITY,
    "polling_interval": _SLEEP,
}

#: the amqp driver: kombu's py-amqp transport options it honours, and the retry policy it refuses
AMQP: dict[str, Option] = {
    "max_retries": _NOT_RETRIED,
    "interval_start": _NOT_RETRIED,
    "interval_step": _NOT_RETRIED,
    "interval_max": _NOT_RETRIED,
    "visibility_timeout": _VISIBILITY,
    "confirm_publish": Option(why="every push is confirmed by RabbitMQ before it returns", ok=lambda v: v is True,
                              instead="remove it: confirms cannot be turned off"),
    "read_timeout": Option(to=lambda v: {"request_timeout": float(v)}),
    "write_timeout": Option(to=lambda v: {"request_timeout": float(v)}),
    "connect_timeout": Option(to=lambda v: {"connect_timeout": float(v)}),
}


def known_options(options: Mapping[str, Option]) -> tuple[list[str], list[str]]:
    """The honoured option names and the others, each sorted, for an error that lists them."""
    return sorted(k for k, o in options.items() if o.honoured), sorted(k for k, o in options.items() if not o.honoured)


__all__ = ["AMQP", "COMMON", "REDIS", "SQS", "Option", "known_options"]
