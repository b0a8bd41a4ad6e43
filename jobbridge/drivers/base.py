"""The port every driver implements, split by client: the reservation protocol, the failed store, locks.

A driver stores envelopes and hands them out under a lease. It never imports
the worker or the app, and it turns its client's exceptions into
`jobbridge.errors.DriverError` subclasses.

Three clients use a driver, each through the part it needs, so that none
depends on operations it never calls (and a driver author sees which part is
which):

- the worker: `Driver`, the reservation protocol and the life cycle;
- the app: `Driver.push` and ``driver.locks`` (a `LockStore`) for unique jobs;
- the CLI and the dashboard: ``driver.failed`` (a `FailedStore`), `Driver.counts` and `Driver.purge`.

A driver whose store holds no failed jobs or locks of its own (Kafka) is given
them by a shared store; one that can hold no lock at all (SQS) says so with
``locks.shared``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jobbridge.envelope import Envelope, Reservation
from jobbridge.store_reports import FailedJob, QueueCounts


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
    blocking_reserve: bool
    #: the largest encoded envelope the store takes (None: no limit of its own); dispatch refuses a
    #: larger one with `PayloadTooLarge`, so that no caller retries a push the store can never accept
    max_message_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class FailedFilter:
    """Which failed jobs a listing asks for; a ``None`` field matches every job.

    A store applies what it can in its own query (the database driver with an
    index per filter), so that a filtered listing of a large failed store stays
    fast; `matches` is the same test for a store that must look at each job.
    """

    queue: str | None = None
    name: str | None = None
    #: failed at or after this moment (epoch seconds)
    since: float | None = None
    #: failed at or before this moment (epoch seconds): a time range's end, and the dashboard's page cursor
    until: float | None = None
    #: the error text contains this, ignoring case (a scan of the rows the other filters leave)
    error: str | None = None

    def matches(self, job: FailedJob) -> bool:
        return ((self.queue is None or job.queue == self.queue) and (self.name is None or job.name == self.name)
                and (self.since is None or job.failed_at >= self.since)
                and (self.until is None or job.failed_at <= self.until)
                and (self.error is None or self.error.casefold() in job.error.casefold()))


@runtime_checkable
class FailedStore(Protocol):
    """Where `Driver.fail` puts a job: what an operator lists, retries and flushes after an incident."""

    def retry(self, id_or_all: str) -> int:
        """Put one failed job (or ``"all"``) back on its queue with its attempts reset; return how many.

        Raises `NoFailedJob` for an id the store does not hold, so that a mistyped
        id is an error rather than a silent nothing.
        """
        ...

    def flush(self) -> int:
        """Delete every failed job; return how many."""
        ...

    def count(self) -> int:
        """How many jobs the failed store holds."""
        ...

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> builtins.list[FailedJob]:
        """The newest failed jobs first, at most ``limit``, of those ``where`` matches (every one when None)."""
        ...

    def get(self, job_id: str) -> FailedJob | None:
        """One failed job by id, with its whole error and body; None when the store does not hold it."""
        ...


@runtime_checkable
class ForgettingFailedStore(Protocol):
    """A failed store that can also delete chosen jobs (the dashboard's Delete); not every store can.

    ``flush`` deletes them all on every store; a store whose failed jobs sit in a
    queue it can only read in order (SQS) has no way to delete one, and the
    dashboard offers no Delete there.
    """

    def forget(self, job_ids: Sequence[str]) -> int:
        """Delete these failed jobs (an id the store does not hold is skipped); return how many."""
        ...


@runtime_checkable
class LockStore(Protocol):
    """Unique-job locks: the app takes one per unique key at dispatch, the worker drops it when the job ends.

    ``shared`` says whether a lock is seen by every process that can reserve the
    queue's jobs. When it is false (SQS has no lock) the app dispatches unique
    jobs without deduplication, with a warning, rather than trust a lock that
    only this process would see.
    """

    shared: bool

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        """Take ``key`` for ``ttl`` seconds unless someone holds it; False when someone does.

        A driver with ``transactional_push`` takes it inside ``transaction`` (so a
        rollback drops it with the job); the others ignore ``transaction``.
        """
        ...

    def release(self, key: str, owner: str) -> None:
        """Drop ``key`` if ``owner`` still holds it (never someone else's lock)."""
        ...


@runtime_checkable
class Driver(Protocol):
    """The reservation protocol (push, reserve, acknowledge / release / fail, extend, reclaim) and life cycle."""

    capabilities: Capabilities

    # read-only members, so that a driver's own store classes satisfy them (a plain attribute would
    # have to be typed exactly `FailedStore`)
    @property
    def failed(self) -> FailedStore:
        """The failed store `fail` moves jobs to."""
        ...

    @property
    def locks(self) -> LockStore:
        """The unique-job locks."""
        ...

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        """Store envelopes, each available at its ``available_at``.

        ``transaction`` is a SQLAlchemy Connection or Session; only drivers whose
        capabilities say ``transactional_push`` accept it (the app defers the
        push to after the commit for the others).
        """
        ...

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        """Reserve up to ``limit`` available envelopes, emptying ``queues`` in the order given.

        The attempt count of each reserved envelope is one higher than when it
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

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """The job was not started: available again after ``delay`` seconds, as if never reserved.

        Its attempt count goes back to what it was before this reservation, so that
        a job that waited (its rate limit had no turn for it, jobbridge.rate_gate)
        never spends a try on it. A stale receipt (the lease lapsed and the job was
        reclaimed, or it was settled) changes nothing.
        """
        ...

    def fail(self, reservation: Reservation, error: str) -> None:
        """Move the job to the failed store (``failed``) with ``error``."""
        ...

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        """Heartbeat: push each lease to now + ``seconds``; return those still held."""
        ...

    def reclaim_expired(self) -> int:
        """Make every job whose lease lapsed available again; return how many."""
        ...

    def counts(self) -> list[QueueCounts]:
        """Per-queue counts for every queue the store holds jobs on (a queue's ``pending`` among them)."""
        ...

    def purge(self, queues: Sequence[str]) -> int:
        """Delete the jobs waiting on ``queues`` (ready or delayed), never a reserved one; return how many.

        What an operator reaches for in an incident (``jobbridge purge``): a
        running job is left to finish or fail, since deleting it under its
        worker would not stop it. A purged unique job's lock is released with
        it where the store can, so the same job can be dispatched again at once.
        A store that cannot tell waiting jobs from reserved ones purges what it
        can tell apart and says so in its docstring, or raises `StoreRefused`
        with the reason, even for an empty ``queues`` (so a caller learns it
        before it asks anyone to confirm).
        """
        ...

    def migrate(self) -> None:
        """Create or upgrade the store's schema (a no-op where there is none)."""
        ...

    def describe(self) -> str:
        """Where the jobs live, for `jobbridge status` and the worker's banner."""
        ...

    def check(self) -> None:
        """Verify at a worker's start what the store must be for the guarantees to hold.

        Redis's eviction policy, a server's packet size: whatever would lose or
        refuse jobs later, warned about (or refused with `ConfigurationError`)
        before the first job is reserved. A no-op where there is nothing to check.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True, slots=True)
class JobLimits:
    """What a worker is about to run, as a driver with a broker-side limit needs to see it: a job type's
    name and the longest one attempt may run (None: no limit, a Celery task's default)."""

    name: str
    timeout: float | None


@runtime_checkable
class ReadsCancellations(Protocol):
    """Optional beside `Driver`: look up a result store's cancellations in the reserve's own round trip.

    A worker asks its result store which jobs of every reserved batch were
    cancelled before it starts any of them: a round trip per batch of its own.
    A driver whose store can read the result store's cancelled set in the same
    call (the Redis driver, when the result store is on the same server and
    database) says so in `read_cancellations`; every reservation it hands out
    from then on has ``cancelled`` set when the job was cancelled at the moment
    it was reserved, and the worker skips its own lookup. Running jobs asked
    to be stopped are still found at the heartbeat, as ever.
    """

    def read_cancellations(self, store: object) -> bool:
        """Look ``store``'s cancellations up in every reserve from now on, if this driver can (True); else False."""
        ...


@runtime_checkable
class JobChecking(Protocol):
    """Optional beside `Driver`: a store that cuts off a job held too long checks the job types at start.

    RabbitMQ closes the channel of a delivery held longer than its
    ``consumer_timeout``, taking every job on it: a worker whose jobs may run
    longer would see them run twice. The worker calls `check_jobs` once, after
    `Driver.check`, on a driver that implements it (``isinstance(driver,
    JobChecking)``).
    """

    def check_jobs(self, jobs: Sequence[JobLimits]) -> list[str]:
        """Refuse (`ConfigurationError`, saying what to configure) a job whose timeout the store would cut
        short; return one warning line per job the store *may* cut short (one without a timeout)."""
        ...


@runtime_checkable
class AcknowledgingReserve(Protocol):
    """Optional beside `Driver`: acknowledge finished jobs and reserve the next ones in one transaction.

    On a store where every transaction waits for its commit to reach the disk
    (the database driver: SQLite with ``synchronous=FULL``, PostgreSQL, MariaDB),
    a batch's acknowledgement and the claim of the next batch as two transactions
    cost two waits. When the worker has acknowledgements to store *and* room to
    reserve at the same moment, it calls `acknowledge_and_reserve` on a driver
    that implements it (``isinstance(driver, AcknowledgingReserve)``); with no
    room it acknowledges alone, as ever, so that no acknowledgement waits for a
    reserve. Either both halves are stored or neither is: a worker killed
    meanwhile leaves its jobs reserved under their old receipts, and they come
    back when their leases lapse, as after any crash before an acknowledgement.

    ``meanwhile`` is how the call overlaps the worker's attempts. The attempt
    threads and the loop share one interpreter lock, so a loop that waits for
    the store with nothing handed to the threads leaves them idle for the
    store's whole turn (`jobbridge.worker_window`): the worker holds back the
    batch its last call returned and passes ``meanwhile``, which starts it. A
    driver calls it at most once, as late as it can before it waits for the
    store without the lock: once the request is written (Redis), just before
    the first statement goes out (the database driver).
    """

    def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        """`Driver.acknowledge` of ``reservations`` (possibly none) then `Driver.reserve` of up to ``limit``
        (never waiting), committed together; raises as either would, having stored nothing. ``meanwhile``:
        see the class; a call that fails may have called it or not, and the caller finishes its part."""
        ...

