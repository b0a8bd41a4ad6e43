"""`RedisDriver`: the reservation protocol on Redis Streams, a consumer group per queue.

Who holds what is decided by the lease set, scored in seconds of the driver's
clock: Redis's own (`TIME`, through `jobbridge.clock.StoreClock`), so that every
worker judges every lease by one clock however far its host's clock is off; a
test's injected clock instead, so that tests cross leases without sleeping.
XAUTOCLAIM is the real-time safety net for an entry claimed without a lease.
The failed store (``driver.failed``, `failed.FailedStore`) and the unique-job
locks (``driver.locks``, `locks.LockStore`) are objects of their own on the same
client. See docs/redis.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.exceptions import ResponseError
from redis.typing import EncodableT

from jobbridge import limits
from jobbridge.clock import SYSTEM_CLOCK, Clock, offset_of, store_clock
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.redis import entries
from jobbridge.drivers.redis.ages import RedisAges
from jobbridge.drivers.redis.connection import MAX_BLOCK_SECONDS, Direct, as_text, connect, redacted, translated
from jobbridge.drivers.redis.entries import Receipt
from jobbridge.drivers.redis.eviction import check_eviction_policy
from jobbridge.drivers.redis.failed import FailedStore
from jobbridge.drivers.redis.keys import CONSUMER, GROUP, Keys
from jobbridge.drivers.redis.locks import LockStore
from jobbridge.drivers.redis.rate_buckets import RateBuckets
from jobbridge.drivers.redis.schedules import RedisSchedules
from jobbridge.drivers.redis.scripts import Scripts
from jobbridge.drivers.redis.settings import RedisSettings
from jobbridge.drivers.redis.throughput import RedisThroughput
from jobbridge.drivers.redis.workers import RedisWorkers
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import DriverError
from jobbridge.store_reports import QueueCounts

CAPABILITIES = Capabilities(
    is_deferred=True,
    survives_a_restart=True,
    needs_a_worker=True,
    may_lose_an_accepted_job=True,  # persistence is periodic, replication asynchronous, keys evictable
    delayed_push=True,
    per_message_release=True,
    priorities=True,
    transactional_push=False,
    blocking_reserve=True,
    max_message_bytes=entries.MAX_MESSAGE_BYTES,
)

#: envelopes per push.lua call: big enough to amortise the round trip, small enough not to stall Redis
PUSH_CHUNK = 1000
#: body bytes per push.lua call (past its first envelope): one request stays far below Redis's 1 GB
PUSH_CHUNK_BYTES = 64 * 1024 * 1024
#: delayed jobs promoted per queue per reserve; the rest follow on the next reserve
PROMOTE_BATCH = 1000
#: lapsed leases handled per reclaim.lua call
RECLAIM_BATCH = 1000
#: XAUTOCLAIM COUNT per round of the safety-net sweep
SWEEP_COUNT = 100
#: stream entries looked at (and delayed jobs deleted) per purge.lua call
PURGE_BATCH = 1000


class RedisDriver:
    """Streams for ready and reserved jobs, sorted sets for delays and leases, hashes for failures."""

    capabilities = CAPABILITIES

    def __init__(self, settings: RedisSettings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.reservation = settings.reservation
        self.keys = Keys(settings.prefix)
        self.client = connect(settings)
        # a blocking read waits longer than any other command is allowed to: its own client
        self._blocking = connect(settings, blocking=True)
        #: what deadlines are read off: Redis's clock, unless a test injected one of its own
        self.clock = store_clock(clock, self._server_time)
        self.scripts = Scripts.register(self.client)
        #: the per-batch calls of the worker's loop (reserve, acknowledge) skip redis-py's command layers
        self._direct = Direct(self.client)
        self.failed = FailedStore(self.client, self.keys, self.scripts, self.clock)
        self.locks = LockStore(self.client, self.keys, self.scripts, self.clock)
        self.rate_buckets = RateBuckets(self.client, self.keys)
        self.schedules = RedisSchedules(self)
        self.workers = RedisWorkers(self)
        self.throughput = RedisThroughput(self)
        self.ages = RedisAges(self)
        #: the result store's cancelled set and its clock, once `read_cancellations` took them
        self._cancellations: tuple[str, Clock] | None = None

    def _server_time(self) -> float:
        """Redis's clock (``TIME``): the one clock every worker on this server shares."""
        seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1_000_000

    # -- push and reserve -------------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        """Store envelopes; `StoreRefused` (before anything is stored) for one that cannot be stored."""
        if transaction is not None:
            raise DriverError("the redis driver cannot join a transaction; the app pushes after the commit")
        by_queue: dict[str, list[tuple[Envelope, bytes]]] = {}
        for env, body in entries.encoded(envelopes):
            by_queue.setdefault(env.queue, []).append((env, body))
        now, shift = self.clock.now(), offset_of(self.clock)
        with translated():
            for queue, pairs in by_queue.items():
                keys = [self.keys.queues, self.keys.stream(queue), self.keys.delayed(queue)]
                for chunk in entries.chunks(pairs, PUSH_CHUNK, PUSH_CHUNK_BYTES):
                    self.scripts.push(keys, [queue, *entries.push_args(chunk, now, shift)])

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        names = list(dict.fromkeys(queues))
        if limit <= 0 or not names:
            return []
        got, next_due = self._reserve_now(names, limit)
        if got or wait <= 0:
            return got
        block = min(wait, MAX_BLOCK_SECONDS)
        if next_due is not None:
            # wake for a delayed job falling due, not only for a push
            block = min(block, next_due - self.clock.now())
        if block > 0:
            got = self._block(names, limit, block)
        # a timed-out wait may have let a delayed job fall due: one more promote-and-claim
        return got or self._reserve_now(names, limit)[0]

    def _reserve_now(self, queues: list[str], limit: int,
                     meanwhile: Callable[[], None] | None = None) -> tuple[list[Reservation], float | None]:
        """One reserve.lua call: promote due delayed jobs, reserve in priority order, record leases.

        Also returns when the next delayed job falls due, so a blocking reserve wakes for it.
        """
        keys, args, lease_until, now = self._reserve_call(queues, limit)
        with translated():
            flat, next_due, cancelled = self._direct(self.scripts.reserve, keys, args, meanwhile)
        got = entries.claimed(flat, queues, lease_until, now, cancelled)
        return got, None if next_due is None else float(next_due)

    def _reserve_call(self, queues: list[str], limit: int) -> tuple[list[str], list[EncodableT], float, float]:
        """reserve.lua's keys and arguments, the lease deadline they grant, and the clock's now."""
        now = self.clock.now()
        lease_until = now + self.reservation
        keys = [self.keys.leases]
        for queue in queues:
            keys += [self.keys.stream(queue), self.keys.delayed(queue)]
        cancels = self._cancellations
        if cancels is not None:
            keys.append(cancels[0])
        args: list[EncodableT] = [repr(now), repr(lease_until), limit, GROUP, CONSUMER, PROMOTE_BATCH,
                                  "" if cancels is None else repr(cancels[1].now()), *queues]
        return keys, args, lease_until, now

    def read_cancellations(self, store: object) -> bool:
        """`ReadsCancellations`: a Redis result store on this server and database is read by reserve.lua.

        Its cancelled set (``cancelled_key``) is then one more key of every reserve, compared
        with the result store's own clock, as `RedisResultStore.cancelled` compares it.
        """
        key, clock, client = (getattr(store, name, None) for name in ("cancelled_key", "clock", "client"))
        if not isinstance(key, str) or clock is None or not isinstance(client, redis.Redis):
            return False
        if _server_of(client) != _server_of(self.client):
            return False
        self._cancellations = (key, clock)
        return True

    def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        """`acknowledge` then a `reserve` that never waits, in one script call: one round trip for both.

        The worker calls it when it has acknowledgements to store and room to reserve
        (`jobbridge.drivers.base.AcknowledgingReserve`). One script runs alone on the
        server, so no other client sees the first half without the second. ``meanwhile``
        runs once the request is written, before the reply is read (`connection.Direct`).
        """
        names = list(dict.fromkeys(queues))
        if not reservations:
            return self._reserve_now(names, limit, meanwhile)[0] if limit > 0 and names else []
        if limit <= 0 or not names:
            self.acknowledge(reservations)
            return []
        ack_keys, ack_args = self._acknowledge_call(reservations)
        keys, args, lease_until, now = self._reserve_call(names, limit)
        with translated():
            flat, _, cancelled = self._direct(self.scripts.acknowledge_and_reserve, [*ack_keys, *keys],
                                              [len(ack_keys), len(ack_args), *ack_args, *args], meanwhile)
        return entries.claimed(flat, names, lease_until, now, cancelled)

    def _block(self, queues: list[str], limit: int, seconds: float) -> list[Reservation]:
        """XREADGROUP BLOCK on every queue's stream: a push to any of them wakes this at once."""
        streams: dict[Any, Any] = {self.keys.stream(q): ">" for q in queues}
        with translated():
            try:
                reply = self._blocking.xreadgroup(
                    GROUP, CONSUMER, streams, count=limit, block=max(1, int(seconds * 1000))
                )
            except ResponseError as exc:
                if "NOGROUP" in str(exc):  # a stream deleted since _reserve_now created its group
                    return []
                raise
            return self._lease_reserved(list(reply or []), queues, limit)

    def _lease_reserved(self, reply: list[Any], queues: list[str], limit: int) -> list[Reservation]:
        """Record leases for what a blocking read reserved; hand back anything beyond ``limit``.

        The read and the leases are two round trips: a worker dying between them leaves
        entries pending with no lease member, which reclaim's XAUTOCLAIM sweep returns
        after a reservation of real time.
        """
        index = {self.keys.stream(q): i for i, q in enumerate(queues)}
        found = sorted(
            ((index[as_text(stream)], as_text(entry_id), fields) for stream, items in reply
             for entry_id, fields in items),
            key=lambda item: item[0],  # stable: priority order, then stream order
        )
        keep, extra = found[:limit], found[limit:]
        now = self.clock.now()
        lease_until = now + self.reservation
        if keep:
            members = {Receipt(queues[i], entry_id).member: lease_until for i, entry_id, _ in keep}
            self.client.zadd(self.keys.leases, members)
        for i in sorted({i for i, _, _ in extra}):
            ids = [entry_id for j, entry_id, _ in extra if j == i]
            self.scripts.hand_back([self.keys.stream(queues[i])], [GROUP, *ids])
        got = [entries.from_fields(queues[i], entry_id, fields, lease_until, now) for i, entry_id, fields in keep]
        return self._marked(got)

    def _marked(self, got: list[Reservation]) -> list[Reservation]:
        """A blocking read's reservations, marked as reserve.lua marks its own when cancellations are read."""
        if self._cancellations is None or not got:
            return got
        key, clock = self._cancellations
        scores = self.client.zmscore(key, [res.id for res in got])
        now = clock.now()
        return [dataclasses.replace(res, cancelled=True) if score is not None and score > now else res
                for res, score in zip(got, scores, strict=True)]

    # -- settle a reservation ---------------------------------------------------------------

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        if not reservations:
            return
        keys, args = self._acknowledge_call(reservations)
        with translated():
            # one round trip, all or nothing: XACK + XDEL + the lease members, in Lua
            self._direct(self.scripts.acknowledge, keys, args)

    def _acknowledge_call(self, reservations: Sequence[Reservation]) -> tuple[list[str], list[EncodableT]]:
        """acknowledge.lua's keys and arguments for these reservations."""
        index: dict[str, int] = {}
        pairs: list[EncodableT] = []
        for res in reservations:
            receipt: Receipt = res.receipt
            pairs += [index.setdefault(receipt.queue, len(index) + 1), receipt.entry_id]
        keys = [self.keys.leases, *(self.keys.stream(q) for q in index)]
        return keys, [GROUP, len(index), *index, *pairs]

    def release(self, reservation: Reservation, delay: float) -> None:
        self._put_back(reservation, delay, added=1)

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        self._put_back(reservation, delay, added=0)  # never started: the stored count stays

    def _put_back(self, reservation: Reservation, delay: float, *, added: int) -> None:
        receipt: Receipt = reservation.receipt
        delay = limits.release_delay(delay)  # never nan, never beyond a year: a score Redis takes
        due = "" if delay <= 0 else repr(self.clock.now() + delay)
        keys = [self.keys.leases, self.keys.stream(receipt.queue), self.keys.delayed(receipt.queue)]
        with translated():
            self.scripts.release(keys, [receipt.member, receipt.entry_id, GROUP, due, added])

    def fail(self, reservation: Reservation, error: str) -> None:
        receipt: Receipt = reservation.receipt
        env = reservation.envelope
        keys = [
            self.keys.leases, self.keys.stream(receipt.queue), self.keys.failed, self.keys.failed_job(env.id),
        ]
        # fail.lua keeps the entry's own body: nothing is re-encoded, no body is sent back
        args: list[EncodableT] = [
            receipt.member, receipt.entry_id, GROUP, repr(self.clock.now()),
            env.id, receipt.queue, _utf8(env.name), env.attempts, _utf8(error), reservation.body,
        ]
        with translated():
            self.scripts.fail(keys, args)

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        if not reservations:
            return []
        until = self.clock.now() + seconds
        members = [r.receipt.member for r in reservations]
        with translated():
            held = self.scripts.extend([self.keys.leases], [repr(until), *members])
        return [
            dataclasses.replace(r, lease_until=until) for r, h in zip(reservations, held, strict=True) if h
        ]

    def reclaim_expired(self) -> int:
        now = self.clock.now()
        total = 0
        with translated():
            while True:
                # members stay bytes: one this driver did not write is handed to the script as it is
                members = [m for m in self.client.zrangebyscore(
                    self.keys.leases, "-inf", repr(now), start=0, num=RECLAIM_BATCH) if isinstance(m, bytes)]
                names = sorted(self._queue_names() | {q for m in members if (q := _text(m.partition(b" ")[2]))})
                keys = [self.keys.leases, *(self.keys.stream(q) for q in names)]
                args: list[EncodableT] = [
                    repr(now), GROUP, CONSUMER, int(self.reservation * 1000), SWEEP_COUNT, len(names),
                    *names, *members,
                ]
                reclaimed = int(self.scripts.reclaim(keys, args))
                total += reclaimed
                if len(members) < RECLAIM_BATCH or reclaimed == 0:
                    return total

    def _queue_names(self) -> set[str]:
        """Every queue pushed to; a name that is not UTF-8 text was written by something else, and is skipped."""
        return {q for raw in self.client.smembers(self.keys.queues) if isinstance(raw, bytes) and (q := _text(raw))}

    # -- counts -----------------------------------------------------------------------------

    def counts(self) -> list[QueueCounts]:
        now = repr(self.clock.now())
        with translated():
            names = sorted(self._queue_names())
            pipe = self.client.pipeline(transaction=True)
            for queue in names:
                pipe.xlen(self.keys.stream(queue))
                pipe.xpending(self.keys.stream(queue), GROUP)
                pipe.zcount(self.keys.delayed(queue), "-inf", now)
                pipe.zcount(self.keys.delayed(queue), f"({now}", "+inf")
            replies = pipe.execute(raise_on_error=False)
        out: list[QueueCounts] = []
        for i, queue in enumerate(names):
            length, pending, due, later = replies[4 * i : 4 * i + 4]
            reserved = int(pending["pending"]) if isinstance(pending, dict) else 0  # NOGROUP: none yet
            if not all(isinstance(n, int) for n in (length, due, later)):
                continue  # a key of that name holds something else (WRONGTYPE): no queue of this driver's
            counts = QueueCounts(queue, length - reserved + due, later, reserved)
            if counts.pending:
                out.append(counts)
        return out

    def purge(self, queues: Sequence[str]) -> int:
        """purge.lua on each queue, a batch per call, up to the stream's last entry when the purge began.

        The reserved entries (the group's pending list) stay; the waiting ones and
        the delayed set go, with the unique locks their jobs still hold.
        """
        total = 0
        with translated():
            for queue in dict.fromkeys(queues):
                keys = [self.keys.stream(queue), self.keys.delayed(queue)]
                newest = self.client.xrevrange(keys[0], count=1)
                stop = as_text(newest[0][0]) if newest else "0-0"
                cursor: str | None = "-"
                while cursor is not None:
                    deleted, last = self.scripts.purge(keys, [GROUP, self.keys.lock(""), cursor, PURGE_BATCH, stop])
                    total += int(deleted)
                    cursor = None if last is None else as_text(last)
        return total

    # -- the connection ---------------------------------------------------------------------

    def check(self) -> None:
        """Warn unless Redis is set to refuse writes rather than evict keys (`eviction`)."""
        check_eviction_policy(self.client)

    def migrate(self) -> None:
        """Nothing to create: reserve.lua creates each queue's consumer group the first time it reads."""

    def describe(self) -> str:
        return f"redis {redacted(self.settings.url)} (prefix {self.settings.prefix!r})"

    def close(self) -> None:
        self._direct.close()
        self.client.close()
        self._blocking.close()


def _server_of(client: redis.Redis) -> tuple[object, ...]:
    """Which server and database a client talks to: two clients alike here see the same keys."""
    kwargs = client.connection_pool.connection_kwargs
    return tuple(kwargs.get(name) for name in ("host", "port", "path", "db"))


def _text(raw: bytes) -> str:
    """A name read back from Redis, or "" for bytes that are not UTF-8 text (no name this driver wrote)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return ""


def _utf8(text: str) -> bytes:
    """Text to store, even text no UTF-8 encoder accepts (an exception message with a lone surrogate)."""
    return text.encode("utf-8", errors="backslashreplace")
