"""Where jobs live on RabbitMQ: a durable queue per jobbridge queue, and the stages that hold delayed jobs.

RabbitMQ has no delayed delivery without a plugin, and a single queue with a
per-message TTL would hold a short delay behind a long one (only the head of a
queue expires). So a delay is held in *stages*, one per bit of its length in
milliseconds: stage ``k`` of a queue is a queue whose every message waits
exactly 2^k ms (a fixed ``x-message-ttl``), then is dead-lettered to the next
stage down. Inside one stage every message waits as long, so the head always
expires first and nothing waits behind anything else.

A delayed message carries its route in its routing key: 32 words, one per bit
of the delay from bit 31 down to bit 0 (``1`` or ``0``), then the queue's name.
It is published to the exchange of its highest set bit; each stage exchange
``{prefix}delay.{k}`` (topic) routes a ``1`` at its bit to the queue's stage
``k`` and a ``0`` straight on to the exchange below; after bit 0 the exchange
``{prefix}delay.ready`` routes it to the queue itself, by name. A delay of
d ms thus visits one stage per set bit of d and waits d ms in all, to the
millisecond, whatever else is waiting; the longest is 2^32 - 1 ms (49.7 days),
and a longer one goes round again when it comes out (`jobbridge.drivers.amqp.driver`).

Names, with the connection's prefix (``jobbridge.`` unless written)::

    {prefix}{queue}              the queue's jobs that are due (durable; quorum or classic)
    {prefix}{queue}@delay.{k}    stage k of its delayed jobs: TTL 2^k ms, dead-lettered to {prefix}delay.{k-1}
                                 (or {prefix}delay.ready for k = 0); declared with the queue's first delay
    {prefix}delay.{k}            stage exchanges (topic), shared by the connection's queues
    {prefix}delay.ready          the exchange that hands a delayed job back to its queue (topic)

On quorum queues the stages dead-letter *at least once* (``x-dead-letter-strategy``
with ``x-overflow: reject-publish``), so a broker restart mid-delay loses nothing;
on classic queues dead-lettering is at most once, which the capabilities say.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from jobbridge.drivers.amqp.settings import check_queue_name

#: bits of a delay in milliseconds: the stages each queue can have
BITS = 32
LONGEST_MS = 2**BITS - 1
STAGE_MARK = "@delay."


@dataclass(frozen=True, slots=True)
class Route:
    """Where one message is published: an exchange and a routing key (the default exchange: the queue's name)."""

    exchange: str
    key: str
    stages: tuple[int, ...] = ()
    #: to the queue's parking queue (``delay_scale = 0``: `jobbridge.drivers.amqp.parking`)
    parked: bool = False


class Topology:
    """Names and arguments of one connection's queues, exchanges and bindings."""

    def __init__(self, prefix: str, queue_type: str) -> None:
        self.prefix, self.queue_type = prefix, queue_type
        #: queue -> its checked name, and the route of a job due now (both asked for every job pushed)
        self._names: dict[str, str] = {}
        self._due: dict[str, Route] = {}

    def queue(self, queue: str) -> str:
        name = self._names.get(queue)
        if name is None:
            name = check_queue_name(self.prefix, queue)
            if len(self._names) < 10_000:
                self._names[queue] = name
        return name

    def queue_of(self, name: str) -> str:
        return name[len(self.prefix):]

    def stage(self, queue: str, k: int) -> str:
        return f"{self.queue(queue)}{STAGE_MARK}{k}"

    def exchange(self, k: int) -> str:
        """Stage k's exchange; -1 is the one that hands jobs back to their queues."""
        return f"{self.prefix}delay.{k}" if k >= 0 else f"{self.prefix}delay.ready"

    def queue_arguments(self) -> dict[str, object]:
        return {"x-queue-type": self.queue_type}

    def stage_arguments(self, k: int) -> dict[str, object]:
        args: dict[str, object] = {"x-queue-type": self.queue_type, "x-message-ttl": 2**k,
                                   "x-dead-letter-exchange": self.exchange(k - 1)}
        if self.queue_type == "quorum":
            args.update({"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
        return args

    @staticmethod
    def _pattern(k: int, bit: str, tail: str) -> str:
        """A binding at bit k: every word before it, that bit, then ``tail``."""
        return ".".join(["*"] * (BITS - 1 - k) + [bit, tail])

    def exchange_bindings(self) -> Iterator[tuple[str, str, str]]:
        """``(destination, source, pattern)``: each stage's ``0`` passes on to the exchange below."""
        for k in range(BITS):
            yield self.exchange(k - 1), self.exchange(k), self._pattern(k, "0", "#")

    def stage_binding(self, queue: str, k: int) -> str:
        """The pattern that routes a ``1`` at bit k of ``queue``'s delays to its stage k."""
        return self._pattern(k, "1", ".".join(["*"] * k + [queue]) if k else queue)

    def ready_binding(self, queue: str) -> str:
        return ".".join(["*"] * BITS + [queue])

    def route(self, queue: str, delay_ms: int) -> Route:
        """How a job due in ``delay_ms`` reaches ``queue`` (at most `LONGEST_MS`; 0: straight to it)."""
        if delay_ms <= 0:
            route = self._due.get(queue)
            if route is None:
                route = Route("", self.queue(queue))
                if len(self._due) < 10_000:
                    self._due[queue] = route
            return route
        self.queue(queue)  # refused here when a routing key cannot carry its name
        delay_ms = min(delay_ms, LONGEST_MS)
        bits = format(delay_ms, f"0{BITS}b")
        stages = tuple(BITS - 1 - i for i, b in enumerate(bits) if b == "1")
        return Route(self.exchange(stages[0]), ".".join([*bits, queue]), stages)
