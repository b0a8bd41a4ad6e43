"""Which queue an exchange and a routing key reach, as RabbitMQ would route them through ``task_queues``.

Celery publishes a task to an exchange with a routing key, and RabbitMQ hands it
to every queue bound to that exchange with a matching key. jobbridge pushes each
job to one queue by name, so the facade does the broker's routing at the call,
from the bindings ``task_queues`` declares (kombu ``Queue`` objects: each its
exchange and routing key, or its ``bindings``):

- a **direct** exchange (kombu's default type) reaches the queue bound with exactly
  that key;
- a **topic** exchange reaches the queue whose binding key matches (``*`` one word,
  ``#`` any number of words);
- the nameless default exchange (``""``) reaches the queue named by the key;
- a key that reaches no queue, or several (RabbitMQ would drop the task, or copy it
  to each), and a **fanout** or **headers** exchange (a broadcast, or routing by
  headers) are refused at the call, saying why.

A queue declared without an exchange is bound, as Celery binds it, to the default
exchange (``task_default_exchange``, else the default queue's name) with its own
key (``task_default_routing_key``, else the queue's name).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..exceptions import QueueNotFound, RefusedFeature
from ..ports import ConfPort

_ROUTED = ("direct", "topic")


@dataclass(frozen=True)
class Binding:
    queue: str
    exchange: str
    kind: str
    key: str

    def matches(self, key: str) -> bool:
        if self.kind == "direct":
            return key == self.key
        return _topic(tuple(self.key.split(".")), tuple(key.split(".")))


def _topic(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    """Whether a topic binding key matches a routing key, word by word (``*`` one word, ``#`` any number)."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_topic(rest, words[i:]) for i in range(len(words) + 1))
    return bool(words) and head in ("*", words[0]) and _topic(rest, words[1:])


def default_exchange(conf: ConfPort) -> tuple[str, str]:
    """The default exchange's name and type, as Celery declares it."""
    return (str(conf["task_default_exchange"] or conf["task_default_queue"]),
            str(conf["task_default_exchange_type"] or "direct"))


def bindings(conf: ConfPort) -> Iterator[Binding]:
    """Every binding ``task_queues`` declares (none when it is not set: queues are then named directly)."""
    exchange, kind = default_exchange(conf)
    for queue in conf["task_queues"] or ():
        name = str(getattr(queue, "name", queue))
        declared = list(getattr(queue, "bindings", None) or ())
        if declared:
            for b in declared:
                yield Binding(name, *_exchange_of(b.exchange, exchange, kind), str(b.routing_key or ""))
            continue
        key = getattr(queue, "routing_key", None) or conf["task_default_routing_key"] or name
        yield Binding(name, *_exchange_of(getattr(queue, "exchange", None), exchange, kind), str(key))


def _exchange_of(value: Any, default: str, default_kind: str) -> tuple[str, str]:
    name = getattr(value, "name", value)
    if not name:
        return default, default_kind
    return str(name), str(getattr(value, "type", None) or "direct")


def queue_for_key(conf: ConfPort, exchange: Any, routing_key: str, task: str | None) -> str:
    """The one queue ``routing_key`` reaches on ``exchange`` (None: the default exchange's); else refused."""
    name = getattr(exchange, "name", exchange)
    if name is None:
        name = default_exchange(conf)[0]
    name = str(name)
    if name == "":
        return routing_key  # the default AMQP exchange routes by queue name
    on = [b for b in bindings(conf) if b.exchange == name]
    where = f" for task {task!r}" if task else ""
    kinds = {b.kind for b in on} or {str(getattr(exchange, "type", None) or "direct")}
    refused = kinds - set(_ROUTED)
    if refused:
        raise RefusedFeature(
            f"exchange {name!r}{where} is a {sorted(refused)[0]} exchange: RabbitMQ would copy the task to every "
            "queue bound to it (fanout) or route it by its headers, and jobbridge runs each task once, from one "
            "queue. Route it to a queue (task_routes = {'<task>': {'queue': '<queue>'}}), or send one task per "
            "queue that must see it")
    reached = sorted({b.queue for b in on if b.matches(routing_key)})
    if len(reached) == 1:
        return reached[0]
    if not reached:
        raise QueueNotFound(
            f"routing key {routing_key!r} on exchange {name!r}{where} reaches no queue of task_queues, so RabbitMQ "
            "would drop the task: bind a queue with that key in task_queues (Queue('<queue>', Exchange("
            f"{name!r}), routing_key={routing_key!r})), or route the task to a queue by name")
    raise RefusedFeature(
        f"routing key {routing_key!r} on exchange {name!r}{where} reaches {', '.join(reached)}: RabbitMQ would "
        "deliver a copy to each, and jobbridge runs each task once, from one queue. Make the bindings in "
        "task_queues distinct, or route the task to a queue by name")
