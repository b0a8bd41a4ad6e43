"""A task's meta as Celery's result backends keep it, both ways: a `ResultRecord` to Celery's meta and back.

Celery's backends (its Redis keys, its database rows) store the same meta: ``status``,
``result`` (by state: the return value, a progress meta, or a failure as Celery's JSON
exception ``{"exc_type": "ValueError", "exc_message": ["boom"], "exc_module": "builtins"}``),
``traceback``, ``children``, ``date_done``, ``task_id`` (and ``name`` when known). The
Celery result layouts (`jobbridge.results.celery_redis`, `jobbridge.results.celery_database`)
share this translation, so a record reads back the same from either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import orjson

from jobbridge.results.base import FAILURE, READY_STATES, RETRY, REVOKED, SUCCESS, ResultRecord, round_trip

#: a progress meta that is not an object travels in Celery's ``result`` as it is; the facade reads it under this
WRAPPED = "__celery_meta__"
_REVOKED = ("celery.exceptions", "TaskRevokedError")


@dataclass(frozen=True, slots=True)
class ChordClaim:
    """The last header task's claim on a chord: every part's outcome, in header order, and the claim's token."""

    group_id: str
    token: str
    parts: tuple[ResultRecord, ...]


@runtime_checkable
class CeleryChords(Protocol):
    """A result store that joins chords in Celery's own keys, so header tasks on both sides count in one place.

    The facade uses it, in place of its counters, when its store has it (Celery's Redis layout).
    """

    def chord_start(self, group_id: str, size: int, ttl: float) -> None:
        """A chord is applied: its size, where the parts are counted against it."""
        ...

    def chord_part(self, group_id: str, record: ResultRecord, index: int | None, ttl: float) -> ChordClaim | None:
        """Count one header task's outcome (once per task and index); the claim when it was the last, else None."""
        ...

    def chord_done(self, claim: ChordClaim) -> None:
        """The body was published (or the chord failed): drop the parts, so a later run counts nothing."""
        ...


def meta_of(record: ResultRecord, now: float) -> dict[str, Any]:
    """The meta Celery's backend writes for a record (its ``result`` by state, as Celery's json encodes it)."""
    meta: dict[str, Any] = {
        "status": record.state, "result": result_of(record), "traceback": record.traceback, "children": [],
        "date_done": datetime.fromtimestamp(now, UTC).isoformat() if record.state in READY_STATES else None,
        "task_id": record.id,
    }
    if record.name is not None:
        meta["name"] = record.name
    return meta


def result_of(record: ResultRecord) -> Any:
    """Celery's ``result`` field for a record: the value, the JSON exception, or the progress meta."""
    if record.state == SUCCESS:
        return round_trip(record.result, "result", record.id)
    if record.state == REVOKED:
        return {"exc_type": _REVOKED[1], "exc_message": [record.error or "revoked"], "exc_module": _REVOKED[0]}
    if record.state in (FAILURE, RETRY) and (record.exception_type or record.error):
        module, _, qualname = (record.exception_type or "builtins.Exception").rpartition(".")
        message = _message(record.error or "", qualname)
        return {"exc_type": qualname, "exc_message": [message], "exc_module": module or "builtins"}
    meta = record.meta
    if isinstance(meta, Mapping) and len(meta) == 1 and WRAPPED in meta:
        return round_trip(meta[WRAPPED], "meta", record.id)
    return round_trip(meta, "meta", record.id)


def _message(error: str, qualname: str) -> str:
    """A stored error (``"Type: message"``, first line) as the exception's message."""
    head = error.split("\n", 1)[0]
    for prefix in (f"{qualname}: ", f"{qualname.rpartition('.')[2]}: "):
        if head.startswith(prefix):
            return head[len(prefix):]
    return "" if head in (qualname, qualname.rpartition(".")[2]) else head


def record_of(id: str, raw: bytes | str | None, now: float) -> ResultRecord | None:
    """The record a Celery meta (JSON text) stands for; None when there is none (PENDING) or it is not a meta."""
    if raw is None:
        return None
    try:
        meta = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return record_from_meta(id, meta, now) if isinstance(meta, dict) else None


def record_from_meta(id: str, meta: Mapping[str, Any], now: float) -> ResultRecord | None:
    """The record for a decoded meta (``date_done`` ISO text or a datetime); None when it has no status."""
    if not isinstance(meta.get("status"), str):
        return None
    state, result = meta["status"], meta.get("result")
    done = _time(meta.get("date_done")) or now
    fields: dict[str, Any] = {"id": id, "state": state, "name": meta.get("name"), "traceback": meta.get("traceback"),
                              "created_at": done, "updated_at": done}
    exc = result if isinstance(result, dict) and "exc_type" in result else None
    if state == SUCCESS:
        fields["result"] = result
    elif exc is not None and state in (FAILURE, RETRY, REVOKED):
        fields.update(failure_of(exc))
    else:
        fields["meta"] = result if isinstance(result, dict) or result is None else {WRAPPED: result}
    return ResultRecord(**fields)


def failure_of(exc: Mapping[str, Any]) -> dict[str, Any]:
    """A Celery JSON exception as a record's ``error`` and ``exception_type``."""
    qualname, module = str(exc.get("exc_type") or "Exception"), exc.get("exc_module")
    args = exc.get("exc_message")
    message = str(args[0]) if isinstance(args, list) and len(args) == 1 else (
        "" if args in ([], None) else str(tuple(args)) if isinstance(args, list) else str(args))
    exception_type = f"{module}.{qualname}" if module else qualname
    return {"error": f"{qualname.rpartition('.')[2]}: {message}" if message else qualname,
            "exception_type": exception_type}


def _time(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


__all__ = ["WRAPPED", "CeleryChords", "ChordClaim", "failure_of", "meta_of", "record_from_meta", "record_of",
           "result_of"]
