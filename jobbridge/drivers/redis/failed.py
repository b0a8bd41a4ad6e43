"""The failed store: a hash per failed job, indexed by a sorted set scored by when it failed."""

from __future__ import annotations

from typing import Any

import redis

from jobbridge.clock import Clock
from jobbridge.drivers.redis.connection import as_text, translated
from jobbridge.drivers.redis.keys import Keys
from jobbridge.drivers.redis.scripts import Scripts
from jobbridge.envelope import Envelope, FailedJob
from jobbridge.errors import NoFailedJob, PayloadDecodeError


class FailedStore:
    """List, count, retry and flush failed jobs (fail.lua writes them, atomically with the stream)."""

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts, clock: Clock) -> None:
        self.client, self.keys, self.scripts, self.clock = client, keys, scripts, clock

    def newest(self, limit: int) -> list[FailedJob]:
        """The newest first."""
        with translated():
            ids = self.client.zrevrange(self.keys.failed, 0, max(limit, 1) - 1)
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids[:limit]:
                pipe.hgetall(self.keys.failed_job(as_text(job_id)))
            rows: list[dict[bytes, Any]] = pipe.execute()
        return [_row(row) for row in rows if row]

    def count(self) -> int:
        with translated():
            return int(self.client.zcard(self.keys.failed))

    def retry(self, id_or_all: str) -> int:
        """Back on its queue with attempts reset to 0 and the same id; `NoFailedJob` for an unknown id."""
        with translated():
            if id_or_all == "all":
                ids = [as_text(i) for i in self.client.zrange(self.keys.failed, 0, -1)]
            else:
                ids = [id_or_all]
            retried = sum(self._retry_one(job_id, strict=id_or_all != "all") for job_id in ids)
        return retried

    def _retry_one(self, job_id: str, *, strict: bool) -> int:
        queue, body = self.client.hmget(self.keys.failed_job(job_id), ["queue", "body"])
        if queue is None or body is None:
            if strict:
                raise NoFailedJob(f"there is no failed job with id {job_id}")
            return 0
        queue_name = as_text(queue)
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
        except PayloadDecodeError:
            return body
        return env.replace(attempts=0, available_at=self.clock.now(), unique_key=None).encode()

    def flush(self) -> int:
        """Delete every failed job; return how many."""
        with translated():
            ids = [as_text(i) for i in self.client.zrange(self.keys.failed, 0, -1)]
            if not ids:
                return 0
            pipe = self.client.pipeline(transaction=True)
            for job_id in ids:
                pipe.delete(self.keys.failed_job(job_id))
            pipe.zrem(self.keys.failed, *ids)
            results: list[int] = pipe.execute()
        return int(results[-1])


def _row(row: dict[bytes, Any]) -> FailedJob:
    return FailedJob(
        id=as_text(row[b"id"]),
        queue=as_text(row[b"queue"]),
        name=as_text(row[b"name"]),
        attempts=int(row[b"attempts"]),
        error=as_text(row[b"error"]),
        failed_at=float(row[b"failed_at"]),
        body=bytes(row[b"body"]),
    )
