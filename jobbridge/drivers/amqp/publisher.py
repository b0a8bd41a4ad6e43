"""Pushing to RabbitMQ: persistent messages, published in batches and confirmed by the broker.

A push returns only once the broker confirmed every message of it (publisher
confirms: on a quorum queue, once a majority of its replicas wrote it), so a
job whose dispatch returned survives a broker restart. Messages are encoded
`BATCH` to a socket write (`jobbridge.drivers.amqp.frames`) and written back to
back, the confirms that came back read between batches (in bulk, as
`jobbridge.drivers.amqp.inbox` reads deliveries); the push waits only
when more than `IN_FLIGHT` are unconfirmed, and at its end for the last. A
message the broker refuses (a negative confirm, or returned as unroutable
because its queue is gone) fails the push with `StoreRefused`. The
declarations a push needs (the queue, its delay stages) are made on the
publishing channel the first time this process pushes there (`Declarations`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import amqp

from jobbridge.drivers.amqp import inbox
from jobbridge.drivers.amqp.connection import Link
from jobbridge.drivers.amqp.frames import PublishFrames
from jobbridge.drivers.amqp.settings import AmqpSettings
from jobbridge.drivers.amqp.topology import BITS, Route, Topology
from jobbridge.errors import DriverUnavailable, StoreRefused

#: messages encoded into one socket write
BATCH = 500
#: messages a push may have written beyond those confirmed before it waits for confirms (all of them at its end)
IN_FLIGHT = 4000


@dataclass(slots=True)
class Outgoing:
    """One message to publish."""

    route: Route
    body: bytes
    job_id: str
    queue: str


@dataclass(slots=True)
class _Confirms:
    """Which delivery tags the broker confirmed on this channel: all up to ``low``, and some beyond."""

    low: int = 0
    seq: int = 0
    single: set[int] = field(default_factory=set)
    refused: list[str] = field(default_factory=list)

    def ack(self, tag: int, multiple: bool) -> None:
        if multiple:
            self.low = max(self.low, tag)
        else:
            self.single.add(tag)
        while self.low + 1 in self.single:
            self.low += 1
            self.single.discard(self.low)

    def nack(self, tag: int, multiple: bool) -> None:
        self.refused.append(f"the broker refused message {tag} (a negative confirm: a queue at its length limit, "
                            "or a replica set that could not write it)")
        self.ack(tag, multiple)


class Declarations:
    """What this process declared already, so each queue and stage is declared once per connection's life."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.queues: set[str] = set()
        self.staged: set[str] = set()
        self.parked: set[str] = set()
        self.exchanges = False

    def queue(self, ch: amqp.Channel, queue: str) -> None:
        if queue in self.queues:
            return
        t = self.topology
        ch.queue_declare(t.queue(queue), durable=True, auto_delete=False, arguments=t.queue_arguments())
        self.queues.add(queue)

    def stages(self, ch: amqp.Channel, queue: str) -> None:
        """The exchanges (once), then every stage of ``queue`` and its bindings: a delay of any length routes."""
        if queue in self.staged:
            return
        t = self.topology
        if not self.exchanges:
            for k in range(-1, BITS):
                ch.exchange_declare(t.exchange(k), "topic", durable=True, auto_delete=False)
            for destination, source, pattern in t.exchange_bindings():
                ch.exchange_bind(destination, source, pattern)
            self.exchanges = True
        self.queue(ch, queue)
        ch.queue_bind(t.queue(queue), t.exchange(-1), t.ready_binding(queue))
        for k in range(BITS):
            ch.queue_declare(t.stage(queue, k), durable=True, auto_delete=False, arguments=t.stage_arguments(k))
            ch.queue_bind(t.stage(queue, k), t.exchange(k), t.stage_binding(queue, k))
        self.staged.add(queue)

    def forget(self) -> None:
        self.queues.clear()
        self.staged.clear()
        self.parked.clear()
        self.exchanges = False


class Publisher:
    """The publishing connection: confirm mode, returns and confirms tracked per channel."""

    def __init__(self, settings: AmqpSettings, declarations: Declarations) -> None:
        self.settings, self.declarations = settings, declarations
        self._confirms = _Confirms()
        self._frames = PublishFrames(0, 4096)
        self.link = Link(settings, "publishing", self._opened)

    def _opened(self, ch: amqp.Channel) -> None:
        ch.confirm_select()
        confirms = self._confirms = _Confirms()
        self._frames = PublishFrames(ch.channel_id, ch.connection.frame_max)
        ch.events["basic_ack"].add(confirms.ack)
        ch.events["basic_nack"].add(confirms.nack)
        ch.events["basic_return"].add(lambda exc, exchange, key, message: confirms.refused.append(
            f"the broker returned a message for {key.rsplit('.', 1)[-1]!r} as unroutable ({exc}): its queue was "
            "deleted while this process used it; push again to declare it anew"))
        self.declarations.forget()  # a new connection may be to a broker that lost them

    def publish(self, messages: Sequence[Outgoing]) -> None:
        """Publish and await every confirm; a connection found dead is reopened once (nothing was sent on it)."""
        if not messages:
            return
        was_open = self.link.open
        try:
            self.link.call("push jobs", lambda ch: self._publish(ch, messages))
        except DriverUnavailable:
            if not was_open:
                raise
            self.link.call("push jobs", lambda ch: self._publish(ch, messages))

    def _publish(self, ch: amqp.Channel, messages: Sequence[Outgoing]) -> None:
        for queue in {m.queue for m in messages}:
            self.declarations.queue(ch, queue)
        for queue in {m.queue for m in messages if m.route.stages}:
            self.declarations.stages(ch, queue)
        for m in messages:
            if m.route.parked and m.route.key not in self.declarations.parked:
                ch.queue_declare(m.route.key, durable=True, auto_delete=False,
                                 arguments=self.declarations.topology.queue_arguments())
                self.declarations.parked.add(m.route.key)
        confirms, frames, conn = self._confirms, self._frames, ch.connection
        for start in range(0, len(messages), BATCH):
            batch = messages[start:start + BATCH]
            data = b"".join([frames.encode(m.route.exchange, m.route.key, m.body, m.job_id) for m in batch])
            conn.transport.write(data)
            conn.bytes_sent += 1  # py-amqp's heartbeat counts writes
            confirms.seq += len(batch)
            if start + BATCH < len(messages):
                self._read_confirms(conn)  # what came back meanwhile, so that neither side's buffers fill up
                self._await(ch, confirms, leave=IN_FLIGHT)
        self._await(ch, confirms)

    @staticmethod
    def _read_confirms(conn: Any) -> None:
        inbox.drain(conn, 0)

    def _await(self, ch: amqp.Channel, confirms: _Confirms, leave: int = 0) -> None:
        """Until at most ``leave`` messages await their confirm; then fail the push if any was refused."""
        deadline = time.monotonic() + self.settings.request_timeout
        conn: Any = ch.connection
        while confirms.seq - confirms.low > leave:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("publisher confirms")
            inbox.drain(conn, left)  # every confirm that is here, in as few reads as it takes
        if confirms.refused:
            refused, confirms.refused = confirms.refused, []
            raise StoreRefused(f"a push was not accepted in full: {refused[0]}"
                               + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))

    def close(self) -> None:
        self.link.close()
