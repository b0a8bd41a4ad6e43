"""Reserving on RabbitMQ: a consumer per queue, whose deliveries are handed out only when asked for.

A reserved job is an unacknowledged delivery. The broker hands it back the
moment the worker's connection drops (a crash, ``kill -9``, a network cut), as
a redelivery: quorum queues count it in ``x-delivery-count``, classic queues
flag it ``redelivered``, and the attempt handed out counts it (`redeliveries`).

Each queue a worker reserves from gets one consumer on the reserving channel,
its prefetch (``basic.qos``, per consumer) the ``prefetch`` setting or, when 0,
the jobs the worker holds from that queue plus those it asks for: what it can
start, so no delivery waits behind a busy thread (a worker that asks for more
than before gets one more consumer for the difference). A delivery the broker sent
ahead waits in this process only until the next reserve, which takes the
queues in the order given.

A reserve hands out what arrived (read in bulk, `jobbridge.drivers.amqp.inbox`).
When a delivery may be on its way that it must not miss (`Consumers.worth_a_look`),
it sends one ``queue.declare`` (passive) per short queue on the same channel:
the broker writes every delivery it made before answering ahead of the answer,
so after it the deliveries that were on their way are here, and its count says
whether more are coming; a queue whose prefetch window is full is not asked.
A busy worker's reserve skips that round trip. A blocking reserve waits on the
socket, giving up the lock in short steps so that settling on another thread is
never held behind it.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import amqp

from jobbridge.drivers.amqp import frames, inbox
from jobbridge.drivers.amqp.connection import Link
from jobbridge.drivers.amqp.publisher import Declarations
from jobbridge.drivers.amqp.settings import AmqpSettings

#: seconds a blocking reserve holds the channel's lock at a time
WAIT_STEP = 0.05
#: seconds a reserve waits for deliveries the broker said are on their way
SETTLE = 0.5


class Delivery(NamedTuple):
    """One delivery as it arrived: its queue, tag, body, and how often the broker had handed it out before.

    A tuple, not a frozen dataclass: one is made per job, and a frozen dataclass sets each field
    through ``object.__setattr__``. ``job_id`` is the message id as it came (bytes when `inbox`
    read it), read only to name a job whose body does not decode.
    """

    queue: str
    tag: int
    body: bytes
    redeliveries: int
    generation: int
    job_id: str | bytes | None


def redeliveries(message: Any) -> int:
    """How many times the broker handed this message out before (a crashed or cut-off worker each time).

    A quorum queue counts them in ``x-delivery-count`` and flags the delivery ``redelivered``; a
    classic queue only flags it (counted as one). The header of a first delivery is not read: a job
    dead-lettered out of a delay stage carries the stage's count, which is no attempt of its own.
    """
    if not message.delivery_info.get("redelivered"):
        return 0
    headers = message.properties.get("application_headers") or {}
    count = headers.get("x-delivery-count")
    return count if isinstance(count, int) and count > 0 else 1


class Consumers:
    """The reserving connection: consumers, the deliveries not yet handed out, and settling by tag."""

    def __init__(self, settings: AmqpSettings, declarations: Declarations) -> None:
        self.settings, self.declarations = settings, declarations
        self.link = Link(settings, "reserving", self._opened)
        self.buffer: dict[str, deque[Delivery]] = {}
        #: queue -> the prefetch of its consumers together
        self._consuming: dict[str, int] = {}
        self._started = 0
        #: queues whose latest consumer started since the last look: its first deliveries may be on their way
        self._fresh: set[str] = set()
        #: consumer tag (bytes) -> where its plain deliveries go when `inbox` decodes them
        self._fast: dict[bytes, inbox.Fast] = {}
        #: deliveries handed back (rejected to their queue) whose redelivery has not arrived yet
        self.returning = 0
        #: jobs this process pushed since its last catch-up, by queue: a count may be read before they land
        self.pushed: dict[str, int] = {}

    def _opened(self, ch: amqp.Channel) -> None:
        self.returning = 0
        self.buffer.clear()
        self._consuming.clear()
        self._fresh.clear()
        self._fast.clear()

    def ensure(self, ch: amqp.Channel, queues: Sequence[str], limit: int, held: Mapping[str, int]) -> None:
        """Consumers on each queue (declared first) whose prefetch covers the jobs held from it plus ``limit``.

        A consumer's prefetch is fixed when it starts, so when the worker asks for
        more than a queue's consumers can hand it, one more consumer starts with the
        difference; none is cancelled (a cancelled consumer's deliveries in flight come
        back as redeliveries, counted as attempts). A fixed ``prefetch`` setting is
        never exceeded.
        """
        for queue in queues:
            want = min(self.settings.prefetch or max(1, held.get(queue, 0) + limit), 65535)
            have = self._consuming.get(queue, 0)
            if have >= want:
                continue
            if not have:
                self.declarations.queue(ch, queue)
            self._started += 1
            tag = f"jobbridge:{queue}:{self._started}"
            ch.basic_qos(0, want - have, False)
            self._fast[tag.encode()] = self._arrived_plain(queue, self.link.generation)
            ch.basic_consume(self.declarations.topology.queue(queue), consumer_tag=tag,
                             callback=self._arrived(queue, self.link.generation))
            self._consuming[queue] = want
            self._fresh.add(queue)
            self.buffer.setdefault(queue, deque())

    def _arrived(self, queue: str, generation: int) -> Callable[[Any], None]:
        def arrived(message: Any) -> None:
            again = redeliveries(message)
            if again and self.returning:
                self.returning -= 1
            self.buffer.setdefault(queue, deque()).append(Delivery(
                queue, message.delivery_tag, bytes(message.body), again, generation,
                message.properties.get("message_id")))
        return arrived

    def _arrived_plain(self, queue: str, generation: int) -> inbox.Fast:
        """As `_arrived`, for a delivery `inbox` decoded: no headers, so a redelivery is counted once."""
        waiting = self.buffer.setdefault(queue, deque())

        def arrived(tag: int, redelivered: bool, body: bytes, job_id: bytes) -> None:
            if redelivered and self.returning:
                self.returning -= 1
            waiting.append(Delivery(queue, tag, body, int(redelivered), generation, job_id))
        return arrived

    def take(self, queues: Sequence[str], limit: int) -> list[Delivery]:
        """Up to ``limit`` buffered deliveries, the queues emptied in the order given."""
        got: list[Delivery] = []
        for queue in queues:
            waiting = self.buffer.get(queue)
            while waiting and len(got) < limit:
                got.append(waiting.popleft())
        return got

    def drain(self, ch: amqp.Channel, timeout: float) -> bool:
        """Read what arrived within ``timeout`` (0: what is here already); False when nothing did."""
        return inbox.drain(ch.connection, timeout, self._fast)

    def worth_a_look(self, queues: Sequence[str], given: Sequence[str], held: Mapping[str, int], *, idle: bool
                     ) -> bool:
        """Whether a reserve that handed out ``given`` (queue of each, in order) should ask the broker what is coming.

        The broker sends each consumer what its window allows the moment it has it, so
        a look (one round trip) only pays when a delivery may be on its way that the
        reserve must not miss: a push or a hand-back of this process not yet seen
        arrive, a consumer just started, a queue ahead of one that gave jobs coming up
        empty (its deliveries in flight go first), or, for an ``idle`` reserve (one
        that waits for nothing and holds nothing from these queues), any job at all.
        A reserve of a busy worker skips it: what is in flight arrives by its next one.
        """
        if self.returning or self._fresh.intersection(queues) or any(self.pushed.get(q) for q in queues):
            return True
        if not given:
            return idle and not any(held.get(q) for q in queues)
        last = max(queues.index(q) for q in set(given))
        return any(q not in given for q in queues[:last])

    def catch_up(self, ch: amqp.Channel, queues: Sequence[str], want: int, held: Mapping[str, int]) -> None:
        """Bring in the deliveries on their way to the short queues, waiting briefly for those the broker sent.

        A queue whose consumers' window is full (its held and buffered deliveries at
        their prefetch) is left out: the broker sends it nothing more until one is settled.
        """
        # a quorum queue may answer the count before it took back a rejected delivery or a confirmed push
        coming = self.returning + sum(self.pushed.pop(q, 0) for q in queues if q in self._consuming)
        for queue in queues:
            if self.buffer.get(queue) or self.window_full(queue, held):
                continue
            _, ready, _ = ch.queue_declare(self.declarations.topology.queue(queue), passive=True)
            coming += ready
        self._fresh.difference_update(queues)
        self.drain(ch, 0)
        deadline = time.monotonic() + SETTLE
        while coming and sum(len(self.buffer.get(q, ())) for q in queues) < want and time.monotonic() < deadline:
            if all(self.window_full(q, held) for q in queues):
                break
            self.drain(ch, min(WAIT_STEP, max(0.0, deadline - time.monotonic())))
        self.returning = 0

    def window_full(self, queue: str, held: Mapping[str, int]) -> bool:
        """Whether ``queue``'s consumers hold as many unsettled deliveries as their prefetch lets the broker send."""
        return held.get(queue, 0) + len(self.buffer.get(queue, ())) >= self._consuming.get(queue, 0)

    def wait(self, queues: Sequence[str], limit: int, seconds: float) -> None:
        """Block up to ``seconds`` for a delivery on ``queues``, the lock given up between steps."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.link.lock:
                if any(self.buffer.get(q) for q in queues):
                    return
                arrived = self.link.call("wait for jobs", lambda ch: self.drain(
                    ch, min(WAIT_STEP, max(0.0, deadline - time.monotonic()))))
            if arrived and any(self.buffer.get(q) for q in queues):
                return
            time.sleep(0)  # let a thread waiting for the lock take it

    def held(self, delivery: Delivery) -> bool:
        """Whether the delivery is still this connection's to settle (taken since it last opened)."""
        return delivery.generation == self.link.generation and self.link.open

    def acknowledge(self, ch: amqp.Channel, deliveries: Sequence[Delivery], lowest: int | None = None) -> None:
        """Ack ``deliveries``; ``lowest`` is the lowest tag this channel still holds unacknowledged besides them
        (None: none).

        Every tag of the batch below ``lowest`` goes in one ``basic.ack`` with ``multiple``
        (it acknowledges every tag up to it, and none of those is anyone else's); the rest one by one.
        """
        tags = sorted(d.tag for d in deliveries)
        covered = len(tags) if lowest is None else bisect.bisect_left(tags, lowest)
        acks = [(tag, False) for tag in tags]
        if covered > 1:
            acks[:covered] = [(tags[covered - 1], True)]
        conn: Any = ch.connection
        if conn is None or not ch.is_open:
            raise amqp.exceptions.RecoverableConnectionError("acknowledge: the channel is closed")
        conn.transport.write(frames.acks(ch.channel_id, acks))  # one write, however many frames
        conn.bytes_sent += 1

    def lowest_outstanding(self) -> int | None:
        """The lowest tag of the deliveries received on this channel and not yet handed out (None: none).

        Each queue's deliveries wait in the order they arrived, so in the order of their tags, and
        the buffer holds only this channel's (it is emptied when the connection opens again).
        """
        firsts = [waiting[0].tag for waiting in self.buffer.values() if waiting]
        return min(firsts) if firsts else None

    def hand_back(self, ch: amqp.Channel, deliveries: Sequence[Delivery]) -> None:
        """Return deliveries to their queue's head, as redeliveries (a lapsed lease: a new attempt)."""
        for d in deliveries:
            ch.basic_reject(d.tag, requeue=True)
        self.returning += len(deliveries)

    def buffered(self, queue: str) -> int:
        return len(self.buffer.get(queue, ()))

    def close(self) -> None:
        self.link.close()
        self.buffer.clear()
        self._consuming.clear()
        self._fresh.clear()
        self._fast.clear()
