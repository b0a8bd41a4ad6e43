"""Failed jobs in a redis shared store: a hash per job, ``F:<id>``, indexed by the sorted set ``failed``.

Both sit under the connection's prefix (the redis driver's prefix plus the
driver's scope), scored by ``failed_at``, so the newest come first and a
``since`` filter is a range of scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.redis.connection import as_text, translated
from jobbridge.drivers.redis.failed_scan import SCAN_PAGE, FailedScan, Ranks
from jobbridge.store_reports import FailedJob

#: failed jobs a filtered listing looks at per round trip (on the server, by `FailedScan`)
FAILED_PAGE = SCAN_PAGE


class RedisFailedRows:
    """One scope's failed jobs on the shared store connection's redis client."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self.scan = FailedScan(client)

    def record(self, job: FailedJob) -> None:
        """Write a failed job (replacing an earlier failure of the same id) in one MULTI."""
        key = f"{self.prefix}F:{job.id}"
        with translated():
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hset(key, mapping={"id": job.id, "queue": job.queue, "name": job.name, "attempts": job.attempts,
                                    "error": job.error, "failed_at": repr(job.failed_at), "body": job.body})
            pipe.zadd(f"{self.prefix}failed", {job.id: job.failed_at})
            pipe.execute()

    def bodies(self, ids: Sequence[str]) -> list[tuple[str, str, bytes]]:
        """``(id, queue, body)`` of each id the store holds."""
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hmget(f"{self.prefix}F:{job_id}", "queue", "body")
            rows: list[list[Any]] = pipe.execute()
        return [(job_id, as_text(q), bytes(b)) for job_id, (q, b) in zip(ids, rows, strict=True) if b is not None]

    def ids(self) -> list[str]:
        with translated():
            return [as_text(i) for i in self.client.zrange(f"{self.prefix}failed", 0, -1)]

    def remove(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with translated():
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(*(f"{self.prefix}F:{i}" for i in ids))
            pipe.zrem(f"{self.prefix}failed", *ids)
            pipe.execute()

    def count(self) -> int:
        with translated():
            return int(self.client.zcard(f"{self.prefix}failed"))

    def list(self, limit: int, where: FailedFilter | None = None) -> list[FailedJob]:
        """The newest first: ``since`` and ``until`` are a range of the index's scores, paged by rank; a queue, name or
        error filter is applied on the server (`FailedScan`) to each newer failure, `FAILED_PAGE` at a
        time, until ``limit`` match; only the matches are read whole."""
        where = where or FailedFilter()
        floor = "-inf" if where.since is None else repr(where.since)
        ceiling = "+inf" if where.until is None else repr(where.until)
        unfiltered = where.queue is None and where.name is None and not where.error
        page_size = max(limit, 1) if unfiltered else FAILED_PAGE
        found: list[FailedJob] = []
        offset = 0
        with translated():
            ranks = Ranks(self.client, f"{self.prefix}failed", floor, ceiling)
            while len(found) < limit:
                ids = [as_text(i) for i in ranks.page(offset, page_size)]
                offset += len(ids)
                keys = [f"{self.prefix}F:{job_id}" for job_id in ids]
                chosen = keys if unfiltered else [keys[i] for i in self.scan.matching(keys, where)]
                pipe = self.client.pipeline(transaction=False)
                for key in chosen[:limit - len(found)]:
                    pipe.hgetall(key)
                rows: list[dict[bytes, Any]] = pipe.execute()
                found += [failed_job(row) for row in rows if row]
                if len(ids) < page_size:
                    break
        return found[:limit]

    def get(self, job_id: str) -> FailedJob | None:
        with translated():
            row: dict[Any, Any] = self.client.hgetall(f"{self.prefix}F:{job_id}")
        return failed_job(row) if row else None


def failed_job(row: dict[bytes, Any]) -> FailedJob:
    """A failed job's hash as a `FailedJob`."""
    return FailedJob(
        id=as_text(row[b"id"]), queue=as_text(row[b"queue"]), name=as_text(row[b"name"]),
        attempts=int(row[b"attempts"]), error=as_text(row[b"error"]), failed_at=float(row[b"failed_at"]),
        body=bytes(row[b"body"]),
    )
