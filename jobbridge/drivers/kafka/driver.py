"""`KafkaDriver`: the reservation protocol on Kafka topics, with per-job state in a shared lock store.

A job that is due goes to its queue's topic; a job not yet due waits as a
delayed row in the lock store and is produced when due (by whichever worker
reserves, releases, retries or reclaims first). A reserve reads the topics in
priority order and reserves each message in the lock store under a lease; the
lock store decides the one winner if two consumers read the same offset.
Settling a job marks it done there, and offsets are committed up to each
partition's settled prefix. Every deadline and due time is read off the lock
store's clock (`store_clock`), so workers whose own clocks disagree still agree
on when a lease lapses. An encoded job is at most `max_message_bytes` (the
producer's ``message.max.bytes`` less a record's key and framing); a message
Kafka refuses when a delayed job falls due goes to the failed store with why,
rather than blocking every promotion after it (`failures`). The failed store
(``driver.failed``, `failures.FailedStore`) and the unique-job locks
(``driver.locks``, `store.ScopedLocks`) are the lock store's. See docs/kafka.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobbridge.clock import SYSTEM_CLOCK, Clock, offset_of, store_clock
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.kafka.client import (
    TOPIC_PARTITIONS,
    Admin,
    Sender,
    common_config,
    consumer_config,
    message_limit,
    producer_config,
)
from jobbridge.drivers.kafka.failures import FailedStore, failed_record, unproducible
from jobbridge.drivers.kafka.messages import Item
from jobbridge.drivers.kafka.meter import Meter
from jobbridge.drivers.kafka.reader import POLL_STEP, Reader
from jobbridge.drivers.kafka.settings import KafkaSettings, topic_name
from jobbridge.drivers.kafka.store import Delayed, Held, LeaseStore, Reserved, Reserving, ScopedLocks, Spot
from jobbridge.envelope import Envelope, Reservation, new_id, reservation_from_body
from jobbridge.errors import PayloadTooLarge, StoreRefused
from jobbridge.store_reports import QueueCounts

#: delayed rows produced per round of a promotion
PROMOTE_BATCH = 1000
#: seconds (driver clock) a promoter holds the rows it took; if it dies, they are due again after this
PROMOTE_FENCE = 60.0
#: lapsed leases put back per lock-store call
RECLAIM_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Receipt:
    """Where the message sits, and the lease's token in the lock store."""

    spot: Spot
    token: str

    @property
    def held(self) -> Held:
        return Held(self.spot, self.token)


class KafkaDriver:
    """Topics for due jobs; leases, delayed jobs and failures in the lock store."""

    def __init__(self, settings: KafkaSettings, store: LeaseStore, *, clock: Clock = SYSTEM_CLOCK,
                 config: Mapping[str, Any] | None = None, consumer: Mapping[str, Any] | None = None,
                 partitions: int = TOPIC_PARTITIONS) -> None:
        self.settings = settings
        self.store = store
        read = store.server_clock()
        self.clock = store_clock(clock, read) if read is not None else clock
        self.reservation = settings.lease
        extra = dict(config or {})
        self._producer_config = producer_config(settings.brokers, extra)
        self.max_message_bytes = message_limit(self._producer_config)
        self.capabilities = Capabilities(
            is_deferred=True, survives_a_restart=True, needs_a_worker=True,
            # due jobs are on Kafka (acks=all); delayed ones and failures are in the lock store
            may_lose_an_accepted_job=bool(store.may_lose_an_accepted_job),
            delayed_push=True, per_message_release=True, priorities=True, transactional_push=False,
            blocking_reserve=True, max_message_bytes=self.max_message_bytes,
        )
        self.admin = Admin(common_config(settings.brokers, extra), partitions)
        reading = consumer_config(settings.brokers, settings.group, {**extra, **(consumer or {})})
        self.reader = Reader(reading, self.admin, store, settings.lease)
        self.meter = Meter(reading, self.admin)
        self._sender: Sender | None = None
        self._sender_pid = 0
        self._reserving = threading.Lock()
        self.failed = FailedStore(store, self.clock, self._promote)
        # unique locks are this connection's own, apart from the lock store connection's locks
        self.locks = ScopedLocks(store.locks, f"kafka:{hashlib.sha1(settings.scope.encode()).hexdigest()[:12]}:")

    # -- names --------------------------------------------------------------------------------

    def topic(self, queue: str) -> str:
        return topic_name(self.settings.topic_prefix, queue)

    def queue_of(self, topic: str) -> str:
        return topic[len(self.settings.topic_prefix):]

    @property
    def sender(self) -> Sender:
        if self._sender is None or self._sender.broken or self._sender_pid != os.getpid():
            self._sender, self._sender_pid = Sender(self._producer_config), os.getpid()
        return self._sender

    def _produce(self, messages: Sequence[tuple[str, str, bytes]]) -> None:
        """``(queue, key, body)`` onto the queues' topics: produced in full, then one flush."""
        if messages:
            self.admin.ensure({self.topic(q) for q, _, _ in messages})
            self.sender.send((self.topic(q), key, body) for q, key, body in messages)

    # -- push and reserve ---------------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        """Due jobs onto their topics, the others into the lock store as delayed rows.

        ``available_at`` was read off this process's clock; it is moved onto the
        store's, which every worker judges due times by.
        """
        if transaction is not None:
            raise TypeError("the kafka driver cannot join a transaction; the app pushes after the commit")
        for queue in {env.queue for env in envelopes}:
            self.topic(queue)  # a queue Kafka cannot name fails before anything is stored
        now, shift = self.clock.now(), offset_of(self.clock)
        placed = [e.replace(available_at=e.available_at + shift) if shift else e for e in envelopes]
        bodies = [(e, e.encode()) for e in placed]
        for env, body in bodies:
            if len(body) > self.max_message_bytes:
                raise PayloadTooLarge(
                    f"job {env.id} ({env.name}) is {len(body)} bytes encoded, and this kafka connection produces "
                    f"at most {self.max_message_bytes} (message.max.bytes less a record's key and framing): keep "
                    "large data elsewhere and pass its key, or raise message.max.bytes on the brokers and in "
                    "the client config")
        later = [Delayed(new_id(), e.queue, e.available_at, e.id, body) for e, body in bodies if e.available_at > now]
        self._produce([(e.queue, e.id, body) for e, body in bodies if e.available_at <= now])
        self.store.add_delayed(later)

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        names = list(dict.fromkeys(queues))
        if limit <= 0 or not names:
            return []
        topics = [self.topic(q) for q in names]
        deadline = time.monotonic() + max(wait, 0.0)
        with self._reserving:
            self.reader.commit()
            self._promote()
            self.reader.ensure(topics)
            got = self._reserve_now(names, topics, limit, catch_up=True)
            while not got and time.monotonic() < deadline:
                self.reader.poll(min(POLL_STEP * 4, max(0.0, deadline - time.monotonic())))
                if self.reader.waiting(topics):
                    got = self._reserve_now(names, topics, limit, catch_up=False)
            return got

    def _reserve_now(self, queues: list[str], topics: list[str], limit: int, *, catch_up: bool) -> list[Reservation]:
        """Reserve in priority order: a queue's topic is read to its end before the next one is tried."""
        got: list[Reservation] = []
        for queue, topic in zip(queues, topics, strict=True):
            if catch_up:
                self.reader.catch_up([topic])
            got += self._reserve_from(queue, topic, limit - len(got))
            if len(got) >= limit:
                break
        return got

    def _reserve_from(self, queue: str, topic: str, room: int) -> list[Reservation]:
        """Up to ``room`` of one topic's buffered messages, each reserved in the lock store (one call a round)."""
        got: list[Reservation] = []
        while len(got) < room:
            now = self.clock.now()
            candidates = self.reader.candidates(topic)
            # a message not yet due is parked as a delayed row (it never blocks the ones behind it)
            parked = [(p, item) for p, item in candidates if item.available_at > now]
            ready = [(p, item) for p, item in candidates if item.available_at <= now][: room - len(got)]
            if not parked and not ready:
                break
            pairs = parked + ready
            asks = [self._parking(queue, item) for _, item in parked]
            handed = [self._handing_out(queue, item, now) for _, item in ready]
            results = self.store.reserve(asks + [ask for ask, _ in handed])
            self.reader.taken([(p, item, r) for (p, item), r in zip(pairs, results, strict=True)])
            got += [res for (_, res), result in zip(handed, results[len(parked):], strict=True)
                    if result is Reserved.WON]
            if not ready:
                break
        return got

    def _parking(self, queue: str, item: Item) -> Reserving:
        """Settle the spot, and keep the message as it is in a delayed row until it is due."""
        return Reserving(item.spot, queue, new_id(), item.available_at, item.job_id, item.body, park=True)

    def _handing_out(self, queue: str, item: Item, now: float) -> tuple[Reserving, Reservation]:
        """The lease to reserve (it keeps the envelope as handed out) and the reservation if it is won."""
        token, until = new_id(), now + self.reservation
        res = reservation_from_body(item.body, receipt=Receipt(item.spot, token), lease_until=until, now=now,
                                    id_hint=item.job_id, queue_hint=queue, attempts_added=1)
        body = item.body if res.decode_error is not None else res.envelope.encode()
        return Reserving(item.spot, queue, token, until, res.id, body), res

    def _promote(self) -> None:
        """Produce the delayed rows that are due, then drop them (a crash in between: produced twice).

        A row Kafka will not take (larger than this producer's limit, or refused by
        the broker) goes to the failed store instead: left delayed, it would fail
        every promotion after it, and bring its batch back each time.
        """
        now = self.clock.now()
        token = new_id()
        while True:
            rows = self.store.take_due(now, now + PROMOTE_FENCE, token, PROMOTE_BATCH)
            fits = [r for r in rows if len(r.body) <= self.max_message_bytes]
            for row in rows:
                if len(row.body) > self.max_message_bytes:
                    why = f"{len(row.body)} bytes, more than the {self.max_message_bytes} this connection produces"
                    self.store.fail_delayed(row.id, token, unproducible(row, why, now))
            try:
                self._produce([(r.queue, r.job_id, r.body) for r in fits])
            except StoreRefused:
                fits = self._one_by_one(fits, token, now)
            self.store.drop_delayed([r.id for r in fits], token)
            if len(rows) < PROMOTE_BATCH:
                return

    def _one_by_one(self, rows: list[Delayed], token: str, now: float) -> list[Delayed]:
        """After the broker refused a batch: each row alone; the refused ones are failed. The rows produced."""
        produced = []
        for row in rows:
            try:
                self._produce([(row.queue, row.job_id, row.body)])
                produced.append(row)
            except StoreRefused as exc:
                self.store.fail_delayed(row.id, token, unproducible(row, str(exc), now))
        return produced

    # -- settle a reservation -----------------------------------------------------------------

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        if not reservations:
            return
        receipts: list[Receipt] = [r.receipt for r in reservations]
        self.store.acknowledge([r.held for r in receipts])
        # whether or not the token still held (a reclaim settles it too), the offset is settled
        self.reader.settled(r.spot for r in receipts)

    def release(self, reservation: Reservation, delay: float) -> None:
        self._send_again(reservation, delay, reservation.envelope.attempts)

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """As `release`, with the attempts before this delivery: the job never started."""
        self._send_again(reservation, delay, max(0, reservation.envelope.attempts - 1))

    def _send_again(self, reservation: Reservation, delay: float, attempts: int) -> None:
        receipt: Receipt = reservation.receipt
        due = self.clock.now() + max(delay, 0.0)
        if reservation.decode_error is not None:
            body = reservation.body
        else:
            body = reservation.envelope.replace(available_at=due, attempts=attempts).encode()
        row = Delayed(new_id(), self.queue_of(receipt.spot.topic), due, reservation.id, body)
        held = self.store.release(receipt.held, row)
        self.reader.settled([receipt.spot])
        if held and delay <= 0:
            self._promote()

    def fail(self, reservation: Reservation, error: str) -> None:
        receipt: Receipt = reservation.receipt
        env = reservation.envelope
        record = failed_record(reservation.id, self.queue_of(receipt.spot.topic), env.name, env.attempts, error,
                               self.clock.now(), reservation.stored_body())
        self.store.fail(receipt.held, record)
        self.reader.settled([receipt.spot])

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        if not reservations:
            return []
        until = self.clock.now() + seconds
        held = self.store.extend([r.receipt.held for r in reservations], until)
        return [dataclasses.replace(r, lease_until=until) for r, h in zip(reservations, held, strict=True) if h]

    def reclaim_expired(self) -> int:
        now = self.clock.now()
        total = 0
        while True:
            spots = self.store.reclaim(now, RECLAIM_BATCH)
            self.reader.settled(spots)
            total += len(spots)
            if len(spots) < RECLAIM_BATCH:
                break
        self._promote()
        return total

    # -- counts -------------------------------------------------------------------------------

    def _unread(self, topic: str, partitions: list[int]) -> int:
        """Messages the group has not settled: past the committed offset and without a record."""
        starts, total = self.meter.unread(topic, partitions)
        return max(0, total - self.store.records_from(topic, starts))

    def counts(self) -> list[QueueCounts]:
        prefix = self.settings.topic_prefix
        topics = {t: parts for t, parts in self.admin.topics().items()
                  if t.startswith(prefix) and not t.startswith("__") and len(t) > len(prefix)}
        reserved = self.store.reserved()
        delayed = self.store.delayed(self.clock.now())
        queues = sorted({self.queue_of(t) for t in topics} | set(reserved) | set(delayed))
        out: list[QueueCounts] = []
        for queue in queues:
            later = delayed.get(queue)
            ready = self._unread(self.topic(queue), topics.get(self.topic(queue), []))
            counts = QueueCounts(queue, ready + (later.due if later else 0), later.later if later else 0,
                                 reserved.get(queue, 0))
            if counts.pending:
                out.append(counts)
        return out

    def purge(self, queues: Sequence[str]) -> int:
        """Refused: Kafka cannot delete the waiting jobs of a topic and keep the reserved ones.

        A topic's records are deleted only by truncating a partition up to an offset,
        which takes the reserved jobs before it with the waiting ones; and a partition
        is read only by the worker the group assigned it to, so no other process can
        take its waiting jobs off it either.
        """
        raise StoreRefused(
            "the kafka driver cannot purge waiting jobs: Kafka deletes a topic's records only by truncating "
            "a partition up to an offset, which would delete the reserved jobs among them too, and only the "
            "worker a partition is assigned to reads it. Let the workers run the jobs, or deploy a job class "
            "whose handle() returns at once under the name to drop, until the queue is empty")

    # -- the connection -----------------------------------------------------------------------

    def migrate(self) -> None:
        """The lock store's tables (topics are created when first pushed to or reserved from)."""
        self.store.migrate()

    def check(self) -> None:
        """The lock store's own check: on Redis, a warning unless it refuses writes rather than evict keys
        (delayed and failed jobs live there)."""
        self.store.check()

    def describe(self) -> str:
        s = self.settings
        return (f"kafka {','.join(s.brokers)} (group {s.group!r}, topics {s.topic_prefix}<queue>; "
                f"leases in {self.store.describe()})")

    def close(self) -> None:
        self.reader.close()
        self.meter.close()
        if self._sender is not None and self._sender_pid == os.getpid():
            self._sender.close()
        self._sender = None

