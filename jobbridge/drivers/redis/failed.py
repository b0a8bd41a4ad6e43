"""The failed store: a hash per failed job, indexed by a sorted set scored by when it failed."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import redis

from jobbridge.clock import Clock
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.redis.failed_scan import SCAN_PAGE, FailedScan, Ranks
from jobbridge.drivers.redis.keys import Keys
from jobbridge.drivers.redis.scripts import Scripts
from jobbridge.envelope import Envelope
from jobbridge.errors import NoFailedJob
from jobbridge.store_reports import FailedJob

#: failures a filtered listing looks at per round trip (on the server, by `FailedScan`)
FILTER_PAGE = SCAN_PAGE


class FailedStore:
    """Retry, flush, count, list and read failed jobs (fail.lua writes them, atomically with the stream)."""

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts, clock: Clock) -> None:
        self.client, self.keys, self.scripts, self.clock = client, keys, scripts, clock
        self.scan = FailedScan(client)

    def _ids(self) -> list[bytes]:
        """The index's ids as stored (bytes, whatever wrote them)."""
        found = self.client.zrange(self.keys.failed, 0, -1)
        return [raw if isinstance(raw, bytes) else str(raw).encode() for raw in found]

    def _hash(self, job_id: bytes) -> bytes:
        """The hash of an id read back from the index, kept as bytes (whatever wrote it)."""
        return self.keys.failed_job("").encode() + job_id

    def count(self) -> int:
        with translated():
            return int(self.client.zcard(self.keys.failed))

    def retry(self, id_or_all: str) -> int:
        """Back on its queue with attempts reset to 0 and the same id; `NoFailedJob` for an unknown id."""
        with translated():
            ids = [id_or_all] if id_or_all != "all" else [_text(i) for i in self._ids()]
            retried = sum(self._retry_one(job_id, strict=id_or_all != "all") for job_id in ids)
        return retried

    def _retry_one(self, job_id: str, *, strict: bool) -> int:
        queue, body = self.client.hmget(self.keys.failed_job(job_id), ["queue", "body"])
        queue_name = _name(queue)
        if not queue_name or body is None:
            if strict:
                raise NoFailedJob(f"there is no failed job with id {job_id} that names its queue and body")
            return 0
        keys = [self.keys.failed, self.keys.failed_job(job_id), self.keys.stream(queue_name)]
        fresh = self._fresh_body(body if isinstance(body, bytes) else body.encode())
        done = self.scripts.retry([*keys, self.keys.queues], [job_id, queue_name, fresh])
        if strict and not done:
            raise NoFailedJob(f"there is no failed job with id {job_id} (retried meanwhile)")
        return int(done)

    def _fresh_body(self, body: bytes) -> bytes:
        """The stored envelope as a new job: attempts 0, available now, no unique lock to hold.

        A body that never decoded goes back as it was, to be failed again with its reason.
        """
        try:
            env = Envelope.decode(body)
            return env.replace(attempts=0, available_at=self.clock.now(), unique_key=None).encode()
        except Exception:  # whatever made it undecodable (or unencodable), the next reserve names it
            return body

    def forget(self, job_ids: Sequence[str]) -> int:
        """Delete these failed jobs (`jobbridge.drivers.base.ForgettingFailedStore`)."""
        if not job_ids:
            return 0
        with translated():
            pipe = self.client.pipeline(transaction=True)
            for job_id in job_ids:
                pipe.delete(self.keys.failed_job(job_id))
            pipe.zrem(self.keys.failed, *job_ids)
            results: builtins.list[int] = pipe.execute()
        return int(results[-1])

    def flush(self) -> int:
        """Delete every failed job; return how many."""
        with translated():
            ids = self._ids()
            if not ids:
                return 0
            pipe = self.client.pipeline(transaction=True)
            for job_id in ids:
                pipe.delete(self._hash(job_id))
            pipe.zrem(self.keys.failed, *ids)
            results: list[int] = pipe.execute()
        return int(results[-1])

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        """The newest first: ``since`` and ``until`` are a range of the index's scores, paged by rank
        (`Ranks`); a queue, name or error filter is applied on the server to each newer failure,
        `FILTER_PAGE` at a time, until ``limit`` match."""
        where = where or FailedFilter()
        filtered = where.queue is not None or where.name is not None or bool(where.error)
        floor = "-inf" if where.since is None else repr(where.since)
        ceiling = "+inf" if where.until is None else repr(where.until)
        page_size = FILTER_PAGE if filtered else max(limit, 1)
        ids: list[bytes] = []
        offset = 0
        with translated():
            ranks = Ranks(self.client, self.keys.failed, floor, ceiling)
            while len(ids) < limit:
                page = ranks.page(offset, page_size)
                offset += len(page)
                ids += self._matching(page, where) if filtered else page
                if len(page) < page_size:
                    break
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids[:limit]:
                pipe.hgetall(self._hash(job_id))
            rows: list[dict[bytes, Any]] = pipe.execute()
        return [_row(row, job_id) for job_id, row in zip(ids, rows, strict=False) if row]

    def _matching(self, ids: builtins.list[bytes], where: FailedFilter) -> builtins.list[bytes]:
        """Those of ``ids`` whose queue, name and error ``where`` asks for, decided by `FailedScan`."""
        return [ids[i] for i in self.scan.matching([self._hash(job_id) for job_id in ids], where)]

    def get(self, job_id: str) -> FailedJob | None:
        with translated():
            row: dict[Any, Any] = self.client.hgetall(self.keys.failed_job(job_id))
        return _row(row, job_id.encode()) if row else None


def _row(row: dict[bytes, Any], job_id: bytes) -> FailedJob:
    """One failed job's hash, read so that no field (missing, mistyped, not text) can break a listing."""
    return FailedJob(
        id=_text(row.get(b"id", job_id)),
        queue=_text(row.get(b"queue"), "?"),
        name=_text(row.get(b"name"), "?"),
        attempts=_number(row.get(b"attempts"), int),
        error=_text(row.get(b"error"), ""),
        failed_at=_number(row.get(b"failed_at"), float),
        body=bytes(row.get(b"body") or b""),
    )


def _text(raw: Any, missing: str = "") -> str:
    """For a listing: what can be shown, with bytes that are not UTF-8 replaced."""
    if raw is None:
        return missing
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


def _name(raw: Any) -> str:
    """For a retry: the queue as written, or "" when it is not UTF-8 text (no queue to go back to)."""
    try:
        return raw.decode() if isinstance(raw, bytes) else ""
    except UnicodeDecodeError:
        return ""


N = TypeVar("N", int, float)


def _number(raw: Any, kind: type[N]) -> N:
    try:
        value = kind(raw)
    except (TypeError, ValueError, OverflowError):
        return kind(0)
    return value if math.isfinite(value) else kind(0)
