"""Celery's messages on Redis, in kombu's own layout, through kombu's Redis transport.

The layout (kombu/transport/redis.py, what every Celery worker on Redis reads and writes)::

    <queue>                     a list per queue: LPUSH to publish, RPOP / BRPOP to consume (FIFO)
    <queue>\\x06\\x16<n>          the same queue's priority steps 3, 6, 9 (0 is the plain name)
    unacked                     hash: delivery tag -> [message, exchange, routing key], a message
                                consumed and not yet acknowledged
    unacked_index               sorted set: delivery tag -> when it was delivered
    unacked_mutex               the lock one restorer holds while it restores
    _kombu.binding.<exchange>   the bindings of an exchange (routing key, pattern, queue)

A message is kombu's JSON envelope: ``body`` (base64 of the task's JSON), ``headers``,
``content-type``, ``content-encoding`` and ``properties`` (``delivery_tag``,
``delivery_info``, ``body_encoding``, ...). Publishing, declaring and restoring go
through kombu's channel itself, so they are byte for byte what kombu does. Consuming
is one Lua script (``reserve.lua``) that pops a message and records it in
``unacked``/``unacked_index`` together, where kombu pops first and records after; and
that hands back, untouched, a list entry kombu could not read at all, so that it is
failed with its reason instead of lost.

The reservation is kombu's visibility timeout: a message whose ``unacked_index``
score is older than it is put back on its queue by whoever restores first, a
jobbridge worker's reclaim or a Celery worker's ``restore_visible``. A jobbridge
worker renews the score of every message it holds (``extend.lua``); a Celery worker
does not, so a task it runs (or an ETA task it holds) longer than the timeout is
delivered a second time. That is kombu's own behaviour on Redis, not something this
module can change.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any, TypeVar

import kombu as kombu_module
import orjson
import redis
from kombu.transport.redis import Mutex, MutexHeld

from jobbridge.drivers.celerywire.protocol import Message, WireRefused, moment
from jobbridge.drivers.celerywire.transport import Held, Popped
from jobbridge.errors import DriverError, DriverUnavailable
from jobbridge.redaction import mask_url

T = TypeVar("T")
#: kombu, untyped: reached through Any so that mypy --strict accepts its calls
kombu: Any = kombu_module
#: kombu's Redis priority steps and their separator (``Channel.priority_steps``, ``Channel.sep``)
PRIORITY_STEPS = (0, 3, 6, 9)
#: entries per list read for their eta when counting (the rest of a longer list counts as ready)
COUNT_SCAN = 10_000
SEP = "\x06\x16"


def _script(name: str) -> str:
    return resources.files("jobbridge.drivers.celerywire").joinpath(name).read_text()


def queue_keys(queue: str) -> list[str]:
    """A queue's lists, highest priority first, as kombu's ``_q_for_pri`` names them."""
    return [queue if step == 0 else f"{queue}{SEP}{step}" for step in PRIORITY_STEPS]


def parse(raw: bytes) -> Message:
    """A list entry as a task message; `WireRefused` when it is not one of kombu's."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise WireRefused(f"the queue entry is not a kombu message: not JSON ({exc.msg} at character {exc.pos})") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("properties"), dict):
        raise WireRefused("the queue entry is not a kombu message (a JSON object with 'properties')")
    props, headers, body = data["properties"], data.get("headers") or {}, data.get("body")
    if not isinstance(headers, dict) or not isinstance(body, str):
        raise WireRefused("the queue entry is not a kombu message: 'headers' must be an object, 'body' a string")
    if props.get("body_encoding") == "base64":
        try:
            content = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise WireRefused("the message body is not the base64 its body_encoding says") from None
    else:
        content = body.encode("utf-8", "surrogatepass")
    info = props.get("delivery_info") if isinstance(props.get("delivery_info"), dict) else {}
    return Message(body=content, headers=headers, content_type=data.get("content-type"),
                   content_encoding=data.get("content-encoding"),
                   redelivered=bool(headers.get("redelivered") or info.get("redelivered")))


def identify(raw: bytes) -> tuple[str | None, str | None]:
    """The task id and name a list entry names, if any can be read (for a failed job's row)."""
    try:
        headers = orjson.loads(raw).get("headers") or {}
        task_id, name = headers.get("id"), headers.get("task")
        return (task_id if isinstance(task_id, str) else None, name if isinstance(name, str) else None)
    except Exception:  # anything at all: the entry is failed all the same, under a new id
        return None, None


class RedisWire:
    """One process's kombu connection to a Celery broker on Redis, and the few scripts beside it."""

    #: Redis acknowledges a write before it is on disk, and a Celery worker pops before it records
    may_lose_an_accepted_job = True

    def __init__(self, url: str, visibility_timeout: float, connect_timeout: float, socket_timeout: float) -> None:
        self.url, self.visibility_timeout = url, visibility_timeout
        self._options = {"visibility_timeout": visibility_timeout, "socket_connect_timeout": connect_timeout,
                         "socket_timeout": socket_timeout}
        self._lock = threading.RLock()
        self._connection: Any = None
        self._channel: Any = None
        self._declared: set[str] = set()
        self._reserve: Any = None
        self._extend: Any = None
        self._acknowledge: Any = None

    # -- the connection -----------------------------------------------------------------------

    @contextmanager
    def _calling(self, action: str) -> Iterator[Any]:
        """The channel, under this wire's lock; redis's and kombu's errors turned into the driver's."""
        with self._lock:
            try:
                yield self._open()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                self._drop()
                raise DriverUnavailable(f"{action}: the Celery broker at {mask_url(self.url)} did not answer "
                                        f"({type(exc).__name__})") from exc
            except redis.RedisError as exc:
                raise DriverError(f"{action} on {mask_url(self.url)} failed: {exc}") from exc

    def call(self, action: str, fn: Callable[[Any], T]) -> T:
        with self._calling(action) as channel:
            return fn(channel)

    def _open(self) -> Any:
        if self._channel is None:
            self._connection = kombu.Connection(self.url, transport_options=dict(self._options))
            self._channel = self._connection.channel()
            client = self._channel.client
            self._reserve = client.register_script(_script("reserve.lua"))
            self._extend = client.register_script(_script("extend.lua"))
            self._acknowledge = client.register_script(_script("acknowledge.lua"))
        return self._channel

    def _drop(self) -> None:
        channel, connection = self._channel, self._connection
        self._channel = self._connection = None
        self._declared.clear()
        for closing in (channel, connection):
            try:
                if closing is not None:
                    closing.close()
            except Exception:  # a connection already gone closes as well as it can
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- the verbs -----------------------------------------------------------------------------

    def declare(self, channel: Any, queue: str) -> None:
        """The queue, its direct exchange of the same name and the binding, as a Celery worker declares them.

        A Celery client publishes to that exchange; kombu finds the queue through the
        binding, also when it restores a message there, so it must exist before any does.
        """
        if queue in self._declared:
            return
        exchange = kombu.Exchange(queue, type="direct")
        kombu.Queue(queue, exchange, routing_key=queue).bind(channel).declare()
        self._declared.add(queue)

    def publish(self, items: Sequence[tuple[str, Message, dict[str, Any]]]) -> None:
        """``(queue, message, properties)`` onto their queues, through kombu's channel (its envelope, its tags)."""
        def send(channel: Any) -> None:
            for queue, message, properties in items:
                self.declare(channel, queue)
                prepared = channel.prepare_message(message.body, 0, message.content_type,
                                                   message.content_encoding, dict(message.headers), properties)
                channel.basic_publish(prepared, exchange="", routing_key=queue)
        self.call("publish jobs", send)

    def push_raw(self, queue: str, raw: bytes) -> None:
        """A list entry back onto its queue exactly as it was (a failed one retried that could not be read)."""
        self.call("put a job back", lambda ch: ch.client.lpush(queue, raw))

    def reserve(self, queue: str, limit: int, now: float) -> list[Popped]:
        def pop(channel: Any) -> list[Popped]:
            self.declare(channel, queue)
            flat = self._reserve(keys=[channel.unacked_key, channel.unacked_index_key, *queue_keys(queue)],
                                 args=[limit, repr(now), queue])
            return [Popped(bytes(flat[i]), _text(flat[i + 1]) or None, _text(flat[i + 2]))
                    for i in range(0, len(flat), 3)]
        return self.call("reserve jobs", pop)

    def acknowledge(self, held: Sequence[tuple[str, str]]) -> None:
        """Drop ``(tag, digest)`` deliveries from kombu's bookkeeping (what ``QoS.ack`` removes), unless stale."""
        if held:
            self.call("acknowledge jobs", lambda ch: self._acknowledge(
                keys=[ch.unacked_key, ch.unacked_index_key], args=[x for pair in held for x in pair]))

    def held(self, held: Sequence[tuple[str, str]]) -> list[bool]:
        """Whether each ``(tag, digest)`` delivery is still the one in kombu's unacked hash."""
        if not held:
            return []
        entries = self.call("check reservations",
                            lambda ch: ch.client.hmget(ch.unacked_key, [tag for tag, _ in held]))
        return [e is not None and _digest(e) == digest
                for e, (_, digest) in zip(entries, held, strict=True)]

    def extend(self, held: Sequence[Held], now: float) -> set[Held]:
        """Renew ``(tag, digest)`` deliveries (their unacked_index score now); those still held."""
        if not held:
            return set()
        kept = self.call("extend reservations", lambda ch: {
            _text(t) for t in self._extend(keys=[ch.unacked_key, ch.unacked_index_key],
                                           args=[repr(now), *(x for pair in held for x in pair)])})
        return {pair for pair in held if pair[0] in kept}

    def restore(self, held: Sequence[Held]) -> None:
        """Put messages back on their queues now, with kombu's own restore (marked redelivered)."""
        def put_back(channel: Any) -> None:
            for tag, _ in held:
                channel.qos.restore_by_tag(tag, leftmost=True)
        if held:
            self.call("put jobs back", put_back)

    def reclaim(self, ceiling: float, lapsed: Sequence[Held], limit: int = 1000) -> list[Held]:
        """Restore every message delivered before ``ceiling`` (kombu's ``restore_visible``), whoever held it,
        and this process's own ``lapsed`` deliveries still held, whatever the visibility timeout says."""
        def sweep(channel: Any) -> list[Held]:
            client = channel.client
            try:
                with Mutex(client, channel.unacked_mutex_key, channel.unacked_mutex_expire):
                    old = [_text(t) for t in client.zrangebyscore(channel.unacked_index_key, "-inf", repr(ceiling),
                                                                  start=0, num=limit)]
                    tags = list(dict.fromkeys(old + [tag for tag, _ in lapsed]))
                    entries = client.hmget(channel.unacked_key, tags) if tags else []
                    digests = {tag: _digest(e) for tag, e in zip(tags, entries, strict=True) if e is not None}
                    own = {tag for tag, digest in lapsed if digests.get(tag) == digest}
                    back = [(tag, digests[tag]) for tag in tags if tag in digests and (tag in own or tag in old)]
                    for tag, _ in back:
                        channel.qos.restore_by_tag(tag, client)
                    return back
            except MutexHeld:
                return []  # another worker is restoring right now
        return self.call("reclaim jobs", sweep)

    def waiting(self, queue: str, now: float) -> tuple[int, int]:
        """``(ready, delayed)`` of a queue's lists: a Celery message whose ``eta`` is ahead counts as delayed.

        Only the first `COUNT_SCAN` entries are read for their ``eta``; the rest count as ready.
        """
        def count(channel: Any) -> tuple[int, int]:
            pipe = channel.client.pipeline(transaction=False)
            for key in queue_keys(queue):
                pipe.llen(key)
            for key in queue_keys(queue):
                pipe.lrange(key, 0, COUNT_SCAN - 1)
            found = pipe.execute()
            total = sum(int(n) for n in found[: len(PRIORITY_STEPS)])
            delayed = sum(1 for items in found[len(PRIORITY_STEPS):] for item in items if _due_after(item, now))
            return total - delayed, delayed
        return self.call("count jobs", count)

    def take_all(self, queue: str) -> list[Popped]:
        """Every waiting entry of a queue, removed in one transaction (a purge: unacked ones stay)."""
        def take(channel: Any) -> list[Popped]:
            pipe = channel.client.pipeline(transaction=True)
            for key in queue_keys(queue):
                pipe.lrange(key, 0, -1)
            for key in queue_keys(queue):
                pipe.delete(key)
            found = pipe.execute()[: len(PRIORITY_STEPS)]
            return [Popped(bytes(item), None) for items in found for item in items]
        return self.call("purge jobs", take)

    def read(self, popped: Popped) -> Message:
        return parse(popped.raw)

    def task_id(self, popped: Popped) -> str | None:
        return identify(popped.raw)[0]

    def describe(self) -> str:
        return (f"celery wire on redis {mask_url(self.url)} (Celery's queues in kombu's layout; the reservation is "
                f"kombu's visibility timeout of {self.visibility_timeout:g} s: a job held longer than that by a "
                "worker that does not renew it, such as a Celery worker's long task or far ETA task, is delivered "
                "twice")

    def ping(self) -> None:
        self.call("connect", lambda ch: ch.client.ping())


def _due_after(item: bytes, now: float) -> bool:
    """Whether a list entry is a Celery message whose ``eta`` is after ``now`` (an unreadable one is ready)."""
    try:
        eta = moment(orjson.loads(item)["headers"].get("eta"), "eta")
    except Exception:  # not a message, or no readable eta: it waits as ready
        return False
    return eta is not None and eta > now


def _digest(entry: Any) -> str:
    return hashlib.sha1(bytes(entry), usedforsecurity=False).hexdigest()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
