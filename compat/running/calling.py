"""Publishing a task: options checked, routed to a queue, arguments encoded, pushed as a jobbridge job.

The message is a jobbridge `Envelope` whose name is the task name and whose
payload is ``{"args": [...], "kwargs": {...}}``. Its headers are Celery's
(``task``, ``id``, ``eta``, ``expires``, ``retries``, ``timelimit``, ...) plus the
caller's own, so ``before_task_publish`` receivers see (and may add to) what
Celery would send, and the worker rebuilds ``self.request`` from them.
"""

from __future__ import annotations

import difflib
import os
import socket
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from jobbridge import Envelope
from jobbridge.envelope import new_id

from .. import codec, signals
from ..config import routing
from ..exceptions import AlwaysEagerIgnored, RefusedFeature
from ..ports import AppPort, TaskPort
from ..request import current_request, custom_headers
from .recording import ignores_result

#: the timeout of a task with no time limit (Celery's default is none): thirty days
NO_TIME_LIMIT = 30 * 86400.0
#: the attempts of a task whose max_retries is None (retry forever)
FOREVER_TRIES = 1_000_000
DEFAULT_TRIES = 4  # Celery's max_retries default of 3, plus the first attempt

_ACCEPTED = frozenset({"countdown", "eta", "expires", "queue", "task_id", "headers", "routing_key",
                       "exchange", "exchange_type", "retry", "retry_policy", "ignore_result", "time_limit",
                       "soft_time_limit", "add_to_parent", "reply_to", "delivery_mode", "mandatory",
                       "immediate", "argsrepr", "kwargsrepr", "retries", "parent_id", "root_id",
                       "serializer", "compression", "priority", "link", "link_error", "shadow",
                       "connection", "producer", "publisher", "chain", "chord", "group_id",
                       "group_index", "stamped_headers", "declare", "expiration",
                       "transaction",  # jobbridge's own: the message is stored only if this commits
                       "throw",  # apply()'s, under task_always_eager; a sent task has no use for it
                       *("app_id", "user_id")})
#: the message properties a caller may set (``apply_async(app_id=...)``): the task reads them in
#: ``self.request.properties``, as Celery passes them to the broker as the message's properties
MESSAGE_PROPERTIES = ("app_id", "user_id")
_ONLY_NONE = {
    "priority": "jobbridge orders work by queue, not by message priority: route urgent tasks to a queue "
                "the worker lists first (queue='high', and jobbridge worker -Q high,celery)",
    "shadow": "a task runs under its own name",
    "connection": "the app's jobbridge connection is used", "producer": "the app's jobbridge connection is used",
    "publisher": "the app's jobbridge connection is used",
    "compression": "payloads are stored uncompressed",
    "stamped_headers": "stamping is not provided: pass the values as headers (apply_async(headers={...})), "
                       "which the task reads in self.request.headers",
}


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse an option jobbridge cannot honour (or does not know) at the call, with why."""
    for key, value in options.items():
        if key not in _ACCEPTED:
            close = difflib.get_close_matches(key, sorted(_ACCEPTED), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{name}.apply_async() got an unknown option {key!r}{hint}")
        if key in _ONLY_NONE and value is not None and value != [] and value != ():
            raise RefusedFeature(f"apply_async({key}=...) is refused for {name}: {_ONLY_NONE[key]}")
    serializer = options.get("serializer")
    if serializer is not None and str(serializer).lower() not in ("json", "application/json"):
        raise RefusedFeature(f"serializer {serializer!r} is refused for {name}: jobbridge sends arguments as "
                             "JSON, which any worker can read and nothing can turn into code")
    if options.get("countdown") is not None and options.get("eta") is not None:
        raise ValueError(f"{name}.apply_async(): give countdown= or eta=, not both")


def zone(app: AppPort) -> tzinfo:
    """How a naive datetime is read: the app's timezone, else UTC (enable_utc) or local time."""
    name = app.conf["timezone"]
    if name:
        return name if isinstance(name, tzinfo) else ZoneInfo(str(name))
    if app.conf["enable_utc"] is False:
        local = datetime.now().astimezone().tzinfo
        return local if local is not None else UTC
    return UTC


def moment(app: AppPort, value: Any, now: float, what: str) -> datetime:
    """An eta or expires (datetime, ISO string, or for expires seconds from now) as an aware datetime."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(now + float(value), UTC)
    if isinstance(value, timedelta):
        return datetime.fromtimestamp(now + value.total_seconds(), UTC)
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime (or an ISO string), not {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=zone(app))


def tries_for(task: TaskPort | None) -> int:
    if task is None:
        return DEFAULT_TRIES
    return FOREVER_TRIES if task.max_retries is None else int(task.max_retries) + 1


def time_limits(app: AppPort, task: TaskPort | None, options: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The hard and soft limits of one call: its options, else the task's, else the app's settings."""
    hard = options.get("time_limit") or getattr(task, "time_limit", None) or app.conf["task_time_limit"]
    soft = (options.get("soft_time_limit") or getattr(task, "soft_time_limit", None)
            or app.conf["task_soft_time_limit"])
    check_time_limits(soft, hard, getattr(task, "name", None))
    return hard, soft


def check_time_limits(soft: Any, hard: Any, task: str | None = None) -> None:
    """Refuse a soft limit past the hard one: the hard limit would stop the task before it warned.

    Checked where Celery checks it: when a message is made (``delay``, ``apply_async``), not
    where the task is declared (a module declaring one still imports) nor by ``apply()``.
    """
    if soft and hard and soft > hard:
        where = f" (task {task})" if task else ""
        raise ValueError(f"soft_time_limit must be less than or equal to time_limit{where}: soft_time_limit "
                         f"is {soft}, time_limit {hard}; lower soft_time_limit or raise time_limit")


def origin() -> str:
    return f"gen{os.getpid()}@{socket.gethostname()}"


@dataclass
class Prepared:
    """One task message before it is pushed: what ``before_task_publish`` receivers see, and the envelope."""

    name: str
    queue: str
    task_id: str
    headers: dict[str, Any]
    body: tuple[Any, Any, Any]
    plain: tuple[list[Any], dict[str, Any]]
    tries: int
    timeout: float
    now: float
    available_at: float | None

    def envelope(self, message_id: str | None = None) -> Envelope:
        args, kwargs, _ = self.body
        return Envelope.new(self.name, self.queue, {"args": args, "kwargs": kwargs}, id=message_id or self.task_id,
                            tries=self.tries, timeout=self.timeout, now=self.now, available_at=self.available_at,
                            headers=codec.encode(self.headers, "a header", self.name))


def prepare(app: AppPort, name: str, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None,
            options: Mapping[str, Any], task: TaskPort | None = None) -> Prepared:
    """A task message, checked, routed and encoded, not yet pushed (what `publish` and a schedule entry build)."""
    check_options(name, options)
    names = task.positional_names() if task is not None else ()
    plain_args, plain_kwargs = list(args or ()), dict(kwargs or {})
    sent_args, sent_kwargs = codec.encode_call(name, plain_args, plain_kwargs, names)
    queue = routing.queue_for(app, name, task, plain_args, plain_kwargs, options)
    now = app.jobbridge_app().clock.now()
    task_id = str(options.get("task_id") or new_id())
    eta = _eta(app, options, now)
    expires = options.get("expires", getattr(task, "expires", None))
    expires_at = moment(app, expires, now, "expires") if expires is not None else None
    hard, soft = time_limits(app, task, options)
    embed = workflow(options)
    headers = _headers(name, task_id, options, eta, expires_at, (hard, soft), plain_args, plain_kwargs, task)
    headers.update({k: v for k, v in embed.items() if v is not None})
    return Prepared(name, queue, task_id, headers, (sent_args, sent_kwargs, embed), (plain_args, plain_kwargs),
                    tries_for(task), float(hard) if hard else NO_TIME_LIMIT, now,
                    eta.timestamp() if eta is not None else None)


def publish(app: AppPort, name: str, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None,
            options: Mapping[str, Any], task: TaskPort | None = None, message_id: str | None = None) -> str:
    """Push one task message; its task id. Options are checked, arguments encoded here.

    ``message_id``: the envelope's own id when it must differ from the task id (a task that
    replaces itself hands its id on while its own message is still held).
    """
    msg = prepare(app, name, args, kwargs, options, task)
    headers, body, queue = msg.headers, msg.body, msg.queue
    properties = {"correlation_id": msg.task_id, "reply_to": options.get("reply_to"), "delivery_mode": 2,
                  "priority": None, **(headers.get("properties") or {})}
    signals.before_task_publish.send(sender=name, body=body, exchange="", routing_key=queue, headers=headers,
                                     properties=properties, declare=[], retry_policy=options.get("retry_policy"))
    app.jobbridge_app().push([msg.envelope(message_id)], transaction=options.get("transaction"))
    signals.after_task_publish.send(sender=name, body=body, exchange="", routing_key=queue, headers=headers)
    if signals.task_sent.has_listeners():
        signals.task_sent.send(sender=name, task_id=msg.task_id, task=name, args=msg.plain[0], kwargs=msg.plain[1],
                               eta=headers["eta"], taskset=None)
    return msg.task_id


def _eta(app: AppPort, options: Mapping[str, Any], now: float) -> datetime | None:
    countdown, eta = options.get("countdown"), options.get("eta")
    if countdown is not None:
        seconds = countdown.total_seconds() if isinstance(countdown, timedelta) else float(countdown)
        return datetime.fromtimestamp(now + max(0.0, seconds), UTC)
    return moment(app, eta, now, "eta") if eta is not None else None


def _headers(name: str, task_id: str, options: Mapping[str, Any], eta: datetime | None,
             expires: datetime | None, limits: tuple[Any, Any], args: list[Any], kwargs: dict[str, Any],
             task: TaskPort | None) -> dict[str, Any]:
    parent = current_request()
    own = dict(options.get("headers") or {})
    headers = {
        **own,
        "lang": "py", "task": name, "id": task_id, "shadow": None,
        "eta": eta.isoformat() if eta is not None else None,
        "expires": expires.isoformat() if expires is not None else None,
        "group": options.get("group_id"), "group_index": options.get("group_index"),
        "retries": int(options.get("retries") or 0),
        "timelimit": list(limits),
        "root_id": options.get("root_id") or (parent.root_id or parent.id if parent else None) or task_id,
        "parent_id": options.get("parent_id") or (parent.id if parent else None),
        "argsrepr": options.get("argsrepr") or repr(tuple(args)),
        "kwargsrepr": options.get("kwargsrepr") or repr(kwargs),
        "origin": origin(),
        "ignore_result": (bool(options["ignore_result"]) if options.get("ignore_result") is not None
                          else ignores_result(task) if task is not None else None),
    }
    properties = {key: options[key] for key in MESSAGE_PROPERTIES if options.get(key) is not None}
    if properties:
        headers["properties"] = properties
    return headers


def workflow(options: Mapping[str, Any]) -> dict[str, Any]:
    """What follows the task, as Celery's message body carries it: signatures as JSON dicts."""
    return {"callbacks": _signatures(options.get("link")), "errbacks": _signatures(options.get("link_error")),
            "chain": _signatures(options.get("chain")),
            "chord": dict(options["chord"]) if options.get("chord") else None}


def _signatures(value: Any) -> list[dict[str, Any]] | None:
    if not value:
        return None
    items = [value] if isinstance(value, Mapping) else list(value)
    return [dict(item) for item in items]


def warn_eager_send_task(name: str) -> None:
    warnings.warn(f"send_task({name!r}) ignores task_always_eager: the task is published, as in Celery",
                  AlwaysEagerIgnored, stacklevel=3)


__all__ = ["FOREVER_TRIES", "MESSAGE_PROPERTIES", "NO_TIME_LIMIT", "Prepared", "check_options", "custom_headers",
           "prepare", "publish", "workflow", "zone"]
