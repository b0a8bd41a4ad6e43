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

Chords are joined in Celery's own keys (`CeleryChords`): the chord's size in
``celery-taskset-meta-<group>.s``, each header task's outcome in the sorted set ``….j``
(counted once per task in ``….d``), and the last part's claim on publishing the body in
``….c``, so a chord whose header runs on Celery and jobbridge workers together joins once,
whichever side runs the last part.

What has no place in Celery's layout, the facade's cancellations, counters and saved
groups, stays in the jobbridge Redis result store beside it (prefix ``jobbridge:``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from importlib import resources
from typing import Any, cast

import orjson

from jobbridge.clock import Clock
from jobbridge.drivers.redis.connection import translated
from jobbridge.errors import DriverUnavailable
from jobbridge.results.base import ResultRecord, check_record, encode_json
from jobbridge.results.celery_meta import WRAPPED, ChordClaim, meta_of, record_from_meta, record_of, result_of
from jobbridge.results.redis import RedisResultStore, open_redis_store

TASK_KEY = "celery-task-meta-"
#: a chord's keys: <prefix><group id>.j (the parts), .t, .s (its size), .d (who counted), .c (the claim)
GROUP_KEY = "celery-taskset-meta-"
#: seconds the last header task's claim on publishing the body lives; the done marker's after it published
CLAIM_SECONDS, DONE_SECONDS = 10, 300
#: ids of what the facade keeps for itself (a saved group, a call kept for result_extended): jobbridge's layout
OWN_IDS = ("celery-group-meta:", "celery-task-meta-extended:")
#: seconds one wait listens before it reads the key again (a publish missed in a reconnect costs one slice)
SLICE = 1.0


class CeleryRedisResultStore:
    """Task meta in Celery's keys; cancellations, counters and the facade's own records in jobbridge's."""

    def __init__(self, inner: RedisResultStore) -> None:
        self.inner, self.client, self.clock = inner, inner.client, inner.clock
        source = resources.files("jobbridge.results").joinpath("celery_store.lua").read_text()
        self._store = self.client.register_script(source)
        here = resources.files("jobbridge.results")
        self._part = self.client.register_script(here.joinpath("celery_chord_part.lua").read_text())
        self._done = self.client.register_script(here.joinpath("celery_chord_done.lua").read_text())

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

    # -- chords, in Celery's keys -------------------------------------------------------------------

    def chord_start(self, group_id: str, size: int, ttl: float) -> None:
        """The chord's size where Celery's backend keeps it (and no claim left from an earlier run of its id)."""
        key = GROUP_KEY + group_id
        with translated():
            pipe = self.client.pipeline()
            pipe.delete(key + ".c")
            pipe.set(key + ".s", size, ex=max(1, round(ttl)))
            pipe.execute()

    def chord_part(self, group_id: str, record: ResultRecord, index: int | None, ttl: float) -> ChordClaim | None:
        """Count a header task's outcome as Celery's Redis backend does; the claim if this was the last part."""
        key = GROUP_KEY + group_id
        part = encode_json([1, record.id, record.state, result_of(record)], "result", record.id)
        token = uuid.uuid4().hex
        with translated():
            _, _, claimed = self._part(
                keys=[key + ".j", key + ".t", key + ".s", key + ".d", key, key + ".c"],
                args=[record.id, part, "+inf" if index is None else index, max(0, round(ttl)), CLAIM_SECONDS,
                      token])
            if not claimed:
                return None
            raw = cast("list[bytes]", self.client.zrange(key + ".j", 0, -1))
        return ChordClaim(group_id, token, tuple(self._part_record(group_id, value) for value in raw))

    def _part_record(self, group_id: str, raw: bytes) -> ResultRecord:
        try:
            _, id, state, result = orjson.loads(raw)
            found = record_from_meta(str(id), {"status": state, "result": result}, self.clock.now())
        except (orjson.JSONDecodeError, TypeError, ValueError):
            found = None
        return found or ResultRecord(id=f"{group_id}-part", state="FAILURE",
                                     error=f"ValueError: a part of chord {group_id} is not Celery's JSON")

    def chord_done(self, claim: ChordClaim) -> None:
        key = GROUP_KEY + claim.group_id
        with translated():
            self._done(keys=[key + ".c", key + ".j", key + ".t", key + ".s", key + ".d"],
                       args=[claim.token, DONE_SECONDS])

    def close(self) -> None:
        self.inner.close()


def open_celery_redis_store(url: str, *, clock: Clock, prefix: str = "jobbridge:",
                            **options: Any) -> CeleryRedisResultStore:
    """The store for ``celery+redis://...``: Celery's keys, and a jobbridge Redis store on the same server."""
    return CeleryRedisResultStore(open_redis_store(url, clock=clock, prefix=prefix, **options))


__all__ = ["TASK_KEY", "WRAPPED", "CeleryRedisResultStore", "meta_of", "open_celery_redis_store", "record_of"]
