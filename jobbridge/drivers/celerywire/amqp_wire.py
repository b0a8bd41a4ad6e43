"""Celery's messages on RabbitMQ, through kombu's py-amqp transport, as a Celery fleet's queues hold them.

The layout (what ``celery worker`` declares with its default settings)::

    <queue>      a classic durable queue
    <queue>      a direct durable exchange of the same name, bound to it with the routing key <queue>

A message is a persistent AMQP message: Celery's headers as its application headers,
its JSON body ``[args, kwargs, embed]``, ``content_type`` application/json. Publishing
waits for the broker's confirm, so a push that returned is on a durable queue.

The reservation is the channel's: a delivery taken with ``basic.get`` and no ack is
held until it is acknowledged or rejected, or its connection drops (a dead worker's
deliveries go back to their queue at once, marked redelivered). A delivery is named by
its delivery tag and the channel's generation: after a reconnect the old tags mean
nothing, and a receipt of an earlier generation settles nothing. This process's own
deliveries whose lease lapsed are rejected back to their queue by `reclaim`. The
broker's ``consumer_timeout`` (30 minutes by default) also bounds how long any
delivery is held, a Celery worker's as well: past it the broker closes the channel and
puts its deliveries back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import amqp as amqp_module
import kombu as kombu_module

from jobbridge.drivers.celerywire.protocol import Message
from jobbridge.drivers.celerywire.transport import Held, Popped
from jobbridge.errors import DriverError, DriverUnavailable
from jobbridge.redaction import mask_url

T = TypeVar("T")
#: kombu and py-amqp, untyped: reached through Any so that mypy --strict accepts their calls
kombu: Any = kombu_module
amqp: Any = amqp_module
#: what a broken connection raises: py-amqp's connection errors, the socket's
LOST = (amqp_module.exceptions.ConnectionError, amqp_module.exceptions.RecoverableConnectionError, OSError)


class AmqpWire:
    """One process's connection and channel to a Celery broker on RabbitMQ."""

    may_lose_an_accepted_job = False

    def __init__(self, url: str, connect_timeout: float, request_timeout: float) -> None:
        self.url = url
        self._timeouts = (connect_timeout, request_timeout)
        self._lock = threading.RLock()
        self._connection: Any = None
        self._channel: Any = None
        self._declared: set[str] = set()
        #: the channel's generation: one more on every reconnect, so that an old delivery tag settles nothing
        self._generation = 0
        #: delivery tags of the current channel not yet settled
        self._open_tags: set[str] = set()

    # -- the connection -----------------------------------------------------------------------

    @contextmanager
    def _calling(self, action: str) -> Iterator[Any]:
        with self._lock:
            try:
                yield self._open()
            except LOST as exc:
                self._drop()
                raise DriverUnavailable(f"{action}: the Celery broker at {mask_url(self.url)} did not answer "
                                        f"({type(exc).__name__})") from exc
            except amqp_module.exceptions.AMQPError as exc:
                self._drop()  # a channel error closes the channel: its deliveries went back
                raise DriverError(f"{action} on {mask_url(self.url)} failed: {exc}") from exc

    def call(self, action: str, fn: Callable[[Any], T]) -> T:
        with self._calling(action) as channel:
            return fn(channel)

    def _open(self) -> Any:
        if self._channel is None:
            connect, request = self._timeouts
            connection = kombu.Connection(self.url, connect_timeout=connect, heartbeat=0,
                                          transport_options={"read_timeout": request, "write_timeout": request})
            connection.connect()
            channel = connection.channel()
            channel.confirm_select()
            self._connection, self._channel = connection, channel
            self._generation += 1
            self._open_tags.clear()
        return self._channel

    def _drop(self) -> None:
        connection = self._connection
        self._channel = self._connection = None
        self._declared.clear()
        self._open_tags.clear()
        try:
            if connection is not None:
                connection.close()
        except Exception:  # a connection already gone closes as well as it can
            pass

    def close(self) -> None:
        with self._lock:
            self._drop()

    def ping(self) -> None:
        self.call("connect", lambda ch: None)

    def describe(self) -> str:
        return (f"celery wire on rabbitmq {mask_url(self.url)} (Celery's classic durable queues; a job is held while "
                "its worker's connection is, and goes back to its queue when that connection drops")

    # -- the verbs -----------------------------------------------------------------------------

    def declare(self, channel: Any, queue: str) -> None:
        """The queue, its direct exchange of the same name and the binding, as a Celery worker declares them."""
        if queue in self._declared:
            return
        exchange = kombu.Exchange(queue, type="direct", durable=True)
        kombu.Queue(queue, exchange, routing_key=queue, durable=True).bind(channel).declare()
        self._declared.add(queue)

    def publish(self, items: Sequence[tuple[str, Message, dict[str, Any]]]) -> None:
        """Each message onto its queue's exchange (what a Celery client publishes to), confirmed by the broker."""
        def send(channel: Any) -> None:
            for queue, message, properties in items:
                self.declare(channel, queue)
                found = {k: v for k, v in properties.items() if v is not None}
                body = amqp.Message(message.body, content_type=message.content_type,
                                    content_encoding=message.content_encoding,
                                    application_headers=dict(message.headers), priority=0, **found)
                channel.basic_publish_confirm(body, exchange=queue, routing_key=queue)
        self.call("publish jobs", send)

    def push_raw(self, queue: str, raw: bytes) -> None:
        """A body back onto its queue as it was (a failed one retried that could not be read)."""
        def send(channel: Any) -> None:
            self.declare(channel, queue)
            channel.basic_publish_confirm(amqp.Message(raw, delivery_mode=2), exchange=queue, routing_key=queue)
        self.call("put a job back", send)

    def reserve(self, queue: str, limit: int, now: float) -> list[Popped]:
        def take(channel: Any) -> list[Popped]:
            self.declare(channel, queue)
            out: list[Popped] = []
            while len(out) < limit:
                got = channel.basic_get(queue, no_ack=False)
                if got is None:
                    break
                out.append(self._popped(got))
            return out
        return self.call("reserve jobs", take)

    def _popped(self, got: Any) -> Popped:
        tag = str(got.delivery_info["delivery_tag"])
        self._open_tags.add(tag)
        props = got.properties
        body = got.body if isinstance(got.body, bytes) else str(got.body).encode()
        headers = props.get("application_headers") or {}
        message = Message(body=body, headers=headers, content_type=props.get("content_type"),
                          content_encoding=props.get("content_encoding"),
                          redelivered=bool(got.delivery_info.get("redelivered")))
        return Popped(body, tag, str(self._generation), message)

    def read(self, popped: Popped) -> Message:
        assert popped.message is not None  # every delivery of this wire carries its message
        return popped.message

    def task_id(self, popped: Popped) -> str | None:
        found = popped.message.headers.get("id") if popped.message is not None else None
        return found if isinstance(found, str) else None

    def _live(self, held: Sequence[Held]) -> list[Held]:
        """The deliveries still open on the current channel (an older generation's went back on its close)."""
        return [(tag, gen) for tag, gen in held if gen == str(self._generation) and tag in self._open_tags]

    def acknowledge(self, held: Sequence[Held]) -> None:
        def ack(channel: Any) -> None:
            for tag, _ in self._live(held):
                channel.basic_ack(int(tag))
                self._open_tags.discard(tag)
        if held:
            with self._lock:
                if self._channel is not None:
                    self.call("acknowledge jobs", ack)

    def held(self, held: Sequence[Held]) -> list[bool]:
        with self._lock:
            live = set(self._live(held)) if self._channel is not None else set()
            return [pair in live for pair in held]

    def extend(self, held: Sequence[Held], now: float) -> set[Held]:
        """The deliveries still held: the broker keeps them while the channel lives; nothing to renew."""
        with self._lock:
            return set(self._live(held)) if self._channel is not None else set()

    def restore(self, held: Sequence[Held]) -> None:
        """Reject deliveries back to their queues now (marked redelivered)."""
        def reject(channel: Any) -> None:
            for tag, _ in self._live(held):
                channel.basic_reject(int(tag), requeue=True)
                self._open_tags.discard(tag)
        if held:
            with self._lock:
                if self._channel is not None:
                    self.call("put jobs back", reject)

    def reclaim(self, ceiling: float, lapsed: Sequence[Held]) -> list[Held]:
        """This process's own lapsed deliveries, rejected to their queues; other processes' come back when
        their connections drop, and the ones of a lost channel already went back."""
        with self._lock:
            back = self._live(lapsed) if self._channel is not None else []
            self.restore(back)
            gone = [pair for pair in lapsed if pair not in back]
            return back + gone

    def waiting(self, queue: str, now: float) -> tuple[int, int]:
        """``(ready, 0)``: RabbitMQ counts a queue's messages, and cannot be asked which carry an ``eta``."""
        def count(channel: Any) -> tuple[int, int]:
            self.declare(channel, queue)
            return int(channel.queue_declare(queue, passive=True).message_count), 0
        return self.call("count jobs", count)

    def take_all(self, queue: str) -> list[Popped]:
        """Every waiting message of a queue, taken and acknowledged (a purge: deliveries held stay held)."""
        def take(channel: Any) -> list[Popped]:
            self.declare(channel, queue)
            out: list[Popped] = []
            while (got := channel.basic_get(queue, no_ack=True)) is not None:
                tag = str(got.delivery_info["delivery_tag"])
                out.append(self._popped(got))
                self._open_tags.discard(tag)
            return out
        return self.call("purge jobs", take)
