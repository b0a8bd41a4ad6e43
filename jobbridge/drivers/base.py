"""The one port every driver implements: the reservation protocol, the failed store, locks.

A driver stores envelopes and hands them out under a lease. It never imports
the worker or the app, and it turns its client's exceptions into
`jobbridge.errors.DriverError` subclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jobbridge.envelope import Envelope, FailedJob, QueueCounts, Reservation


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a driver is, declared once, checked by the worker and the facade at start-up."""

    is_deferred: bool
    survives_a_restart: bool
    needs_a_worker: bool
    may_lose_an_accepted_job: bool
    delayed_push: bool
    per_message_release: bool
    priorities: bool
    transactional_push: bool
    shared_locks: bool
    blocking_reserve: bool
    #: the largest encoded envelope the store takes (None: no limit of its own); dispatch refuses a
    #: larger one with `PayloadTooLarge`, so that no caller retries a push the store can never accept
    max_message_bytes: int | None = None


@runtime_checkable
class Driver(Protocol):
    """The reservation protocol: push, reserve, acknowledge / release / fail, extend, reclaim."""

    capabilities: Capabilities

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        """Store envelopes, each available at its ``available_at``.

        ``transaction`` is a SQLAlchemy Connection or Session; only drivers whose
        capabilities say ``transactional_push`` accept it (the app defers the
        push to after the commit for the others).
        """
        ...

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        """Claim up to ``limit`` available envelopes, emptying ``queues`` in the order given.

        The attempt count of each claimed envelope is one higher than when it
        was stored. A driver with ``blocking_reserve`` may wait up to ``wait``
        seconds for work; the others return at once.
        """
        ...

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        """The jobs are done: remove them for good (one round trip where the store can)."""
        ...

    def release(self, reservation: Reservation, delay: float) -> None:
        """The attempt failed with tries left: available again after ``delay`` seconds."""
        ...

    def fail(self, reservation: Reservation, error: str) -> None:
        """Move the job to the failed store with ``error``."""
        ...

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        """Heartbeat: push each lease to now + ``seconds``; return those still held."""
        ...

    def reclaim_expired(self) -> int:
        """Make every job whose lease lapsed available again; return how many."""
        ...

    def failed_jobs(self, limit: int = 50) -> list[FailedJob]:
        """The newest failed jobs first."""
        ...

    def retry_failed(self, id_or_all: str) -> int:
        """Put one failed job (or ``"all"``) back on its queue with its attempts reset.

        Raises `NoFailedJob` for an id the store does not hold.
        """
        ...

    def flush_failed(self) -> int:
        """Delete every failed job; return how many."""
        ...

    def pending_count(self, queue: str) -> int:
        """Jobs on ``queue`` not yet acknowledged or failed: waiting, delayed or reserved."""
        ...

    def counts(self) -> list[QueueCounts]:
        """Per-queue counts for every queue the store holds jobs on."""
        ...

    def failed_count(self) -> int:
        """How many jobs the failed store holds."""
        ...

    def acquire_lock(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        """Take the unique-job lock ``key`` for ``ttl`` seconds unless someone holds it.

        A driver with ``transactional_push`` takes it inside ``transaction`` (so a
        rollback drops it); the others ignore ``transaction``.
        """
        ...

    def release_lock(self, key: str, owner: str) -> None:
        """Drop ``key`` if ``owner`` still holds it (never someone else's lock)."""
        ...

    def migrate(self) -> None:
        """Create or upgrade the store's schema (a no-op where there is none)."""
        ...

    def describe(self) -> str:
        """Where the jobs live, for `jobbridge status` and the worker's banner."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
