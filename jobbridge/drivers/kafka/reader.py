"""The group consumer behind ``reserve``: subscription, per-partition buffers, offset windows, commits.

One consumer per driver (per process) joins the connection's group and is
subscribed to every queue topic it was asked to reserve from. What it reads
waits in a buffer per partition until a reserve takes it in the lock store;
a partition whose buffer is full is paused (Kafka then keeps the rest) and
resumed once it drains. Offsets are committed from the reserving thread only
(the thread that polls, so a commit never races a rebalance), up to each
partition's settled prefix (`Window`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from jobbridge.drivers.kafka.client import Admin, error_for, translated
from jobbridge.drivers.kafka.messages import Item, item_of
from jobbridge.drivers.kafka.store import LeaseStore, Reserved, Spot
from jobbridge.drivers.kafka.window import Mark, Window
from jobbridge.errors import DriverUnavailable

log = logging.getLogger("jobbridge.kafka")

#: messages taken from the client per poll
POLL_BATCH = 500
#: messages buffered per partition before it is paused
BUFFER_CAP = 500
#: seconds a reserve spends at most reading up to the ends of its queues' partitions (and at
#: most a quarter of the lease: the worker renews leases from the thread that reserves)
CATCH_UP_SECONDS = 5.0
#: one poll's wait while catching up or waiting for work
POLL_STEP = 0.05
#: how often (seconds, real time) the lock store is asked about messages other consumers hold
FOREIGN_CHECK_SECONDS = 1.0
#: settled records are forgotten in the lock store once the commit moved this far past them
FORGET_EVERY = 100
_QUIET = {KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MAX_POLL_EXCEEDED}


class Partition:
    """One assigned partition: its buffer of read messages and its offset window."""

    __slots__ = ("buffer", "forgotten", "number", "paused", "topic", "window")

    def __init__(self, topic: str, number: int) -> None:
        self.topic, self.number = topic, number
        self.buffer: dict[int, Item] = {}
        #: unknown until the committed offset is looked up or the first message arrives
        self.window: Window | None = None
        self.paused = False
        self.forgotten = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.number)


class Reader:
    """The consumer, its assigned partitions, and what was read from them."""

    def __init__(self, config: Mapping[str, Any], admin: Admin, store: LeaseStore, lease: float = 60.0) -> None:
        self._config = dict(config)
        self.catch_up_seconds = min(CATCH_UP_SECONDS, lease / 4)
        self.admin, self.store = admin, store
        self._consumer: Consumer | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, int], Partition] = {}
        self._subscribed: set[str] = set()
        self._joined = False
        self._checked = 0.0
        self.join_timeout = max(30.0, 3 * int(self._config["session.timeout.ms"]) / 1000)

    # -- the consumer and its group -----------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None or self._pid != os.getpid():
            # a forked child must not touch its parent's client (nor a lock a parent thread held)
            self._lock = threading.Lock()
            self._parts, self._subscribed, self._joined = {}, set(), False
            with translated("create the consumer"):
                self._consumer = Consumer(self._config)
            self._pid = os.getpid()
        return self._consumer

    def ensure(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` too (a rebalance), and wait until the group assigned partitions."""
        wanted = set(topics)
        consumer = self.consumer
        if not wanted <= self._subscribed:
            self.admin.ensure(wanted - self._subscribed)
            self._subscribed |= wanted
            self._joined = False
            with translated("subscribe to the queues' topics"):
                consumer.subscribe(sorted(self._subscribed), on_assign=self._assigned, on_revoke=self._revoked,
                                   on_lost=self._lost)
        deadline = time.monotonic() + self.join_timeout
        while not self._joined:
            if time.monotonic() > deadline:
                raise DriverUnavailable(
                    f"this consumer did not join its group within {self.join_timeout:g} s "
                    f"(group {self._config['group.id']!r}); are the brokers up?")
            self.poll(POLL_STEP)

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._parts[(tp.topic, tp.partition)] = Partition(tp.topic, tp.partition)
        self._joined = True

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Commit what is settled, then forget the partitions: their next owner reads on from there."""
        with self._lock:
            gone = [self._parts.pop((tp.topic, tp.partition), None) for tp in partitions]
        self._commit(consumer, [p for p in gone if p is not None])

    def _lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._parts.pop((tp.topic, tp.partition), None)

    def close(self) -> None:
        if self._consumer is not None and self._pid == os.getpid():
            with translated("close the consumer"):
                self._consumer.close()  # revokes: the settled prefix is committed
        self._consumer = None

    # -- reading ------------------------------------------------------------------------------

    def poll(self, timeout: float) -> None:
        """Read what the client has (waiting up to ``timeout``) into the partitions' buffers."""
        with translated("read messages"):
            # poll returns with the first message; consume(..., timeout) would wait out its timeout
            first = self.consumer.poll(timeout) if timeout > 0 else None
            messages = ([first] if first is not None else []) + self.consumer.consume(POLL_BATCH, 0)
        full: list[Partition] = []
        errors: list[KafkaError] = []
        with self._lock:
            # every message is buffered before an error is raised: one read and dropped would be
            # taken for a gap in the offsets, and committed past
            for message in messages:
                error = message.error()
                if error is not None:
                    errors.append(error)
                    continue
                part = self._parts.get((str(message.topic()), int(message.partition() or 0)))
                if part is None:
                    continue
                item = item_of(message)
                if part.window is None:
                    part.window = Window(item.spot.offset)  # reading starts at the committed offset
                part.window.read(item.spot.offset)
                part.buffer[item.spot.offset] = item
                if len(part.buffer) >= BUFFER_CAP and not part.paused:
                    part.paused = True
                    full.append(part)
        if full:
            with translated("pause full partitions"):
                self.consumer.pause([p.tp for p in full])
        for error in errors:
            if error.fatal() or error.code() == KafkaError._ALL_BROKERS_DOWN:
                raise error_for("read messages", error)
            if error.code() not in _QUIET:
                log.warning("kafka consumer: %s", error)

    def catch_up(self, topics: Iterable[str]) -> None:
        """Read until each partition of ``topics`` is at the end the broker reported (or full)."""
        wanted = set(topics)
        self._resolve_starts()
        with self._lock:
            parts = [p for p in self._parts.values() if p.topic in wanted]
        ends = self._ends(parts)
        deadline = time.monotonic() + self.catch_up_seconds
        while time.monotonic() < deadline:
            with self._lock:
                behind = [p for p in parts if self._parts.get((p.topic, p.number)) is p and not p.paused
                          and (p.window is None or p.window.next < ends[(p.topic, p.number)])]
            if not behind:
                break
            self.poll(POLL_STEP)
        # a broker may report the end as the start of its last batch: that batch's tail is here already
        self.poll(0)

    def _ends(self, parts: Sequence[Partition]) -> dict[tuple[str, int], int]:
        """Where each partition ends: the broker's answer, or the last fetch's high watermark if later.

        The broker's answer may be the start of its last batch + 1 (Tansu): once that batch was
        fetched, its high watermark (kept by the client, no round trip) says where it really ends.
        """
        ends = self.admin.offsets([(p.topic, p.number) for p in parts])
        with translated("read high watermarks"):
            for p in parts:
                _, high = self.consumer.get_watermark_offsets(p.tp, cached=True)
                ends[(p.topic, p.number)] = max(ends[(p.topic, p.number)], int(high))
        return ends

    def _resolve_starts(self) -> None:
        """Look up where reading starts for partitions that have read nothing yet."""
        with self._lock:
            unknown = [p for p in self._parts.values() if p.window is None]
        if not unknown:
            return
        with translated("look up committed offsets"):
            committed = self.consumer.committed([p.tp for p in unknown], timeout=self.admin.timeout)
        starts = {(tp.topic, tp.partition): tp.offset for tp in committed}
        missing = [key for key, offset in starts.items() if offset < 0]
        starts.update(self.admin.offsets(missing, earliest=True))
        with self._lock:
            for p in unknown:
                if p.window is None and starts.get((p.topic, p.number), -1) >= 0:
                    p.window = Window(starts[(p.topic, p.number)])
                    p.forgotten = p.window.base

    def waiting(self, topics: Iterable[str]) -> bool:
        wanted = set(topics)
        with self._lock:
            return any(p.buffer for p in self._parts.values() if p.topic in wanted)

    def candidates(self, topic: str) -> list[tuple[Partition, Item]]:
        """The buffered messages of ``topic``, oldest availability first (then by offset)."""
        with self._lock:
            found = [(p, item) for p in self._parts.values() if p.topic == topic for item in p.buffer.values()]
        return sorted(found, key=lambda pair: (pair[1].available_at, pair[1].spot.offset, pair[0].number))

    def taken(self, results: Sequence[tuple[Partition, Item, Reserved]]) -> None:
        """Messages a reserve asked for leave their buffers; their windows learn who holds them."""
        marks = {Reserved.WON: Mark.MINE, Reserved.HELD: Mark.FOREIGN, Reserved.SETTLED: Mark.DONE}
        drained: list[Partition] = []
        with self._lock:
            for part, item, found in results:
                part.buffer.pop(item.spot.offset, None)
                if part.window is not None:
                    part.window.mark(item.spot.offset, marks[found])
                if part.paused and len(part.buffer) < BUFFER_CAP // 2 and self._parts.get(
                        (part.topic, part.number)) is part:
                    part.paused = False
                    drained.append(part)
        if drained:
            with translated("resume drained partitions"):
                self.consumer.resume([p.tp for p in drained])

    # -- settling and committing --------------------------------------------------------------

    def settled(self, spots: Iterable[Spot]) -> None:
        """Jobs were settled (any thread): their offsets may be committed past."""
        with self._lock:
            for spot in spots:
                part = self._parts.get((spot.topic, spot.partition))
                if part is not None and part.window is not None:
                    part.window.mark(spot.offset, Mark.DONE)

    def commit(self) -> None:
        """From the reserving thread: check on other consumers' messages, then commit settled prefixes."""
        if self._consumer is None or self._pid != os.getpid():
            return
        self._check_foreign()
        with self._lock:
            parts = list(self._parts.values())
        done = self._commit(self._consumer, parts)
        for part in done:
            window = part.window
            if window is not None and window.committed - part.forgotten >= FORGET_EVERY:
                self.store.forget(part.topic, part.number, window.committed)
                part.forgotten = window.committed

    def _commit(self, consumer: Consumer, parts: Sequence[Partition]) -> list[Partition]:
        with self._lock:
            moved = [p for p in parts if p.window is not None and p.window.advance()]
            offsets = [TopicPartition(p.topic, p.number, p.window.base) for p in moved if p.window is not None]
        if not offsets:
            return []
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as exc:
            # nothing is lost: the offsets stay where they were, and the next commit tries again
            log.info("kafka: offsets not committed this time: %s", exc)
            return []
        ok = {(tp.topic, tp.partition): tp.offset for tp in result if tp.error is None}
        with self._lock:
            for p in moved:
                if p.window is not None and (p.topic, p.number) in ok:
                    p.window.committed_up_to(ok[(p.topic, p.number)])
        return [p for p in moved if (p.topic, p.number) in ok]

    def _check_foreign(self) -> None:
        """Ask the lock store whether messages other consumers held are settled by now."""
        if time.monotonic() - self._checked < FOREIGN_CHECK_SECONDS:
            return
        self._checked = time.monotonic()
        with self._lock:
            spots = [Spot(p.topic, p.number, offset) for p in self._parts.values()
                     if p.window is not None and p.window.blocked_by_foreign() for offset in p.window.foreign(200)]
        if spots:
            states = self.store.states(spots)
            self.settled(s for s, state in zip(spots, states, strict=True) if state is not Reserved.HELD)
