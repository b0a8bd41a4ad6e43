"""``driver.failed`` of a celery-wire connection: the shared store's failed jobs, retried onto Celery's queues.

A retry publishes each job again as a Celery message (attempts reset, due now, its
unique key dropped, as on every driver), then deletes its failed row: a crash in
between leaves the job both queued and failed, never neither. A failed entry that
was never a readable message (pickle, garbage) goes back exactly as it was, to be
failed again with its reason: retrying it is how an operator who fixed the sender
learns it still cannot run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.clock import Clock
from jobbridge.drivers.amqp.store import SharedStore
from jobbridge.drivers.base import FailedFilter
from jobbridge.envelope import Envelope, FailedJob
from jobbridge.errors import NoFailedJob

#: failed jobs published back per round
RETRY_BATCH = 500


class CeleryWireFailedStore:
    def __init__(self, store: SharedStore, clock: Clock, publish: Callable[[Sequence[Envelope]], None],
                 push_raw: Callable[[str, bytes], None]) -> None:
        self._store, self._clock, self._publish, self._push_raw = store, clock, publish, push_raw

    def retry(self, id_or_all: str) -> int:
        moved = 0
        while True:
            rows = self._store.take(id_or_all, RETRY_BATCH)
            if not rows and id_or_all != "all" and not moved:
                raise NoFailedJob(f"there is no failed job with id {id_or_all}")
            if not rows:
                return moved
            now = self._clock.now()
            envelopes = []
            for _, queue, body in rows:
                try:
                    env = Envelope.decode(body)
                except Exception:  # never a readable message: back as it was
                    self._push_raw(queue, body)
                    continue
                envelopes.append(env.replace(attempts=0, available_at=now, unique_key=None,
                                             headers={**env.headers, "retries": 0}))
            self._publish(envelopes)
            self._store.remove([job_id for job_id, _, _ in rows])
            moved += len(rows)
            if id_or_all != "all" or len(rows) < RETRY_BATCH:
                return moved

    def flush(self) -> int:
        return self._store.flush()

    def count(self) -> int:
        return self._store.count()

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        return self._store.list(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self._store.get(job_id)

    def forget(self, job_ids: Sequence[str]) -> int:
        held = [job_id for job_id in dict.fromkeys(job_ids) if self._store.get(job_id) is not None]
        self._store.remove(held)
        return len(held)
