"""What the celery-wire driver needs of a broker's transport (`Wire`), and one delivery it hands out (`Popped`).

The driver (`jobbridge.drivers.celerywire.driver`) keeps what every broker shares:
Celery's message protocol, the ETA messages a worker holds until they are due, the
leases it renews. A wire keeps what differs: where a message waits and how a delivery
is held, settled and put back: kombu's lists and ``unacked`` hash on Redis
(`redis_wire`), a channel's unacknowledged deliveries on RabbitMQ (`amqp_wire`).

A delivery is named by a ``(tag, digest)`` pair: its delivery tag, and what tells
this delivery from a later one of the same message (on Redis the digest of its
unacked entry, on RabbitMQ the channel it came on). A stale pair settles nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jobbridge.drivers.celerywire.protocol import Message

#: a delivery: (delivery tag, digest of this delivery)
Held = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Popped:
    """One delivery a reserve took: its raw bytes (kept by a failed job), and its tag when the broker holds it."""

    raw: bytes
    tag: str | None
    #: what tells this delivery from a later one of the same message
    digest: str = ""
    #: the message as the transport carried it, when the transport splits headers from the body (RabbitMQ)
    message: Message | None = None


class Wire(Protocol):
    """A broker's side of the celery-wire driver; every method raises the driver's errors, never a client's."""

    #: whether a job the broker accepted can still be lost (Redis acknowledges a write before it is on disk)
    may_lose_an_accepted_job: bool

    def publish(self, items: Sequence[tuple[str, Message, dict[str, Any]]]) -> None: ...
    def push_raw(self, queue: str, raw: bytes) -> None: ...
    def reserve(self, queue: str, limit: int, now: float) -> list[Popped]: ...
    def read(self, popped: Popped) -> Message: ...
    def task_id(self, popped: Popped) -> str | None: ...
    def acknowledge(self, held: Sequence[Held]) -> None: ...
    def held(self, held: Sequence[Held]) -> list[bool]: ...
    def extend(self, held: Sequence[Held], now: float) -> set[Held]: ...
    def restore(self, held: Sequence[Held]) -> None: ...
    def reclaim(self, ceiling: float, lapsed: Sequence[Held]) -> list[Held]: ...
    def waiting(self, queue: str, now: float) -> tuple[int, int]: ...
    def take_all(self, queue: str) -> list[Popped]: ...
    def describe(self) -> str: ...
    def ping(self) -> None: ...
    def close(self) -> None: ...
