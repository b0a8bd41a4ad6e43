"""Celery's task message, protocol version 2 in JSON, as a jobbridge `Envelope` and back.

A Celery 5 client sends a task as headers (``task``, ``id``, ``eta``, ``expires``,
``retries``, ``timelimit``, ``root_id``, ``parent_id``, ``group``, ``argsrepr``, ...)
and a body ``[args, kwargs, embed]``, where ``embed`` carries what follows the task
(``callbacks``, ``errbacks``, ``chain``, ``chord``). The facade already keeps those
headers on its envelopes, Celery-shaped, with ``embed`` among them; so a message
becomes an envelope by moving ``embed`` into the headers, and an envelope becomes
a message by moving it back. Every header neither side knows is kept and passed on.

What a Celery message cannot say about a jobbridge job (its tries, its timeout when
it has no time limit, its unique key, the payload of a plain jobbridge job) travels
in one header of jobbridge's own, `META`, which a Celery worker ignores.

Attempts: Celery counts ``retries``, the retries already made, in the message; an
envelope counts attempts begun. A message read with ``retries = n`` is attempt
``n + 1`` (one more when the transport says it was delivered before and lost), and
its envelope's ``retries`` header is 0, so the facade's ``request.retries``
(header + attempt - 1) is ``n``. A message written for an envelope carries
``retries`` = header + attempts, so the count goes on whichever side runs it next.

Only JSON is read. A message in pickle, YAML or any serializer that can run code
when decoded, a compressed one, one of protocol 1, or one that is not a Celery
message at all is never decoded: `WireRefused` says why, and the driver fails it.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from jobbridge import limits
from jobbridge.envelope import Envelope
from jobbridge.errors import PayloadDecodeError

#: jobbridge's own header: what a Celery message has no field for
META = "jobbridge"
#: the embedded workflow of a protocol-2 body (its third element), kept in the envelope's headers
EMBED = ("callbacks", "errbacks", "chain", "chord")
JSON_TYPES = ("application/json", "application/x-json")
#: serializers whose decoding can run code: never decoded, whatever the message says
UNSAFE = {"application/x-python-serialize": "pickle", "application/x-yaml": "yaml",
          "application/data": "a raw binary body"}
#: the timeout of a task with no time limit: the longest the core allows
NO_TIME_LIMIT = limits.MAX_TIMEOUT
#: the tries of a message that does not say (Celery keeps max_retries in the task, not the message):
#: the task's own retry rules decide, as they do on a Celery worker
UNSAID_TRIES = limits.MAX_TRIES
#: headers of the transport, not of the task: dropped when a message is read
TRANSPORT_HEADERS = ("redelivered",)


class WireRefused(PayloadDecodeError):
    """A message this driver will not decode (not JSON, not protocol 2, not a Celery task), and why."""


@dataclass(frozen=True, slots=True)
class Message:
    """One task message as a transport carries it: body bytes, headers, and the content it declares."""

    body: bytes
    headers: Mapping[str, Any]
    content_type: str | None = "application/json"
    content_encoding: str | None = "utf-8"
    redelivered: bool = False


def origin() -> str:
    return f"gen{os.getpid()}@{socket.gethostname()}"


# -- reading -------------------------------------------------------------------------------------


def read(message: Message, queue: str, now: float) -> Envelope:
    """The envelope of a Celery message; `WireRefused` naming what is wrong, never a value in it."""
    _check_content(message)
    headers = dict(message.headers)
    if "task" not in headers and not headers:
        raise WireRefused("not a Celery protocol 2 message: it has no headers (a protocol 1 message keeps the "
                          "task in its body; send with task_protocol = 2, Celery's default)")
    task, task_id = headers.get("task"), headers.get("id")
    if not isinstance(task, str) or not task or not isinstance(task_id, str) or not task_id:
        raise WireRefused("not a Celery task message: the headers 'task' and 'id' must be non-empty strings")
    args, kwargs, embed = _body(message.body)
    meta = headers.pop(META, None)
    meta = meta if isinstance(meta, Mapping) else {}
    for key in TRANSPORT_HEADERS:
        headers.pop(key, None)
    retries = _count(headers.get("retries"), "retries")
    headers["retries"] = 0
    headers.update({key: embed.get(key) for key in EMBED if embed.get(key) is not None})
    payload = kwargs if meta.get("payload") == "job" else {"args": args, "kwargs": kwargs}
    fields = {
        "id": str(meta.get("message_id") or task_id), "name": task, "queue": queue, "payload": payload,
        "tries": meta.get("tries", UNSAID_TRIES), "timeout": _timeout(headers.get("timelimit"), meta),
        "available_at": moment(headers.get("eta"), "eta") or now, "created_at": meta.get("created_at", now),
        "attempts": retries + 1 + (1 if message.redelivered else 0),
        "unique_key": meta.get("unique_key"), "unique_for": meta.get("unique_for"), "headers": headers,
        "expires_at": moment(headers.get("expires"), "expires"),
    }
    try:
        return Envelope(**limits.envelope_fields(fields))
    except limits.FieldRefused as exc:
        raise WireRefused(f"Celery message: {exc}") from None


def _check_content(message: Message) -> None:
    kind = (message.content_type or "").lower()
    if kind in UNSAFE:
        raise WireRefused(f"the message is in {UNSAFE[kind]} ({kind}), which is never decoded here: decoding it can "
                          "run code. Send tasks as JSON (task_serializer = 'json', Celery's default)")
    if kind not in JSON_TYPES:
        raise WireRefused(f"the message's content type is {kind[:60]!r}; only JSON (application/json) is read. "
                          "Send tasks as JSON (task_serializer = 'json')")
    if (message.content_encoding or "utf-8").lower() not in ("utf-8", "utf8"):
        raise WireRefused("the message's content encoding is not utf-8; JSON tasks are sent as utf-8")
    if message.headers.get("compression"):
        raise WireRefused("the message is compressed; compressed task messages are not read. Send them "
                          "uncompressed (no task_compression, no compression= option)")


def _body(body: bytes) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireRefused(f"the message body is not JSON ({exc.msg} at character {exc.pos})") from None
    if not (isinstance(data, list) and len(data) == 3):
        raise WireRefused("the message body is not a protocol 2 body [args, kwargs, embed]")
    args, kwargs, embed = data
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(embed, dict | None):
        raise WireRefused("the message body must be [a list of args, an object of kwargs, an object or null]")
    return args, kwargs, dict(embed or {})


def _count(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limits.MAX_STORED_ATTEMPTS - 1:
        raise WireRefused(f"the message's {what} header must be a whole number of at least 0")
    return value


def _timeout(timelimit: Any, meta: Mapping[str, Any]) -> float:
    """The hard limit of ``timelimit`` [hard, soft]; else jobbridge's own, else none (the core's longest)."""
    hard = timelimit[0] if isinstance(timelimit, list | tuple) and timelimit else None
    if isinstance(hard, int | float) and not isinstance(hard, bool) and hard > 0:
        return min(float(hard), NO_TIME_LIMIT)
    own = meta.get("timeout")
    return float(own) if isinstance(own, int | float) and not isinstance(own, bool) and own > 0 else NO_TIME_LIMIT


def moment(value: Any, what: str) -> float | None:
    """An ``eta`` or ``expires`` header (ISO 8601; naive is UTC, as Celery writes it) as epoch seconds."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if not isinstance(value, str):
        raise WireRefused(f"the message's {what} header is not an ISO 8601 time")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise WireRefused(f"the message's {what} header is not an ISO 8601 time") from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


# -- writing -------------------------------------------------------------------------------------


def write(env: Envelope, now: float) -> Message:
    """The Celery message of an envelope: Celery's headers, body [args, kwargs, embed], jobbridge's `META`."""
    headers = dict(env.headers)
    embed = {key: headers.pop(key, None) for key in EMBED}
    call = _is_call(env.payload)
    args = list(env.payload.get("args") or []) if call else []
    kwargs = dict(env.payload.get("kwargs") or {}) if call else dict(env.payload)
    task_id = str(headers.get("id") or env.id)
    retries = _count(headers.get("retries"), "retries") + env.attempts
    meta: dict[str, Any] = {"tries": env.tries, "timeout": env.timeout, "created_at": env.created_at}
    meta.update({k: v for k, v in (("unique_key", env.unique_key), ("unique_for", env.unique_for)) if v is not None})
    if not call:
        meta["payload"] = "job"
    if env.id != task_id:
        meta["message_id"] = env.id
    headers.update({
        "lang": headers.get("lang") or "py", "task": env.name, "id": task_id, "retries": retries,
        "eta": _iso(env.available_at) if env.available_at > now else None,
        "expires": _iso(env.expires_at) if env.expires_at is not None else headers.get("expires"),
        "timelimit": headers.get("timelimit") or [None, None], "root_id": headers.get("root_id") or task_id,
        "parent_id": headers.get("parent_id"), "group": headers.get("group"),
        "group_index": headers.get("group_index"), "shadow": headers.get("shadow"),
        "argsrepr": headers.get("argsrepr") or repr(tuple(args)), "kwargsrepr": headers.get("kwargsrepr")
        or repr(kwargs), "origin": headers.get("origin") or origin(),
        "ignore_result": bool(headers.get("ignore_result") or False),
        "replaced_task_nesting": headers.get("replaced_task_nesting") or 0, META: meta,
    })
    body = orjson.dumps([args, kwargs, embed])
    return Message(body=body, headers=headers)


def _is_call(payload: Mapping[str, Any]) -> bool:
    """Whether a payload is a task call (the facade's ``{"args": [...], "kwargs": {...}}``)."""
    return set(payload) == {"args", "kwargs"} and isinstance(payload["args"], list) \
        and isinstance(payload["kwargs"], dict)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()
