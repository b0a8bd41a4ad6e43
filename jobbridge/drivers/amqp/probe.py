"""Looking into queues without consuming from them for work: counts, and the purge.

Each look runs on a channel of its own, opened on the publishing connection
and closed after: a passive declare of a queue that does not exist closes its
channel (404), which must not take the publishing channel with it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import amqp
from amqp import exceptions as amqp_errors

from jobbridge.drivers.amqp.connection import Link
from jobbridge.drivers.amqp.parking import parked
from jobbridge.drivers.amqp.topology import BITS, Topology
from jobbridge.envelope import Envelope

T = TypeVar("T")
#: deliveries a purge takes at a time, and how long it waits for more before it calls a queue empty
PURGE_PREFETCH = 500
PURGE_QUIET = 0.2


class Probe:
    def __init__(self, link: Link, topology: Topology) -> None:
        self.link, self.topology = link, topology

    def _on_own_channel(self, action: str, work: Callable[[amqp.Channel], T]) -> T:
        def run(_: amqp.Channel) -> T:
            ch = self.link.connection.channel()
            try:
                return work(ch)
            finally:
                if ch.is_open:
                    ch.close()
        return self.link.call(action, run)

    @staticmethod
    def _ready(ch: amqp.Channel, name: str) -> int | None:
        """The queue's ready messages; None when it does not exist (the channel is then closed)."""
        try:
            _, ready, _ = ch.queue_declare(name, passive=True)
        except amqp_errors.NotFound:
            return None
        return int(ready)

    def _count(self, name: str) -> int | None:
        return self._on_own_channel("count jobs", lambda ch: self._ready(ch, name))

    def counts(self, queue: str) -> tuple[int, int]:
        """(ready, delayed) as the broker holds them: the queue's ready messages; its parked and staged ones."""
        ready = self._count(self.topology.queue(queue)) or 0
        delayed = self._count(parked(self.topology, queue)) or 0
        for k in range(BITS):
            found = self._count(self.topology.stage(queue, k))
            if found is None:
                break  # the stages are declared together: none past a missing one
            delayed += found
        return ready, delayed

    def drain(self, queue: str) -> list[Envelope | None]:
        """Take every waiting message off the queue and its stages: each one's envelope (None: undecodable)."""
        names = [self.topology.queue(queue), parked(self.topology, queue)]
        names += [self.topology.stage(queue, k) for k in range(BITS)]
        out: list[Envelope | None] = []
        for i, name in enumerate(names):
            taken = self._on_own_channel("purge jobs", partial(self._drain_one, name=name))
            if taken is None and i >= 2:
                break  # the stages are declared together: none past a missing one
            out += taken or []
        return out

    def _drain_one(self, ch: amqp.Channel, *, name: str) -> list[Envelope | None] | None:
        if self._ready(ch, name) is None:
            return None
        got: list[Any] = []
        ch.basic_qos(0, PURGE_PREFETCH, False)
        tag = ch.basic_consume(name, callback=got.append)
        conn: Any = ch.connection
        out: list[Envelope | None] = []
        quiet_until = time.monotonic() + PURGE_QUIET
        while True:
            with contextlib.suppress(TimeoutError):
                conn.drain_events(timeout=PURGE_QUIET / 4)
            for message in got:
                out.append(_envelope(bytes(message.body)))
                ch.basic_ack(message.delivery_tag)
            if got:
                quiet_until = time.monotonic() + PURGE_QUIET
                got.clear()
            elif time.monotonic() > quiet_until and not self._ready(ch, name):
                break
        ch.basic_cancel(tag)
        return out


def _envelope(body: bytes) -> Envelope | None:
    try:
        return Envelope.decode(body)
    except Exception:  # an undecodable body is purged all the same; it holds no lock anyone could name
        return None
