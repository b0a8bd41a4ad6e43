"""The redis-py clients a driver talks through, and the wall that keeps redis exceptions out.

Every command goes through `translated()`, so the worker sees `DriverUnavailable`
(refused, reset, timed out, still loading, not a Redis server at all), `StoreRefused`
(data no retry can make acceptable) or `DriverError`, never a redis exception, with
the client's error chained as ``__cause__``.

Every client made here is bounded (docs/configuration.md, "Nothing waits forever"):
``connect_timeout_ms`` to connect, ``response_timeout_ms`` for an answer (plus the
block, for the client of blocking reserves). Its retry policy (`Explaining`) also
rewrites the last error redis-py raises so that it names the store, its URL masked,
and the setting that bounded the wait: "Timeout reading from socket" alone does not
say which server was silent or what to change, and ``Protocol error, got "<"`` does
not say that the port is an HTTP server's.

A store that just timed out is remembered for `FAIL_FAST_SECONDS` (by URL, in this
process): a command meanwhile fails at once with the same error. One call may send
two (the driver samples Redis's clock first, `jobbridge.clock.StoreClock`, and
swallows a failed sample), and the bound is one wait, not two.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import redis
from redis.backoff import AbstractBackoff, ExponentialBackoff, NoBackoff
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.typing import EncodableT

from jobbridge.drivers.redis.settings import RedisSettings
from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused
from jobbridge.redaction import mask_url

#: the longest a single blocking reserve waits before handing control back to the worker
MAX_BLOCK_SECONDS = 5.0
_FIRST_BACKOFF_SECONDS = 0.01
#: how long after a command to a store timed out another one fails at once, with the same error
FAIL_FAST_SECONDS = 1.0
T = TypeVar("T")
_silent: dict[str, tuple[float, str]] = {}  # URL -> (monotonic time, message) of its last timeout
_silent_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Store:
    """What an error says about the store: where it is, and what bounded the wait that failed."""

    url: str
    connect_ms: int
    response_ms: int
    #: seconds this client's reads may wait besides the response timeout (a blocking reserve's block)
    block: float = 0.0

    @property
    def name(self) -> str:
        return f"redis at {mask_url(self.url)}"

    def explained(self, exc: RedisError) -> RedisError:
        """``exc`` again, as the same kind of error, saying which store and which setting; once only."""
        text = str(exc)
        if text.startswith(self.name):
            return exc
        if isinstance(exc, InvalidResponse):
            message = (f"{self.name} is not a Redis server: it answers in another protocol (an HTTP or a "
                       "database server on that port?); check the URL's host and port")
        elif isinstance(exc, RedisTimeoutError) and "connecting" in text:
            message = (f"{self.name} did not accept a connection within connect_timeout_ms = {self.connect_ms}: "
                       "if it is only slow, raise connect_timeout_ms (JOBBRIDGE_REDIS_CONNECT_TIMEOUT_MS)")
        elif isinstance(exc, RedisTimeoutError):
            block = f" plus the {self.block:g} s a blocking reserve waits" if self.block else ""
            message = (f"{self.name} did not answer within response_timeout_ms = {self.response_ms}{block}: if it "
                       "is only slow, raise response_timeout_ms (JOBBRIDGE_REDIS_RESPONSE_TIMEOUT_MS); if it should "
                       f"answer at once, check that the URL's host and port are a Redis server's ({text})")
        else:
            message = f"{self.name} cannot be reached: {text}"
        try:
            return type(exc)(message)
        except TypeError:  # a subclass with arguments of its own
            return RedisConnectionError(message)


class Explaining(Retry):
    """redis-py's retry policy, whose last error names the store and the setting that bounded it.

    Only a dropped or refused connection is retried, never a timeout: a store that
    did not answer already cost the whole budget, and retrying it would multiply
    the bound by ``reconnect_attempts``.
    """

    def __init__(self, backoff: AbstractBackoff, retries: int, store: Store) -> None:
        super().__init__(backoff, retries, supported_errors=(RedisConnectionError,))
        self.store = store

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any], *more: Any, **options: Any) -> T:
        """redis-py's own, with what that version passes (redis-py 6 adds ``is_retryable`` and
        ``with_failure_count``; 5 has neither), so the driver runs on either."""
        with _silent_lock:
            last = _silent.get(self.store.url)
        if last is not None and time.monotonic() - last[0] < FAIL_FAST_SECONDS:
            raise RedisTimeoutError(last[1])
        try:
            return super().call_with_retry(do, fail, *more, **options)
        except (RedisConnectionError, RedisTimeoutError, InvalidResponse) as exc:
            explained = self.store.explained(exc)
            if isinstance(explained, RedisTimeoutError):
                with _silent_lock:
                    _silent[self.store.url] = (time.monotonic(), str(explained))
            if explained is exc:
                raise
            raise explained from exc


def retry_policy(settings: RedisSettings, store: Store | None = None) -> Retry:
    """What a command does when the connection drops: try again with backoff, or fail at once.

    redis-py retries three times by default; "off unless declared" means no
    retry at all unless ``reconnect`` is set. Either way a later command opens
    a fresh connection, so one refused command never poisons the client.
    """
    store = store or Store(settings.url, settings.connect_timeout_ms, settings.response_timeout_ms)
    if not settings.reconnect:
        return Explaining(NoBackoff(), 0, store)
    backoff = ExponentialBackoff(cap=settings.reconnect_max_backoff_ms / 1000, base=_FIRST_BACKOFF_SECONDS)
    return Explaining(backoff, settings.reconnect_attempts, store)


def connect(settings: RedisSettings, *, blocking: bool = False, waits: float = 0.0,
            reconnect: bool = True, keepalive: bool = False) -> redis.Redis:
    """A client on ``settings.url``; ``blocking`` gives one whose reads outlast a blocking reserve.

    A blocking XREADGROUP legitimately waits longer than ``response_timeout_ms``,
    so it gets its own client (and pool) whose read timeout is that budget plus
    the longest block, instead of loosening the budget of every other command.
    ``waits`` does the same for any other blocking command (a result store's BLPOP),
    and ``reconnect=False`` leaves retrying to a caller that has a deadline of its own.
    """
    block = MAX_BLOCK_SECONDS if blocking else waits
    store = Store(settings.url, settings.connect_timeout_ms, settings.response_timeout_ms, block)
    retry = retry_policy(settings if reconnect else replace(settings, reconnect=False), store)
    return redis.Redis.from_url(
        settings.url,
        socket_connect_timeout=settings.connect_timeout_ms / 1000,
        socket_timeout=settings.response_timeout_ms / 1000 + block,
        socket_keepalive=keepalive,
        retry=retry,
        decode_responses=False,
        client_name="jobbridge",
    )


class Direct:
    """EVALSHA on a connection of its own, for the scripts the worker's loop calls once per batch.

    redis-py's command path borrows a pooled connection per call and checks it for unread
    data (a system call), records metrics and dispatches events; the loop's reserve and
    acknowledge calls pay that once per batch, on the one thread every job waits for. Here
    the connection is kept (one per process: a forked child makes its own), used by one
    caller at a time, and the client's retry policy (`Explaining`) runs every call, so a
    dropped connection is retried as on the client, then explained, and `translated` makes
    it `DriverUnavailable`; a reply of NOSCRIPT (a restarted server forgot the script)
    loads the script again, as `Script` does. A call cut short closes the connection
    (redis-py's connection does), so the next one never reads a stale reply.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = 0

    def __call__(self, script: Script, keys: list[str], args: list[EncodableT],
                 meanwhile: Callable[[], None] | None = None) -> Any:
        """The script's reply; ``meanwhile``, when given, runs once the first request is written and before its
        reply is read (`AcknowledgingReserve`), and never again for a retry's."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        if meanwhile is not None:
            meanwhile = _once(meanwhile)
        with self._lock:
            conn = self._connection
            if conn is None or self._pid != os.getpid():
                pool = self.client.connection_pool
                conn = self._connection = pool.connection_class(**pool.connection_kwargs)
                self._pid = os.getpid()
            dropped = conn.disconnect
            try:
                return conn.retry.call_with_retry(lambda: _sent(conn, command, meanwhile), lambda _error: dropped())
            except NoScriptError:
                script.sha = self.client.script_load(script.script)
                command = ("EVALSHA", script.sha, *command[2:])
                return conn.retry.call_with_retry(lambda: _sent(conn, command, meanwhile), lambda _error: dropped())

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.disconnect()
            self._connection = None


def _once(call: Callable[[], None]) -> Callable[[], None]:
    """``call`` the first time, nothing after."""
    pending = [call]

    def first() -> None:
        if pending:
            pending.pop()()
    return first


def _sent(conn: Any, command: tuple[EncodableT, ...], meanwhile: Callable[[], None] | None = None) -> Any:
    """One command and its reply; an error reply is raised (a `ResponseError`).

    Anything else that cuts the pair short (a signal's exception between the send and the
    read, say) closes the connection: its reply, still unread, must never answer the next call.
    """
    try:
        conn.send_command(*command)
        if meanwhile is not None:
            meanwhile()  # the store works on the request meanwhile
        return conn.read_response()
    except redis.ResponseError:
        raise  # a whole reply was read: the connection is in step
    except BaseException:
        conn.disconnect()
        raise


@contextmanager
def translated() -> Iterator[None]:
    """Turn redis-py's exceptions into jobbridge's, chained with ``from``."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, InvalidResponse) as exc:
        # a client made here has said which store and which setting (`Explaining`); another has not
        said = str(exc).startswith("redis at ")
        raise DriverUnavailable(str(exc) if said else f"redis is unreachable: {exc}") from exc
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
