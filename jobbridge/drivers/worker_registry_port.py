"""The live-worker registry: each worker process's heartbeat, kept in the store its jobs are in.

Every ``jobbridge worker`` process writes one record about itself every few
seconds (`BEAT_EVERY`): who it is (host, pid, name), what it works (queues,
concurrency, connection), since when, how many jobs it runs now and how many
it has processed and failed. One write per process per beat, never one per
job, so the registry costs the store nothing it would notice. A record whose
beat is older than `STALE_AFTER` belongs to a worker that stopped beating
(killed, hung, cut off from the store): ``jobbridge workers`` marks it stale
and ``jobbridge ping`` does not count it. Records older than `PRUNE_AFTER` are
deleted by any worker's beat, so a fleet that was scaled down does not leave
its dead behind for ever. A worker that stops cleanly deletes its own record.

A driver offers its registry as ``driver.workers`` (database: the table
``jobbridge_workers``; redis: a hash and a sorted set of beats; memory: a dict
in the process). Kafka and AMQP keep it in the store their ``locks``
connection names; SQS has nowhere to keep one (`worker_registry_of` returns
None, and the commands say so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

#: seconds between two beats of one worker process
BEAT_EVERY = 5.0
#: a record whose last beat is older than this is stale: its worker stopped beating
STALE_AFTER = 3 * BEAT_EVERY
#: a record older than this is deleted by the next beat of any worker on the store
PRUNE_AFTER = 600.0


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """One worker process as its last beat described it; times are the store's clock (epoch seconds)."""

    id: str
    name: str
    host: str
    pid: int
    connection: str
    queues: tuple[str, ...]
    concurrency: int
    started_at: float
    last_beat: float
    running: int = 0
    processed: int = 0
    failed: int = 0

    def encode(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self))

    @classmethod
    def decode(cls, body: bytes | str) -> WorkerBeat | None:
        """A stored record, or None for one this release cannot read (skipped, never raised)."""
        try:
            data: Mapping[str, Any] = orjson.loads(body)
            fields = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
            fields["queues"] = tuple(str(q) for q in fields.get("queues", ()))
            return cls(**fields)
        except (orjson.JSONDecodeError, TypeError, KeyError, ValueError):
            return None

    def is_live(self, now: float) -> bool:
        return now - self.last_beat <= STALE_AFTER


@runtime_checkable
class WorkerRegistry(Protocol):
    """Heartbeats of the worker processes on one store."""

    def now(self) -> float:
        """The store's clock: every beat and every judgement of staleness reads it."""
        ...

    def beat(self, worker: WorkerBeat) -> None:
        """Write (insert or replace) this worker's record: one round trip."""
        ...

    def forget(self, worker_id: str) -> None:
        """Delete this worker's record (a clean stop)."""
        ...

    def list(self) -> list[WorkerBeat]:
        """Every record, newest beat first, stale ones included."""
        ...

    def prune(self, before: float) -> int:
        """Delete the records whose last beat is before ``before``; how many."""
        ...


def worker_registry_of(driver: object) -> WorkerRegistry | None:
    """The driver's worker registry, or None when its store keeps none."""
    found = getattr(driver, "workers", None)
    return found if isinstance(found, WorkerRegistry) else None


def live(workers: Sequence[WorkerBeat], now: float) -> list[WorkerBeat]:
    return [worker for worker in workers if worker.is_live(now)]
