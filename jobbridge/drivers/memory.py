"""The memory driver: the reservation protocol inside this process.

URL: ``memory://``. Storage: a heap of ready jobs per queue, a table of
reservations, a failed store (`MemoryFailedStore`) and a lock table
(`MemoryLocks`), all guarded by one condition variable. Settings: ``reservation`` (seconds). Jobs are gone when the
process exits, and a worker in another process sees none of them: it is for
tests and single-process development.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.base import Capabilities, FailedFilter
from jobbridge.drivers.memory_ages import MemoryAges
from jobbridge.drivers.memory_schedules import MemorySchedules
from jobbridge.drivers.memory_throughput import MemoryThroughput
from jobbridge.drivers.memory_workers import MemoryWorkers
from jobbridge.envelope import Envelope, Reservation, new_id
from jobbridge.errors import NoFailedJob, PayloadDecodeError
from jobbridge.rate_limits import LocalBuckets
from jobbridge.setting_schema import RESERVATION, DriverSchema
from jobbridge.store_reports import FailedJob, QueueCounts

if TYPE_CHECKING:
    from jobbridge.drivers import Resources

#: its settings (`jobbridge.setting_schema`): the reservation alone
SCHEMA = DriverSchema(fields={"reservation": RESERVATION})
SETTINGS, REFUSED = SCHEMA.keys, SCHEMA.refused

CAPABILITIES = Capabilities(
    is_deferred=True,
    survives_a_restart=False,
    needs_a_worker=True,
    may_lose_an_accepted_job=False,
    delayed_push=True,
    per_message_release=True,
    priorities=True,
    transactional_push=False,
    blocking_reserve=True,
)


@dataclass(slots=True)
class _Row:
    envelope: Envelope
    available_at: float
    version: int = 0
    token: str | None = None
    reserved_until: float = 0.0


class MemoryDriver:
    """Jobs in a dict, ready ones in a per-queue heap ordered by availability."""

    capabilities = CAPABILITIES

    def __init__(self, *, reservation: float = 60.0, clock: Clock = SYSTEM_CLOCK) -> None:
        self.reservation = reservation
        self.clock = clock
        self._cond = threading.Condition()
        self._rows: dict[str, _Row] = {}
        self._ready: dict[str, list[tuple[float, int, str, int]]] = {}
        self._seq = 0
        self.failed = MemoryFailedStore(self._cond, clock, self._put_back)
        self.locks = MemoryLocks(self._cond, clock)
        self.rate_buckets = LocalBuckets(clock.now, shared=True)  # one process: shared by all it runs
        self.schedules = MemorySchedules(self)
        self.workers = MemoryWorkers(clock)
        self.throughput = MemoryThroughput(clock)
        self.ages = MemoryAges(self)

    def _enqueue(self, row: _Row, available_at: float) -> None:
        # A heap entry is valid only while its version matches the row's, so a
        # released or reclaimed job never leaves a stale duplicate behind.
        row.version += 1
        row.token = None
        row.available_at = available_at
        self._seq += 1
        heap = self._ready.setdefault(row.envelope.queue, [])
        heapq.heappush(heap, (available_at, self._seq, row.envelope.id, row.version))

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        if transaction is not None:
            raise TypeError("the memory driver cannot join a transaction; the app pushes after commit")
        with self._cond:
            for env in envelopes:
                row = _Row(env, env.available_at)
                self._rows[env.id] = row
                self._enqueue(row, env.available_at)
            self._cond.notify_all()

    def _put_back(self, env: Envelope, available_at: float) -> None:
        """A retried failed job, stored again (the caller holds the condition and notifies)."""
        row = _Row(env, available_at)
        self._rows[env.id] = row
        self._enqueue(row, available_at)

    def _reserve_now(self, queues: Sequence[str], limit: int) -> list[Reservation]:
        now = self.clock.now()
        out: list[Reservation] = []
        for queue in queues:
            heap = self._ready.get(queue)
            while heap and len(out) < limit and heap[0][0] <= now:
                _, _, job_id, version = heapq.heappop(heap)
                row = self._rows.get(job_id)
                if row is None or row.version != version:
                    continue
                row.envelope = row.envelope.replace(attempts=row.envelope.attempts + 1)
                row.token = new_id()
                row.reserved_until = now + self.reservation
                out.append(Reservation(row.envelope, (job_id, row.token), row.reserved_until))
            if len(out) >= limit:
                break
        return out

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        with self._cond:
            out = self._reserve_now(queues, limit)
            if not out and wait > 0:
                self._cond.wait(wait)
                out = self._reserve_now(queues, limit)
            return out

    def _held(self, reservation: Reservation) -> _Row | None:
        job_id, token = reservation.receipt
        row = self._rows.get(job_id)
        return row if row is not None and row.token == token else None

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        with self._cond:
            for res in reservations:
                if self._held(res) is not None:
                    del self._rows[res.id]

    def release(self, reservation: Reservation, delay: float) -> None:
        with self._cond:
            row = self._held(reservation)
            if row is not None:
                self._enqueue(row, self.clock.now() + delay)
                self._cond.notify_all()

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        with self._cond:
            row = self._held(reservation)
            if row is not None:
                row.envelope = row.envelope.replace(attempts=max(0, row.envelope.attempts - 1))
                self._enqueue(row, self.clock.now() + max(delay, 0.0))
                self._cond.notify_all()

    def fail(self, reservation: Reservation, error: str) -> None:
        with self._cond:
            row = self._held(reservation)
            if row is None:
                return
            del self._rows[reservation.id]
            env = reservation.envelope  # a stand-in, when the stored body did not decode
            self.failed.jobs[env.id] = FailedJob(
                env.id, env.queue, env.name, env.attempts, error, self.clock.now(),
                reservation.stored_body(),
            )

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        kept: list[Reservation] = []
        with self._cond:
            until = self.clock.now() + seconds
            for res in reservations:
                row = self._held(res)
                if row is not None:
                    row.reserved_until = until
                    kept.append(Reservation(res.envelope, res.receipt, until, res.body, res.decode_error))
        return kept

    def reclaim_expired(self) -> int:
        with self._cond:
            now = self.clock.now()
            lapsed = [r for r in self._rows.values() if r.token is not None and r.reserved_until <= now]
            for row in lapsed:
                self._enqueue(row, now)
            if lapsed:
                self._cond.notify_all()
            return len(lapsed)

    def counts(self) -> list[QueueCounts]:
        with self._cond:
            now = self.clock.now()
            tally: dict[str, list[int]] = {}
            for row in self._rows.values():
                slot = tally.setdefault(row.envelope.queue, [0, 0, 0])
                if row.token is not None:
                    slot[2] += 1
                elif row.available_at > now:
                    slot[1] += 1
                else:
                    slot[0] += 1
            return [QueueCounts(q, *c) for q, c in sorted(tally.items())]

    def purge(self, queues: Sequence[str]) -> int:
        """Drop the unreserved rows of ``queues`` (their heap entries go stale) and their unique locks."""
        names = set(queues)
        with self._cond:
            waiting = [job_id for job_id, row in self._rows.items()
                       if row.token is None and row.envelope.queue in names]
            for job_id in waiting:
                del self._rows[job_id]
            self.locks.release_owners(set(waiting))
            return len(waiting)

    def migrate(self) -> None:
        """Nothing to create."""

    def describe(self) -> str:
        return "memory (this process only)"

    def check(self) -> None:
        """Nothing to check."""

    def close(self) -> None:
        """Nothing to release."""


class MemoryFailedStore:
    """Failed jobs by id, under the driver's condition; a retry stores the job again through ``put_back``."""

    def __init__(self, cond: threading.Condition, clock: Clock,
                 put_back: Callable[[Envelope, float], None]) -> None:
        self._cond, self._clock, self._put_back = cond, clock, put_back
        self.jobs: dict[str, FailedJob] = {}

    def retry(self, id_or_all: str) -> int:
        with self._cond:
            ids = list(self.jobs) if id_or_all == "all" else [id_or_all]
            if id_or_all != "all" and id_or_all not in self.jobs:
                raise NoFailedJob(f"there is no failed job with id {id_or_all}")
            now = self._clock.now()
            retried = 0
            for job_id in ids:
                try:
                    env = Envelope.decode(self.jobs[job_id].body)
                except PayloadDecodeError:
                    continue  # a body that never was a job: it would only be failed again
                del self.jobs[job_id]
                self._put_back(env.replace(attempts=0, available_at=now, unique_key=None), now)
                retried += 1
            self._cond.notify_all()
            return retried

    def flush(self) -> int:
        with self._cond:
            count = len(self.jobs)
            self.jobs.clear()
            return count

    def forget(self, job_ids: Sequence[str]) -> int:
        with self._cond:
            return sum(self.jobs.pop(job_id, None) is not None for job_id in job_ids)

    def count(self) -> int:
        with self._cond:
            return len(self.jobs)

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        where = where or FailedFilter()
        with self._cond:
            found = [job for job in self.jobs.values() if where.matches(job)]
        return sorted(found, key=lambda f: f.failed_at, reverse=True)[:limit]

    def get(self, job_id: str) -> FailedJob | None:
        with self._cond:
            return self.jobs.get(job_id)


class MemoryLocks:
    """Locks by key, ``(owner, expires_at)``: shared by everything that can see this queue, this process."""

    shared = True

    def __init__(self, cond: threading.Condition, clock: Clock) -> None:
        self._cond, self._clock = cond, clock
        self._held: dict[str, tuple[str, float]] = {}

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        with self._cond:
            now = self._clock.now()
            held = self._held.get(key)
            if held is not None and held[1] > now:
                return False
            self._held[key] = (owner, now + ttl)
            return True

    def release(self, key: str, owner: str) -> None:
        with self._cond:
            held = self._held.get(key)
            if held is not None and held[0] == owner:
                del self._held[key]

    def release_owners(self, owners: set[str]) -> None:
        """Drop every lock held by one of ``owners`` (job ids): the jobs a purge deleted."""
        with self._cond:
            for key in [key for key, (owner, _) in self._held.items() if owner in owners]:
                del self._held[key]


def open(settings: Mapping[str, Any], resources: Resources) -> MemoryDriver:
    """Build a memory driver from validated connection settings."""
    return MemoryDriver(reservation=float(settings.get("reservation", 60)), clock=resources.clock)
