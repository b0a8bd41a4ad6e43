"""Delays on a test's clock: with ``delay_scale = 0`` a delayed job is parked, and promoted by the driver's clock.

A broker's TTL runs on real time, which a test on a `FixedClock` does not
advance; so with ``delay_scale = 0`` a job not yet due is published to its
queue's parking queue ``{prefix}{queue}@parked`` instead of the delay stages,
and each reserve (and reclaim) moves the parked jobs that the driver's clock
says are due onto their queue: published, confirmed, then acknowledged in the
parking queue. A parked job is counted as delayed. This is for tests; with any
other scale the broker holds every delay (`jobbridge.drivers.amqp.topology`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import amqp

from jobbridge.drivers.amqp.connection import Link
from jobbridge.drivers.amqp.topology import Route, Topology
from jobbridge.envelope import Envelope

PARKED = "@parked"
#: seconds a promotion waits for the jobs it put back to be counted again
SETTLE = 1.0


def parked(topology: Topology, queue: str) -> str:
    return f"{topology.queue(queue)}{PARKED}"


class Parking:
    def __init__(self, link: Link, topology: Topology, publish: Callable[[Sequence[tuple[str, bytes, str]]], None]
                 ) -> None:
        self.link, self.topology, self._publish = link, topology, publish

    def route(self, queue: str) -> Route:
        return Route("", parked(self.topology, queue), parked=True)

    def promote(self, queues: Sequence[str], now: float) -> int:
        """Move the parked jobs due by ``now`` onto their queues; return how many moved."""
        return sum(self.link.call("promote parked jobs", partial(self._promote, queue=q, now=now)) for q in queues)

    def _promote(self, _: amqp.Channel, *, queue: str, now: float) -> int:
        ch = self.link.connection.channel()
        try:
            name = parked(self.topology, queue)
            try:
                _, ready, _ = ch.queue_declare(name, passive=True)
            except amqp.exceptions.NotFound:
                return 0
            due: list[tuple[int, bytes, str]] = []
            later: list[int] = []
            for _ in range(ready):
                message: Any = ch.basic_get(name)
                if message is None:
                    break
                body = bytes(message.body)
                if _available_at(body, now) <= now:
                    due.append((message.delivery_tag, body, message.properties.get("message_id") or ""))
                else:
                    later.append(message.delivery_tag)
            if due:
                self._publish([(queue, body, job_id) for _, body, job_id in due])
                for tag, _, _ in due:
                    ch.basic_ack(tag)
            for tag in later:
                ch.basic_reject(tag, requeue=True)
            self._settled(ch, name, len(later))
            return len(due)
        finally:
            if ch.is_open:
                ch.close()


    @staticmethod
    def _settled(ch: amqp.Channel, name: str, back: int) -> None:
        """Wait (briefly) until the jobs put back are counted again: a quorum queue takes a reject in its own
        time, and the next promotion reads the count first."""
        deadline = time.monotonic() + SETTLE
        while back and time.monotonic() < deadline:
            _, ready, _ = ch.queue_declare(name, passive=True)
            if ready >= back:
                return
            time.sleep(0.005)


def _available_at(body: bytes, now: float) -> float:
    try:
        return Envelope.decode(body).available_at
    except Exception:  # an undecodable body is due at once, to be failed with its reason
        return now
