"""The ranges an envelope's fields must lie in, held both at dispatch and when a stored message is read.

A stored message can hold anything JSON can: written by hand, by an older
release or by a bug, it may carry a count above 64 bits, a negative attempt,
a name no column holds or a timeout of 1e12 s. Each of those once crashed or
froze something far from where it came in (an integer overflow in a claim, a
watchdog thread that died, a job run again and again). So one set of rules
holds the message at both ends: at dispatch a bad value fails the call that
made it; when a stored message breaks a rule it is undecodable, failed once
with the field named. Nothing past these checks sees a value out of range.

Errors name the field and what was expected, never the value: a stored
message may carry a secret. docs/failed-jobs.md lists the ranges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: id, name and queue: the longest string an indexed MariaDB utf8mb4 column holds
MAX_NAME_LENGTH = 191
#: tries: what a signed 32-bit column holds
MAX_TRIES = 2**31 - 1
#: the highest attempt number a reservation may carry (a signed 32-bit column)
MAX_ATTEMPTS = 2**31 - 1
#: attempts as stored: one more reservation must still fit the column
MAX_STORED_ATTEMPTS = MAX_ATTEMPTS - 1
#: a longer timeout is clamped to this (thirty days: "no limit" in practice, as the Celery facade's)
MAX_TIMEOUT = 30 * 86400.0
#: a release's delay (``ReleaseJob(delay)``, a backoff) is clamped to this: a year
MAX_RELEASE_DELAY = 365 * 86400.0
#: the latest moment a time field may name: 9999-12-31T23:59:59Z, the last a datetime can hold
MAX_TIME = 253402300799.0


class FieldRefused(ValueError):
    """One field out of its range: ``field`` and ``expected`` say which and what, never the value."""

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(f"{field}: expected {expected}")
        self.field = field
        self.expected = expected


def _finite(value: Any) -> float | None:
    """The value as a finite float, or None (a bool, a string, inf, nan, an int too big for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def name(field: str, value: Any) -> str:
    """An id, a job name or a queue name."""
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_LENGTH and "\x00" not in value:
        return value
    raise FieldRefused(field, f"a non-empty string of at most {MAX_NAME_LENGTH} characters")


def count(field: str, value: Any, low: int, high: int) -> int:
    """An integer (never a bool, never a float) from ``low`` to ``high``."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    raise FieldRefused(field, f"an integer from {low} to {high}")


def timeout(value: Any) -> float:
    """A positive finite number of seconds; above `MAX_TIMEOUT` it is clamped to it."""
    number = _finite(value)
    if number is None or number <= 0:
        raise FieldRefused("timeout", "a positive finite number of seconds")
    return min(number, MAX_TIMEOUT)


def moment(field: str, value: Any) -> float:
    """Epoch seconds from 1970 to the end of 9999."""
    number = _finite(value)
    if number is None or not 0 <= number <= MAX_TIME:
        raise FieldRefused(field, f"a time in epoch seconds from 0 to {MAX_TIME:.0f}")
    return number


def optional_moment(field: str, value: Any) -> float | None:
    """`moment`, or None."""
    return None if value is None else moment(field, value)


def release_delay(value: float) -> float:
    """A retry's delay the store can hold: never negative or nan, at most `MAX_RELEASE_DELAY`."""
    return min(value, MAX_RELEASE_DELAY) if value > 0 else 0.0


def optional_text(field: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise FieldRefused(field, "a string or null")


def optional_seconds(field: str, value: Any) -> float | None:
    if value is None:
        return None
    number = _finite(value)
    if number is None or number < 0:
        raise FieldRefused(field, "a finite number of seconds, not negative, or null")
    return number


def mapping(field: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise FieldRefused(field, "an object")


def _required(data: Mapping[str, Any], key: str) -> Any:
    if key not in data:
        raise FieldRefused(key, "a value, but the field is missing")
    return data[key]


def envelope_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The `Envelope` keyword arguments for ``data`` (stored JSON, or a built envelope's fields).

    Keys beside these are ignored, so a message written by a later release
    that added a field still runs; `FieldRefused` names the first field out of range.
    """
    headers = data.get("headers")
    return {
        "id": name("id", _required(data, "id")),
        "name": name("name", _required(data, "name")),
        "queue": name("queue", _required(data, "queue")),
        "payload": mapping("payload", _required(data, "payload")),
        "tries": count("tries", _required(data, "tries"), 1, MAX_TRIES),
        "timeout": timeout(_required(data, "timeout")),
        "available_at": moment("available_at", _required(data, "available_at")),
        "created_at": moment("created_at", _required(data, "created_at")),
        "attempts": count("attempts", data.get("attempts", 0), 0, MAX_STORED_ATTEMPTS),
        "unique_key": optional_text("unique_key", data.get("unique_key")),
        "unique_for": optional_seconds("unique_for", data.get("unique_for")),
        "headers": {} if headers is None else mapping("headers", headers),
        "expires_at": optional_moment("expires_at", data.get("expires_at")),
    }


def fields_in_range(env: Any) -> bool:
    """Whether every field already is exactly what `envelope_fields` would make of it: the same type
    (a float where it makes floats, a dict where it copies a mapping) and within range, so nothing would change.

    ``env`` is an `Envelope` (or anything with its fields). The same ranges as `envelope_fields`, stated as a
    test rather than a conversion: the worker decodes every job, and what dispatch stored passes it as it is.
    """
    tries, timeout, attempts, unique_for = env.tries, env.timeout, env.attempts, env.unique_for
    return (_text(env.id) and _text(env.name) and _text(env.queue) and type(env.payload) is dict
            and type(env.headers) is dict and type(tries) is int and 1 <= tries <= MAX_TRIES
            and type(timeout) is float and 0.0 < timeout <= MAX_TIMEOUT
            and _time(env.available_at) and _time(env.created_at)
            and type(attempts) is int and 0 <= attempts <= MAX_STORED_ATTEMPTS
            and (env.unique_key is None or type(env.unique_key) is str)
            and (unique_for is None or (type(unique_for) is float and 0.0 <= unique_for <= MAX_TIME))
            and (env.expires_at is None or _time(env.expires_at)))


def _text(value: object) -> bool:
    return type(value) is str and 0 < len(value) <= MAX_NAME_LENGTH and "\x00" not in value


def _time(value: object) -> bool:
    return type(value) is float and 0.0 <= value <= MAX_TIME
