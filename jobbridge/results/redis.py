"""The Redis result store: records in hashes, cancellations and indexes in sorted sets, waits on lists.

URL: ``redis://[[user]:password@]host[:port][/db]`` or ``rediss://...``; the
connection settings are the redis driver's (`jobbridge.drivers.redis.settings`),
its timeouts included (5 s to connect, 5 s for an answer, unless written), except
that ``reconnect`` is on unless declared off: a poller should ride out a restart
(a command that timed out is not retried, so the bound holds). ``reservation`` is
refused (it is a queue's setting). Needs Redis 6.2+.

Keys, all under ``prefix`` (default ``jobbridge:``, beside the driver's keys)::

    {prefix}result:{id}             hash        state, name, result, meta (JSON), error, traceback,
                                                exception_type, created_at, updated_at, expires_at
    {prefix}results                 sorted set  result ids scored by expires_at (what prune walks)
    {prefix}result-waiters:{id}     set         tokens of the waits in progress on the id
    {prefix}result-wake:{id}:{tok}  list        pushed once when the id's record becomes ready
    {prefix}cancelled               sorted set  cancelled job ids scored by expires_at
    {prefix}counter:{key}           hash        a chord's join: remaining, expires_at
    {prefix}counter-members:{key}   set         the members that have counted
    {prefix}counters                sorted set  counter keys scored by expires_at

Expiry is judged by the clock's ``expires_at`` stored with each thing; a real
PEXPIRE of the same length is the net that removes what nobody prunes.

Waiting: a wait adds a token to the id's waiters set and reads the record in
one MULTI, then BLPOPs its own wake list, in slices of at most `BLOCK_SLICE`
seconds; result_store.lua pushes to every waiter's list when the record turns
ready. Each slice registers again and re-reads, so a registration lost to a
restart costs one slice. Every command a wait sends goes through a client of
its own with a socket timeout of a slice plus ``response_timeout_ms``, so a
connection that died silently cannot hold a wait past its deadline (Celery's
``get()`` hanging after a disconnect).
Lua scripts build the per-id wake keys themselves, so the store is not for Redis Cluster.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from redis.typing import EncodableT

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.redis.connection import connect, redacted, translated
from jobbridge.drivers.redis.settings import RedisSettings, parse_settings
from jobbridge.errors import ConfigurationError, DriverUnavailable
from jobbridge.results.base import (
    ResultRecord,
    UnknownCounter,
    check_key,
    check_record,
    decode_json,
    encode_json,
)

__all__ = ["RedisResultStore", "open_redis_store"]

#: the longest one BLPOP blocks before the wait registers and reads again
BLOCK_SLICE = 1.0
#: how long a wake list or a waiters set outlives its last use, in milliseconds
WAKE_TTL_MS = 60_000
#: ids or keys per prune.lua call
PRUNE_BATCH = 1000
_PAUSE = 0.05  # between tries while Redis refuses connections during a wait

_TEXT_FIELDS = ("name", "error", "traceback", "exception_type")


def _script_source(name: str) -> str:
    return resources.files(__package__ or "jobbridge.results").joinpath(f"{name}.lua").read_text("utf-8")


def _millis(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


class RedisResultStore:
    """Records, cancellations and counters under one key prefix, expiring by the injected clock."""

    def __init__(self, settings: RedisSettings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self.prefix = settings.prefix
        self.client = connect(settings)
        # Everything a wait sends goes through this client: its read timeout outlasts one BLPOP slice by
        # the response timeout (a connection that died silently cannot hold a wait), and it never retries
        # by itself (a wait retries within its own deadline).
        self._waiting = connect(settings, waits=BLOCK_SLICE, reconnect=False, keepalive=True)
        self._store = self.client.register_script(_script_source("result_store"))
        self._cancel = self.client.register_script(_script_source("cancel"))
        self._decrement = self.client.register_script(_script_source("counter_decrement"))
        self._prune = self.client.register_script(_script_source("prune"))

    def __repr__(self) -> str:
        return f"<RedisResultStore {self.describe()}>"

    def _key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}{kind}{name}"

    # -- results -----------------------------------------------------------------------------

    def store(self, record: ResultRecord, ttl: float) -> None:
        check_record(record)
        fields: list[EncodableT] = ["state", record.state]
        if record.result is not None:
            fields += ["result", encode_json(record.result, "result", record.id)]
        if record.meta is not None:
            fields += ["meta", encode_json(record.meta, "meta", record.id)]
        for name in _TEXT_FIELDS:
            value = getattr(record, name)
            if value is not None:
                fields += [name, value]
        now = self.clock.now()
        id = record.id
        keys = [self._key("result:", id), self._key("results"), self._key("result-waiters:", id)]
        args: list[EncodableT] = [
            id, repr(now), repr(now + ttl), _millis(ttl), "1" if record.ready else "0",
            self._key("result-wake:", f"{id}:"), WAKE_TTL_MS, repr(record.created_at or now), *fields,
        ]
        with translated():
            self._store(keys, args)

    def get(self, id: str) -> ResultRecord | None:
        with translated():
            raw = self.client.hgetall(self._key("result:", id))
        return self._record(id, raw)

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for id in unique:
                pipe.hgetall(self._key("result:", id))
            replies = pipe.execute()
        found = {id: self._record(id, raw) for id, raw in zip(unique, replies, strict=True)}
        return {id: record for id, record in found.items() if record is not None}

    def _record(self, id: str, raw: Mapping[Any, Any]) -> ResultRecord | None:
        """The record in an HGETALL reply (bytes: the client never decodes), or None when gone or expired."""
        if not raw or b"state" not in raw:
            return None
        expires_at = float(raw[b"expires_at"])
        if expires_at <= self.clock.now():
            return None
        text = {name: raw[name.encode()].decode() if name.encode() in raw else None for name in _TEXT_FIELDS}
        return ResultRecord(
            id=id, state=raw[b"state"].decode(), result=decode_json(raw.get(b"result")),
            meta=decode_json(raw.get(b"meta")), created_at=float(raw[b"created_at"]),
            updated_at=float(raw[b"updated_at"]), expires_at=expires_at, **text,
        )

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        deadline = time.monotonic() + timeout
        token = uuid.uuid4().hex
        waiters, wake = self._key("result-waiters:", id), self._key("result-wake:", f"{id}:{token}")
        record: ResultRecord | None = None
        failure: DriverUnavailable | None = None
        try:
            while True:
                try:
                    record, failure = self._watch(id, waiters, token), None
                except DriverUnavailable as error:
                    failure = error  # Redis restarting: try again until the deadline
                left = deadline - time.monotonic()
                if (record is not None and record.ready and failure is None) or left <= 0:
                    break
                if failure is None:
                    failure = self._block(wake, min(left, BLOCK_SLICE))
                if failure is not None:
                    time.sleep(min(_PAUSE, max(deadline - time.monotonic(), 0)))
        finally:
            self._unwatch(waiters, token, wake)
        if failure is not None:
            raise failure
        return record

    def _watch(self, id: str, waiters: str, token: str) -> ResultRecord | None:
        """Register this wait and read the record in one MULTI: result_store.lua sees one or the other."""
        with translated():
            pipe = self._waiting.pipeline(transaction=True)
            pipe.sadd(waiters, token)
            pipe.pexpire(waiters, WAKE_TTL_MS)
            pipe.hgetall(self._key("result:", id))
            raw = pipe.execute()[-1]
        return self._record(id, raw)

    def _block(self, wake: str, seconds: float) -> DriverUnavailable | None:
        """BLPOP this wait's own list; the error (returned, not raised) when Redis cannot be reached."""
        try:
            with translated():
                self._waiting.blpop([wake], timeout=max(seconds, 0.01))
        except DriverUnavailable as error:
            return error
        return None

    def _unwatch(self, waiters: str, token: str, wake: str) -> None:
        try:
            with translated():
                pipe = self._waiting.pipeline(transaction=False)
                pipe.srem(waiters, token)
                pipe.delete(wake)
                pipe.execute()
        except DriverUnavailable:
            pass  # both keys carry a PEXPIRE: they go by themselves

    def forget(self, id: str) -> None:
        with translated():
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(self._key("result:", id))
            pipe.zrem(self._key("results"), id)
            pipe.execute()

    def prune(self) -> int:
        keys = [self._key("results"), self._key("cancelled"), self._key("counters")]
        args: list[EncodableT] = [repr(self.clock.now()), PRUNE_BATCH, self._key("result:"),
                                  self._key("counter:"), self._key("counter-members:")]
        total = 0
        while True:
            with translated():
                results, cancelled, counters = self._prune(keys, args)
            total += int(results) + int(cancelled) + int(counters)
            if max(int(results), int(counters)) < PRUNE_BATCH:
                return total

    # -- cancellation ------------------------------------------------------------------------

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        for id in ids:
            check_key(id, "a cancelled id")
        if not ids:
            return
        args: list[EncodableT] = [repr(self.clock.now() + ttl), _millis(ttl), *dict.fromkeys(ids)]
        with translated():
            self._cancel([self._key("cancelled")], args)

    @property
    def cancelled_key(self) -> str:
        """The sorted set of cancelled ids, each scored by when its cancellation expires (`cancelled` reads it)."""
        return self._key("cancelled")

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return set()
        with translated():
            scores = self.client.zmscore(self._key("cancelled"), unique)
        now = self.clock.now()
        return {id for id, score in zip(unique, scores, strict=True) if score is not None and score > now}

    # -- counters ----------------------------------------------------------------------------

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        check_key(key, "a counter key")
        expires_at = self.clock.now() + ttl
        counter = self._key("counter:", key)
        with translated():
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(counter, self._key("counter-members:", key))
            pipe.hset(counter, mapping={"remaining": count, "expires_at": repr(expires_at)})
            pipe.pexpire(counter, _millis(ttl))
            pipe.zadd(self._key("counters"), {key: expires_at})
            pipe.execute()

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        if member is not None:
            check_key(member, "a counter member")
        keys = [self._key("counter:", key), self._key("counter-members:", key)]
        with translated():
            remaining = self._decrement(keys, [repr(self.clock.now()), member or ""])
        if remaining is None:
            raise UnknownCounter(f"there is no counter {key!r} (never set, expired or pruned)")
        return int(remaining)

    # -- life cycle --------------------------------------------------------------------------

    def describe(self) -> str:
        return f"redis at {redacted(self.settings.url)} (prefix {self.prefix!r})"

    def close(self) -> None:
        self.client.close()
        self._waiting.close()


def open_redis_store(url: str, *, clock: Clock, prefix: str = "jobbridge:", **options: Any) -> RedisResultStore:
    """A Redis result store; ``options`` are the redis driver's connection settings."""
    if "reservation" in options:
        raise ConfigurationError("reservation is a queue's setting; a result store keeps results for a ttl")
    settings = parse_settings({"reconnect": True, **options, "url": url, "prefix": prefix})
    return RedisResultStore(settings, clock=clock)
