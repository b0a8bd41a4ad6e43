"""Task results where Celery's Redis backend keeps them, so Celery and jobbridge read each other's.

URL: ``celery+redis://host:6379/1`` (``celery+rediss://``), the ``result_backend`` a
Celery fleet already uses, behind ``celery+``. The facade selects it by itself when it
speaks Celery's wire (``jobbridge_wire = "celery"``, docs/celery-wire.md).

Layout, Celery's own::

    celery-task-meta-<task id>   string   the task's meta as JSON: status, result, traceback,
                                          children, date_done, task_id (and name, when known)
                                          kept for the result's ttl (Celery's result_expires)
    (pub/sub) celery-task-meta-<task id>  each write is published on the key's own name, the
                                          wake-up a Celery client's get() subscribes to

A failure's ``result`` is Celery's JSON exception, ``{"exc_type": "ValueError",
"exc_message": ["boom"], "exc_module": "builtins"}``; a record read back gives the
facade its type and message, which it raises as the task's own type where it can
import it (never anything but an exception class). A result that is SUCCESS is
never overwritten, as in Celery.

What has no place in Celery's layout, the facade's cancellations, chord counters and
saved groups, stays in the jobbridge Redis result store beside it (prefix ``jobbridge:``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import orjson

from jobbridge.clock import Clock
from jobbridge.drivers.redis.connection import translated
from jobbridge.errors import DriverUnavailable
from jobbridge.results.base import (
    FAILURE,
    READY_STATES,
    RETRY,
    REVOKED,
    SUCCESS,
    ResultRecord,
    check_record,
    encode_json,
    round_trip,
)
from jobbridge.results.redis import RedisResultStore, open_redis_store

TASK_KEY = "celery-task-meta-"
#: ids of what the facade keeps for itself (a saved group, a call kept for result_extended): jobbridge's layout
OWN_IDS = ("celery-group-meta:", "celery-task-meta-extended:")
#: a progress meta that is not an object travels in Celery's ``result`` as it is; the facade reads it under this
WRAPPED = "__celery_meta__"
#: seconds one wait listens before it reads the key again (a publish missed in a reconnect costs one slice)
SLICE = 1.0
_REVOKED = ("celery.exceptions", "TaskRevokedError")


class CeleryRedisResultStore:
    """Task meta in Celery's keys; cancellations, counters and the facade's own records in jobbridge's."""

    def __init__(self, inner: RedisResultStore) -> None:
        self.inner, self.client, self.clock = inner, inner.client, inner.clock
        source = resources.files("jobbridge.results").joinpath("celery_store.lua").read_text()
        self._store = self.client.register_script(source)

    def __repr__(self) -> str:
        return f"<CeleryRedisResultStore {self.describe()}>"

    def describe(self) -> str:
        return f"Celery's result layout (celery-task-meta-<id>) on {self.inner.describe()}"

    @staticmethod
    def _celery(id: str) -> bool:
        return not id.startswith(OWN_IDS)

    # -- results -----------------------------------------------------------------------------

    def store(self, record: ResultRecord, ttl: float) -> None:
        if not self._celery(record.id):
            self.inner.store(record, ttl)
            return
        check_record(record)
        text = encode_json(meta_of(record, self.clock.now()), "result", record.id)
        with translated():
            self._store(keys=[TASK_KEY + record.id], args=[text, max(1, round(ttl * 1000))])

    def get(self, id: str) -> ResultRecord | None:
        if not self._celery(id):
            return self.inner.get(id)
        with translated():
            raw = self.client.get(TASK_KEY + id)
        return record_of(id, raw, self.clock.now())

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        own = [i for i in ids if not self._celery(i)]
        found = self.inner.get_many(own) if own else {}
        theirs = [i for i in ids if self._celery(i)]
        if theirs:
            with translated():
                values = self.client.mget([TASK_KEY + i for i in theirs])
            now = self.clock.now()
            for id, raw in zip(theirs, values, strict=True):
                record = record_of(id, raw, now)
                if record is not None:
                    found[id] = record
        return found

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        """Subscribe to the key's channel (Celery's wake-up), read it, and listen until ready or ``timeout``."""
        if not self._celery(id):
            return self.inner.wait(id, timeout)
        deadline = time.monotonic() + max(0.0, timeout)
        latest: ResultRecord | None = None
        while True:
            try:
                latest = self._listen(id, deadline)
            except DriverUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            if (latest is not None and latest.ready) or time.monotonic() >= deadline:
                return latest

    def _listen(self, id: str, deadline: float) -> ResultRecord | None:
        with translated():
            client: Any = self.client
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(TASK_KEY + id)
                latest = self.get(id)
                while not (latest is not None and latest.ready):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    message = pubsub.get_message(timeout=min(SLICE, left))
                    latest = record_of(id, message["data"], self.clock.now()) if message else self.get(id)
                return latest
            finally:
                pubsub.close()

    def forget(self, id: str) -> None:
        if not self._celery(id):
            self.inner.forget(id)
            return
        with translated():
            self.client.delete(TASK_KEY + id)

    # -- what Celery's layout has no place for ---------------------------------------------------

    def prune(self) -> int:
        """jobbridge's own records (Celery's keys expire by themselves, as Celery's backend sets them)."""
        return self.inner.prune()

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        self.inner.cancel(ids, ttl)

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        return self.inner.cancelled(ids)

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        self.inner.counter_init(key, count, ttl)

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        return self.inner.counter_decrement(key, member)

    def close(self) -> None:
        self.inner.close()


# -- the meta, both ways ---------------------------------------------------------------------------


def meta_of(record: ResultRecord, now: float) -> dict[str, Any]:
    """The meta Celery's backend writes for a record (its ``result`` by state, as Celery's json encodes it)."""
    meta: dict[str, Any] = {
        "status": record.state, "result": _result(record), "traceback": record.traceback, "children": [],
        "date_done": datetime.fromtimestamp(now, UTC).isoformat() if record.state in READY_STATES else None,
        "task_id": record.id,
    }
    if record.name is not None:
        meta["name"] = record.name
    return meta


def _result(record: ResultRecord) -> Any:
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
    """The record a Celery meta stands for; None when there is none (Celery's PENDING) or it is not a meta."""
    if raw is None:
        return None
    try:
        meta = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("status"), str):
        return None
    state, result = meta["status"], meta.get("result")
    done = _time(meta.get("date_done")) or now
    fields: dict[str, Any] = {"id": id, "state": state, "name": meta.get("name"), "traceback": meta.get("traceback"),
                              "created_at": done, "updated_at": done}
    exc = result if isinstance(result, dict) and "exc_type" in result else None
    if state == SUCCESS:
        fields["result"] = result
    elif exc is not None and state in (FAILURE, RETRY, REVOKED):
        fields.update(_failure(exc))
    else:
        fields["meta"] = result if isinstance(result, dict) or result is None else {WRAPPED: result}
    return ResultRecord(**fields)


def _failure(exc: Mapping[str, Any]) -> dict[str, Any]:
    qualname, module = str(exc.get("exc_type") or "Exception"), exc.get("exc_module")
    args = exc.get("exc_message")
    message = str(args[0]) if isinstance(args, list) and len(args) == 1 else (
        "" if args in ([], None) else str(tuple(args)) if isinstance(args, list) else str(args))
    exception_type = f"{module}.{qualname}" if module else qualname
    return {"error": f"{qualname.rpartition('.')[2]}: {message}" if message else qualname,
            "exception_type": exception_type}


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def open_celery_redis_store(url: str, *, clock: Clock, prefix: str = "jobbridge:",
                            **options: Any) -> CeleryRedisResultStore:
    """The store for ``celery+redis://...``: Celery's keys, and a jobbridge Redis store on the same server."""
    return CeleryRedisResultStore(open_redis_store(url, clock=clock, prefix=prefix, **options))
