"""The redis-py clients a driver talks through, and the wall that keeps redis exceptions out.

Every command goes through `translated()`, so the worker sees `DriverUnavailable`
(refused, reset, timed out, still loading), `StoreRefused` (data no retry can
make acceptable) or `DriverError`, never a redis exception, with the client's
error chained as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from jobbridge.drivers.redis.settings import RedisSettings
from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused
from jobbridge.redaction import mask_url

#: the longest a single blocking reserve waits before handing control back to the worker
MAX_BLOCK_SECONDS = 5.0
_FIRST_BACKOFF_SECONDS = 0.01


def retry_policy(settings: RedisSettings) -> Retry:
    """What a command does when the connection drops: try again with backoff, or fail at once.

    redis-py retries three times by default; "off unless declared" means no
    retry at all unless ``reconnect`` is set. Either way a later command opens
    a fresh connection, so one refused command never poisons the client.
    """
    if not settings.reconnect:
        return Retry(NoBackoff(), 0)
    backoff = ExponentialBackoff(cap=settings.reconnect_max_backoff_ms / 1000, base=_FIRST_BACKOFF_SECONDS)
    return Retry(backoff, settings.reconnect_attempts)


def _seconds(millis: int | None) -> float | None:
    return None if millis is None else millis / 1000


def connect(settings: RedisSettings, *, blocking: bool = False) -> redis.Redis:
    """A client on ``settings.url``; ``blocking`` gives one whose reads outlast a blocking reserve.

    A blocking XREADGROUP legitimately waits longer than ``response_timeout_ms``,
    so it gets its own client (and pool) whose read timeout is that budget plus
    the longest block, instead of loosening the budget of every other command.
    """
    response = _seconds(settings.response_timeout_ms)
    if blocking and response is not None:
        response += MAX_BLOCK_SECONDS
    return redis.Redis.from_url(
        settings.url,
        socket_connect_timeout=_seconds(settings.connect_timeout_ms),
        socket_timeout=response,
        retry=retry_policy(settings),
        decode_responses=False,
        client_name="jobbridge",
    )


@contextmanager
def translated() -> Iterator[None]:
    """Turn redis-py's exceptions into jobbridge's, chained with ``from``."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise DriverUnavailable(f"redis is unreachable: {exc}") from exc
    except RedisError as exc:
        raise DriverError(f"redis refused a command: {exc}") from exc
    except UnicodeEncodeError as exc:  # a str redis-py cannot encode (a lone surrogate): no retry can help
        raise StoreRefused(f"a name or value for redis is not UTF-8 text ({exc.reason}); pass text") from exc


def redacted(url: str) -> str:
    """The URL with its credentials masked (the userinfo's and the query string's), for banners and logs."""
    return mask_url(url)


def as_text(value: Any) -> str:
    """A reply value as str (replies are bytes: bodies must stay binary)."""
    return value.decode() if isinstance(value, bytes) else str(value)
