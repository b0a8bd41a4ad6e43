"""The lock store's side of the Kafka driver: per-message leases, delayed jobs and failed jobs.

Kafka keeps one offset per partition, not a state per message, so whatever
is per job lives in a store every worker shares and that outlives them: the
connection named by ``locks`` (a database or a redis connection). The app
opens that connection's driver and hands it to `open` as
``resources.extra["lock_store"]``; `store_for` wraps it in this package's own
`LeaseStore` (`SqlLeaseStore` on its engine, `RedisLeaseStore` on its client),
which keeps its rows apart from that driver's own jobs and apart from any
other kafka connection (every row carries the connection's *scope*).

A record per message read, keyed by its *spot* (topic, partition, offset):

- ``leased``: handed out under a token until a deadline (clock seconds), with
  the envelope as handed out, so a lapsed lease can be put back without Kafka;
- ``done``: settled (acknowledged, failed, released, parked or reclaimed).

Every state change is conditional on the token (or on the deadline having
passed), so exactly one of several racing workers wins it. A lease store
speaks the port's words: it reserves a spot, extends, acknowledges, releases
or fails a lease, and reclaims the lapsed ones.

The kafka connection's failed store (`failures.FailedStore`) and unique-job
locks (`ScopedLocks`, over the lock store driver's own locks, from `jobbridge.drivers.shared`) live
here too.

Deadlines are compared by every worker, so they are read off the store's own
clock (`server_clock`: Redis ``TIME``, the database server's clock; on SQLite,
a file on one host, that host's clock), never each worker's: a worker whose
clock is a minute ahead would otherwise see every other worker's lease lapse
a minute early and run its job again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol, cast, runtime_checkable

from jobbridge.drivers.base import FailedFilter, LockStore
from jobbridge.drivers.shared.locks import ScopedLocks, store_kind
from jobbridge.store_reports import FailedJob


class Reserved(IntEnum):
    """What a reserve found at a spot: it is now ours, someone holds it, or it is settled."""

    WON = 0
    HELD = 1
    SETTLED = 2


@dataclass(frozen=True, slots=True)
class Spot:
    """Where a message sits in Kafka."""

    topic: str
    partition: int
    offset: int

    @property
    def key(self) -> str:
        """``topic/partition/offset``: unambiguous, since a topic name has no ``/``."""
        return f"{self.topic}/{self.partition}/{self.offset}"


@dataclass(frozen=True, slots=True)
class Reserving:
    """What a reserve asks of one spot: a lease until ``at``, or (``park``) settled with a delayed row due ``at``.

    ``token`` is the lease's token, or the delayed row's id when parking.
    """

    spot: Spot
    queue: str
    token: str
    at: float
    job_id: str
    body: bytes
    park: bool = False


@dataclass(frozen=True, slots=True)
class Held:
    """A lease as its holder knows it."""

    spot: Spot
    token: str


@dataclass(frozen=True, slots=True)
class Delayed:
    """A job waiting in the store until ``due``, then produced to its queue's topic."""

    id: str
    queue: str
    due: float
    job_id: str
    body: bytes


@dataclass(frozen=True, slots=True)
class DelayedCounts:
    due: int = 0
    later: int = 0


#: turns a failed job's stored body into the body it goes back with (attempts 0, due now)
Refresh = Callable[[bytes], bytes]


@runtime_checkable
class LeaseStore(Protocol):
    """What the Kafka driver needs from its shared store. Times are the driver clock's seconds."""

    may_lose_an_accepted_job: bool

    @property
    def locks(self) -> LockStore:
        """The lock store driver's own unique-job locks (the kafka driver scopes its keys: `ScopedLocks`)."""
        ...

    def migrate(self) -> None: ...

    def describe(self) -> str: ...

    def check(self) -> None:
        """The lock store driver's start-up check (an evicting Redis drops delayed and failed jobs)."""
        ...

    def server_clock(self) -> Callable[[], float] | None:
        """How to read the store's clock (epoch seconds), or None when this host's clock is the store's."""
        ...

    # -- leases -------------------------------------------------------------------------------

    def reserve(self, spots: Sequence[Reserving]) -> list[Reserved]:
        """Insert each record unless the spot has one already; say what each found."""
        ...

    def states(self, spots: Sequence[Spot]) -> list[Reserved | None]:
        """HELD (leased), SETTLED (done) or None (no record) for each spot."""
        ...

    def extend(self, held: Sequence[Held], until: float) -> list[bool]:
        """Move each lease still held under its token to ``until``."""
        ...

    def acknowledge(self, held: Sequence[Held]) -> list[bool]:
        """Settle each lease still held under its token."""
        ...

    def release(self, held: Held, row: Delayed) -> bool:
        """Settle the lease and store ``row`` in one step, if it is still held."""
        ...

    def fail(self, held: Held, failed: FailedJob) -> bool:
        """Settle the lease and record the failure in one step, if it is still held."""
        ...

    def reclaim(self, now: float, limit: int) -> list[Spot]:
        """Settle up to ``limit`` leases whose deadline passed, each with a delayed row due ``now``."""
        ...

    def forget(self, topic: str, partition: int, below: int) -> None:
        """Drop settled records below a committed offset: no consumer reads them again."""
        ...

    # -- delayed jobs -------------------------------------------------------------------------

    def add_delayed(self, rows: Sequence[Delayed]) -> None: ...

    def take_due(self, now: float, until: float, token: str, limit: int) -> list[Delayed]:
        """Take due rows for one promoter: they are due again at ``until`` unless dropped first."""
        ...

    def drop_delayed(self, ids: Sequence[str], token: str) -> None:
        """Delete rows this promoter took (and still holds) once their messages are on Kafka."""
        ...

    def fail_delayed(self, id: str, token: str, failed: FailedJob) -> bool:
        """Move a row this promoter holds to the failed store (Kafka refused its message); False if not held."""
        ...

    # -- counts -------------------------------------------------------------------------------

    def records_from(self, topic: str, starts: Mapping[int, int]) -> int:
        """Records (any state) at or past each partition's committed offset."""
        ...

    def reserved(self) -> dict[str, int]:
        """Leases held, by queue."""
        ...

    def delayed(self, now: float) -> dict[str, DelayedCounts]:
        """Delayed rows by queue: due by ``now``, and later."""
        ...

    # -- the failed store ---------------------------------------------------------------------

    def retry_failed(self, id_or_all: str, now: float, refresh: Refresh, new_id: Callable[[], str]) -> int:
        """Turn failed jobs into delayed rows due ``now``; `NoFailedJob` for an unknown id."""
        ...

    def flush_failed(self) -> int: ...

    def count_failed(self) -> int: ...

    def list_failed(self, limit: int, where: FailedFilter | None = None) -> list[FailedJob]:
        """The newest ``limit`` failed jobs that ``where`` matches (every one when None)."""
        ...

    def get_failed(self, job_id: str) -> FailedJob | None: ...


def store_for(lock_store: object, scope: str, locks: str) -> LeaseStore:
    """The `LeaseStore` for what the app passed: a database or redis driver, or a ready `LeaseStore`."""
    if isinstance(lock_store, LeaseStore):
        return lock_store
    kind = store_kind(lock_store, "kafka", locks, "leases, delayed and failed jobs")
    if kind == "database":
        from jobbridge.drivers.kafka.sql_store import SqlLeaseStore

        return SqlLeaseStore.on(cast(Any, lock_store), scope)
    from jobbridge.drivers.kafka.redis_store import RedisLeaseStore

    return RedisLeaseStore.on(cast(Any, lock_store), scope)

__all__ = ["Delayed", "DelayedCounts", "Held", "LeaseStore", "Refresh", "Reserved", "Reserving", "ScopedLocks",
           "Spot", "store_for"]
