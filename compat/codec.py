"""Task arguments as JSON, the way Celery's json serializer sends them, checked at the call.

JSON values go as they are (a tuple arrives as a list, as with Celery). A datetime,
date, time, UUID, Decimal or bytes is sent tagged, ``{"__type__": "datetime", "__value__":
"..."}`` (bytes as ``"bytes"`` when they are UTF-8, else ``"base64"``), and arrives as
the same type, as kombu's json does. Anything else is
refused where ``delay()`` was called, naming the argument, so that a model
instance never travels in place of its id.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from jobbridge.errors import PayloadEncodeError

from .exceptions import CeleryError

_TAGS: dict[str, Callable[[str], Any]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "uuid": uuid.UUID,
    "decimal": Decimal,
    "bytes": lambda text: text.encode("utf-8"),
    "base64": lambda text: base64.b64decode(text.encode("ascii")),
}


class EncodeError(CeleryError, PayloadEncodeError):
    """An argument cannot be sent with the json serializer; raised at the call, naming it."""


def _tag(value: Any) -> dict[str, str] | None:
    if isinstance(value, datetime):
        return {"__type__": "datetime", "__value__": value.isoformat()}
    if isinstance(value, date):
        return {"__type__": "date", "__value__": value.isoformat()}
    if isinstance(value, time):
        return {"__type__": "time", "__value__": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"__type__": "uuid", "__value__": str(value)}
    if isinstance(value, Decimal):
        return {"__type__": "decimal", "__value__": str(value)}
    if isinstance(value, bytes):
        try:
            return {"__type__": "bytes", "__value__": value.decode("utf-8")}
        except UnicodeDecodeError:
            return {"__type__": "base64", "__value__": base64.b64encode(value).decode("ascii")}
    return None


def encode(value: Any, path: str, task: str) -> Any:
    """One argument as JSON-ready data; ``path`` names it in the error."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise EncodeError(f"{path} of {task} is {value!r}, which JSON cannot hold")
        return value
    tagged = _tag(value)
    if tagged is not None:
        return tagged
    if isinstance(value, list | tuple):
        return [encode(v, f"{path}[{i}]", task) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodeError(f"{path} of {task} has the key {key!r}; JSON object keys are strings")
            out[key] = encode(item, f"{path}[{key!r}]", task)
        return out
    raise EncodeError(
        f"{path} of {task} is a {type(value).__module__}.{type(value).__qualname__}, which the json "
        "serializer cannot send; pass a JSON value (str, int, float, bool, None, list, dict, or a datetime, "
        "date, time, UUID, Decimal or bytes), e.g. an object's id, and load the object inside the task")


def encode_call(task: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                names: Sequence[str] = ()) -> tuple[list[Any], dict[str, Any]]:
    """A call's arguments as JSON data; positional ones are named by parameter when known."""
    out_args = []
    for i, value in enumerate(args):
        label = f"argument {names[i]!r} (position {i})" if i < len(names) else f"positional argument {i}"
        out_args.append(encode(value, label, task))
    out_kwargs = {}
    for key, value in kwargs.items():
        if not isinstance(key, str):
            raise EncodeError(f"keyword {key!r} of {task} is not a string")
        out_kwargs[key] = encode(value, f"argument {key!r}", task)
    return out_args, out_kwargs


def decode(value: Any) -> Any:
    """Arguments as they were sent: tagged values back to their types."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        kind = value.get("__type__")
        if len(value) == 2 and isinstance(kind, str) and kind in _TAGS and isinstance(value.get("__value__"), str):
            return _TAGS[kind](value["__value__"])
        return {k: decode(v) for k, v in value.items()}
    return value
