"""The kafka connection's failed store, and why a delayed job could not go back on Kafka.

The failed store is the lock store's (a database table or redis hashes); a
failed job is written as every store can keep it (`failed_record`, shared with
the amqp driver: `jobbridge.drivers.shared.failed_rows`).
"""

from __future__ import annotations

from collections.abc import Callable

from jobbridge.clock import Clock
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.kafka.messages import decode
from jobbridge.drivers.kafka.store import Delayed, LeaseStore
from jobbridge.drivers.shared.failed_rows import MAX_ERROR, failed_record
from jobbridge.envelope import new_id
from jobbridge.store_reports import FailedJob


def unproducible(row: Delayed, why: str, now: float) -> FailedJob:
    """The failure of a delayed job that Kafka will not take back (``why``: the size, or the broker's refusal)."""
    env, _ = decode(row.body)
    error = (f"the job is due but could not go back on its topic: {why}; raise the limit (the producer's "
             "message.max.bytes, the brokers' and the topic's max.message.bytes) or keep large data out of "
             "the payload, then retry it")
    return failed_record(row.job_id, row.queue, env.name if env else "<undecodable>", env.attempts if env else 0,
                         error, now, row.body)


class FailedStore:
    """``driver.failed`` of a kafka connection: the lock store's failures, retried as delayed rows.

    A retried job goes back as a delayed row due now, and ``promote`` (the
    driver's) produces it to its topic at once rather than at the next reserve.
    """

    def __init__(self, store: LeaseStore, clock: Clock, promote: Callable[[], None]) -> None:
        self._store, self._clock, self._promote = store, clock, promote

    def retry(self, id_or_all: str) -> int:
        now = self._clock.now()

        def fresh(body: bytes) -> bytes:
            env, _ = decode(body)
            if env is None:
                return body  # goes back as it was, to be failed again with its reason
            return env.replace(attempts=0, available_at=now, unique_key=None).encode()

        moved = self._store.retry_failed(id_or_all, now, fresh, new_id)
        self._promote()
        return moved

    def flush(self) -> int:
        return self._store.flush_failed()

    def count(self) -> int:
        return self._store.count_failed()

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        return self._store.list_failed(limit, where)

    def get(self, job_id: str) -> FailedJob | None:
        return self._store.get_failed(job_id)

__all__ = ["MAX_ERROR", "FailedStore", "failed_record", "unproducible"]
