"""``driver.failed`` of an amqp connection: the shared store's failed jobs, retried by publishing them again.

A retry publishes each job (attempts reset, due now, its unique key dropped,
as on every driver) and waits for the broker's confirm before it deletes the
failed row: a crash in between leaves the job both queued and failed, never
neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.clock import Clock
from jobbridge.drivers.amqp.publisher import Outgoing
from jobbridge.drivers.amqp.store import SharedStore
from jobbridge.drivers.amqp.topology import Route
from jobbridge.drivers.base import FailedFilter
from jobbridge.envelope import Envelope, FailedJob
from jobbridge.errors import NoFailedJob

#: failed jobs published back per round
RETRY_BATCH = 500


class AmqpFailedStore:
    def __init__(self, store: SharedStore, clock: Clock, publish: Callable[[Sequence[Outgoing]], None],
                 route: Callable[[str], Route]) -> None:
        self._store, self._clock, self._publish = store, clock, publish
        self.route = route

    def retry(self, id_or_all: str) -> int:
        moved = 0
        while True:
            rows = self._store.take(id_or_all, RETRY_BATCH)
            if not rows and id_or_all != "all" and not moved:
                raise NoFailedJob(f"there is no failed job with id {id_or_all}")
            if not rows:
                return moved
            now = self._clock.now()
            out = [self._again(job_id, queue, body, now) for job_id, queue, body in rows]
            self._publish(out)
            self._store.remove([job_id for job_id, _, _ in rows])
            moved += len(rows)
            if id_or_all != "all" or len(rows) < RETRY_BATCH:
                return moved

    def _again(self, job_id: str, queue: str, body: bytes, now: float) -> Outgoing:
        try:
            env = Envelope.decode(body)
            body = env.replace(attempts=0, available_at=now, unique_key=None).encode()
        except Exception:  # goes back as it was, to be failed again with its reason
            pass
        return Outgoing(self.route(queue), body, job_id, queue)

    def flush(self) -> int:
        return self._store.flush()

    def count(self) -> int:
        return self._store.count()

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        return self._store.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self._store.get(job_id)
