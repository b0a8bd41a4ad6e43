"""`JobBridge`: settings -> connections -> the dispatch API.

One app holds the job registry, the container, the clock and one driver per
declared connection, each built from its own declaration and opened on first use.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from jobbridge import drivers, payload, signals, telemetry_hooks
from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.container import Container
from jobbridge.drivers.base import Driver
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError, PayloadTooLarge
from jobbridge.execution import Executor, Middleware
from jobbridge.expiry import Expires, expires_at
from jobbridge.job import options_of
from jobbridge.outcome import WorkStats
from jobbridge.registry import JobRegistry
from jobbridge.results.base import ResultRecord, ResultStore
from jobbridge.settings import Settings
from jobbridge.tracking import ResultTracker
from jobbridge.worker_process import worked_queues

if TYPE_CHECKING:  # imported when the schedules are first used: a worker without --schedule never needs them
    from jobbridge.scheduling.book import Schedules
    from jobbridge.scheduling.entries import CatchUp, EnvelopeFactory

log = logging.getLogger("jobbridge.dispatch")
Delay = float | int | timedelta


class JobBridge:
    """The application's queue: register jobs, dispatch them, run them."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        jobs: Iterable[type] = (),
        clock: Clock = SYSTEM_CLOCK,
        container: Container | None = None,
        middleware: Sequence[Middleware] = (),
        drivers: Mapping[str, Driver] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.load()
        self.registry = JobRegistry()
        self.clock = clock
        self.container = container or Container()
        self.middleware = tuple(middleware)
        self._drivers: dict[str, Driver] = dict(drivers or {})
        self._executors: dict[str, Executor] = {}
        self._tracker: ResultTracker | None = None
        self._tracker_opened = False
        self._lock = threading.RLock()
        self._warned_locks: set[str] = set()
        self._schedules: Schedules | None = None
        self.register(*jobs)

    @classmethod
    def from_env(cls, **kwargs: Any) -> JobBridge:
        """Settings from a jobbridge.toml / pyproject.toml in the working directory, then JOBBRIDGE_* vars."""
        return cls(Settings.load(), **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> JobBridge:
        return cls(Settings.from_file(path), **kwargs)

    def register(self, *classes: type) -> None:
        """Make job classes dispatchable and runnable; two classes under one name is an error."""
        self.registry.register(*classes)

    @property
    def schedules(self) -> Schedules:
        """The schedule entries, from code (`schedule`) and from the settings' schedules section."""
        with self._lock:
            if self._schedules is None:
                from jobbridge.scheduling.book import Schedules

                self._schedules = Schedules(self)
            return self._schedules

    @schedules.setter
    def schedules(self, schedules: Schedules) -> None:
        with self._lock:
            self._schedules = schedules

    # -- connections -------------------------------------------------------------------------

    def driver(self, connection: str | None = None, *, create: bool = True) -> Driver:
        """The driver of a declared connection (the default one when ``None``), opened once.

        ``create=False`` opens only a store that exists (`drivers.Resources.create`): the
        commands that read or repair a store must never make an empty one in its place.
        """
        conn = self.settings.connection(connection)
        with self._lock:
            found = self._drivers.get(conn.name)
            if found is None:
                module = drivers.load(conn.driver)
                extra: dict[str, Any] = {}
                if conn.options.get("locks"):
                    # kafka keeps leases, delayed and failed jobs in another connection's store
                    extra["lock_store"] = self.driver(str(conn.options["locks"]), create=create)
                resources = drivers.Resources(clock=self.clock, run_inline=self._inline_runner(conn.name),
                                              extra=extra, create=create)
                found = self._drivers[conn.name] = module.open(conn.options, resources)
            return found

    def executor(self, connection: str | None = None) -> Executor:
        name = self.settings.connection(connection).name
        with self._lock:
            found = self._executors.get(name)
            if found is None:
                found = self._executors[name] = Executor(
                    self.registry, self.container, connection=name, middleware=self.middleware,
                    tracker=self.tracker, clock=self.clock,
                )
            return found

    # -- results and cancellation --------------------------------------------------------------

    @property
    def tracker(self) -> ResultTracker | None:
        """The result store's writer, or None when the settings name no store (see ``results``)."""
        with self._lock:
            if not self._tracker_opened:
                where = self.settings.results_store()
                if where is not None:
                    from jobbridge.results import open_store

                    url, options = where
                    store = open_store(url, clock=self.clock, **options)
                    self._tracker = ResultTracker(store, self.settings.result_ttl)
                self._tracker_opened = True
            return self._tracker

    @property
    def results(self) -> ResultStore | None:
        """The result store (results, cancellations, chord counters), or None when there is none."""
        tracker = self.tracker
        return None if tracker is None else tracker.store

    def _results_tracker(self) -> ResultTracker:
        tracker = self.tracker
        if tracker is None:
            raise ConfigurationError(
                f"no result store: the default connection's {self.settings.connection().driver} driver keeps "
                "no results; set results = a store URL (sqlite:///..., postgresql://..., redis://...) "
                "or the name of a database or redis connection"
            )
        return tracker

    def result(self, job_id: str) -> ResultRecord | None:
        """What the store holds for ``job_id``: its state, return value or error (None when unknown)."""
        return self._results_tracker().store.get(job_id)

    def wait(self, job_id: str, timeout: float) -> ResultRecord | None:
        """Block until ``job_id`` is over (SUCCESS, FAILURE, REVOKED) or ``timeout`` seconds pass."""
        return self._results_tracker().store.wait(job_id, timeout)

    def forget(self, job_id: str) -> None:
        """Drop what the store holds for ``job_id``."""
        self._results_tracker().store.forget(job_id)

    def store_state(self, job_id: str, state: str, *, meta: Mapping[str, Any] | None = None,
                    name: str | None = None) -> None:
        """Record a state from inside a running job (progress, custom states), visible to pollers at once."""
        self._results_tracker().write(job_id, state, name=name, meta=dict(meta) if meta is not None else None)

    def cancel(self, job_ids: str | Sequence[str], *, terminate: bool = False) -> None:
        """Cancel jobs, durably: one that has not started never runs, on any worker, even one offline now.

        A running one goes on unless ``terminate``: then it is stopped as a timeout would stop it.
        Either way it ends REVOKED and is not retried. Cancellations are kept for ``result_ttl``.
        """
        ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        self._results_tracker().cancel(ids, terminate)

    def _inline_runner(self, connection: str) -> Any:
        return lambda env: self.executor(connection).run_inline(env)

    # -- dispatching -------------------------------------------------------------------------

    def envelope(self, job: Any, *, queue: str | None = None, delay: Delay | None = None,
                 at: datetime | None = None, tries: int | None = None,
                 headers: Mapping[str, Any] | None = None, expires: Expires | None = None) -> Envelope:
        """The wire message for ``job``; the payload is encoded here, so a bad field fails now."""
        cls = type(job)
        name = self.registry.name_of(cls)
        opts = options_of(cls)
        now = self.clock.now()
        unique = job.unique_id()
        if tries is not None and tries < 1:
            raise ValueError(f"tries must be at least 1, got {tries}")
        return Envelope.new(
            name, queue or opts.queue, payload.encode(job), tries=tries or opts.tries, timeout=opts.timeout,
            now=now, available_at=_available_at(now, delay, at),
            unique_key=None if unique is None else f"{name}:{unique}",
            unique_for=None if unique is None else opts.unique_for, headers=headers,
            expires_at=expires_at(now, expires),
        )

    def dispatch(self, job: Any, *, queue: str | None = None, delay: Delay | None = None,
                 at: datetime | None = None, tries: int | None = None, connection: str | None = None,
                 transaction: object | None = None, headers: Mapping[str, Any] | None = None,
                 expires: Expires | None = None) -> str | None:
        """Queue one job; its id, or ``None`` when a unique duplicate was dropped.

        ``expires`` (seconds from now, a timedelta, or a datetime): a job no worker has started
        by then is acknowledged unrun and reported expired (`jobbridge.expiry`).
        """
        env = self.envelope(job, queue=queue, delay=delay, at=at, tries=tries, headers=headers, expires=expires)
        return self.push([env], connection=connection, transaction=transaction)[0]

    def dispatch_many(self, jobs: Iterable[Any], *, queue: str | None = None, delay: Delay | None = None,
                      at: datetime | None = None, tries: int | None = None, connection: str | None = None,
                      transaction: object | None = None, expires: Expires | None = None) -> list[str | None]:
        """Queue many jobs in one round trip where the driver can; ids in order (``None`` for dropped)."""
        envs = [self.envelope(j, queue=queue, delay=delay, at=at, tries=tries, expires=expires) for j in jobs]
        return self.push(envs, connection=connection, transaction=transaction)

    def schedule(self, name: str, job: Any = None, *, every: float | timedelta | None = None,
                 cron: Any = None, tz: str | None = None, queue: str | None = None, tries: int | None = None,
                 expires: float | timedelta | str | None = None, catch_up: CatchUp = "latest",
                 connection: str | None = None, fields: Mapping[str, Any] | None = None,
                 headers: Mapping[str, Any] | None = None, envelope: EnvelopeFactory | None = None) -> None:
        """Dispatch ``job`` periodically: every ``every`` seconds on a grid from the epoch, or on ``cron``.

        ``name`` is the entry's key in the store and must never change. ``job`` is a job
        instance, or a job class with its ``fields``; ``envelope`` a function of the tick
        instead. ``tz`` (else the ``timezone`` setting, else UTC) is the zone ``cron`` is read
        in; ``expires`` (seconds after the tick, or ``"next"``) drops a tick's job no worker
        started in time; ``catch_up`` says what fires after every scheduler was down
        (``"latest"``, ``"none"``, ``"all"``). docs/schedules.md is the manual.
        """
        self.schedules.add(name, job, every=every, cron=cron, tz=tz, queue=queue, tries=tries, expires=expires,
                           catch_up=catch_up, connection=connection, fields=fields, headers=headers,
                           envelope=envelope)

    async def adispatch(self, job: Any, **options: Any) -> str | None:
        """`dispatch` for async callers: the same path, run off the event loop."""
        return await asyncio.to_thread(self.dispatch, job, **options)

    def dispatch_now(self, job: Any) -> None:
        """Run ``job`` in this process now, with its tries, and no queue; the last error is raised."""
        self.executor().run_inline(self.envelope(job).checked())

    def push(self, envelopes: Sequence[Envelope], *, connection: str | None = None,
             transaction: object | None = None) -> list[str | None]:
        """Store built envelopes (unique locks taken first); what `dispatch` ends with.

        Every envelope is first held to the ranges a stored one must meet
        (`Envelope.checked`: a timeout above 30 days is clamped, any other value
        out of range is a `ValueError`) and to the driver's message size limit
        (`PayloadTooLarge`), so that the store is never handed what it, or a
        worker reading it, would refuse. Telemetry's push hooks (`jobbridge.telemetry_hooks`), when
        some were added, run around all of it.
        """
        if telemetry_hooks.PUSH_HOOKS and not telemetry_hooks.pushing():
            return telemetry_hooks.around_push(self, envelopes, connection, transaction)
        conn = self.settings.connection(connection).name
        driver = self.driver(conn)
        envelopes = [self._fit(env.checked(), driver, conn) for env in envelopes]
        if transaction is not None:  # Django's connection or alias too; None outside its atomic block
            transaction = transactions().adapt(transaction)
        joins = transaction is not None and driver.capabilities.transactional_push
        kept = [env for env in envelopes if self._lock_unique(driver, conn, env, transaction if joins else None)]
        if transaction is not None and not joins:
            for env in kept:
                if env.unique_key is not None:
                    transactions().on_rollback(
                        transaction, functools.partial(driver.locks.release, env.unique_key, env.id))
        if kept:
            self._store(driver, conn, kept, transaction)
        ids = {env.id for env in kept}
        return [env.id if env.id in ids else None for env in envelopes]

    def _fit(self, env: Envelope, driver: Driver, connection: str) -> Envelope:
        """``env`` if its encoded size is within the driver's limit; `PayloadTooLarge` if not."""
        limit = driver.capabilities.max_message_bytes
        if limit is None:
            return env
        size = len(env.encode())
        if size > limit:
            kind = self.settings.connection(connection).driver
            raise PayloadTooLarge(
                f"job {env.id} ({env.name!r}) is {size} bytes encoded; the {kind} driver of connection "
                f"{connection!r} takes at most {limit}: store the data elsewhere (a database row, an object "
                "store) and put its id or URL in the payload")
        return env

    def _lock_unique(self, driver: Driver, connection: str, env: Envelope, transaction: object | None) -> bool:
        if env.unique_key is None:
            return True
        if not driver.locks.shared:
            if connection not in self._warned_locks:
                self._warned_locks.add(connection)
                log.warning("connection %r has no shared lock store: unique jobs are dispatched "
                            "without deduplication", connection)
            return True
        return driver.locks.acquire(env.unique_key, env.id, env.unique_for or 3600.0, transaction=transaction)

    def _store(self, driver: Driver, connection: str, envs: list[Envelope], transaction: object | None) -> None:
        def announce() -> None:
            if not signals.job_dispatched.receivers:  # no receiver: no class looked up per job
                return
            for env in envs:
                signals.send(signals.job_dispatched, self._class_of(env), id=env.id, envelope=env,
                             connection=connection)

        if transaction is None:
            driver.push(envs)
            announce()
        elif driver.capabilities.transactional_push:
            driver.push(envs, transaction=transaction)
            announce()
        else:
            def later() -> None:
                driver.push(envs)
                announce()

            transactions().defer_until_commit(transaction, later, lambda: None)

    def _class_of(self, env: Envelope) -> type | None:
        return self.registry.get(env.name) if env.name in self.registry else None

    # -- running here ------------------------------------------------------------------------

    def run_pending(self, queues: Sequence[str] | None = None, connection: str | None = None) -> WorkStats:
        """Run every job available now, one at a time, in this thread (tests, scripts).

        ``queues`` defaults to what ``jobbridge worker`` works without ``-Q``: the
        ``queues`` setting, else the queues the registered jobs name (`worked_queues`).

        Delayed jobs, and jobs released with a backoff, stay queued until they are due:
        move a `FixedClock` on to make them due. A job released with no delay is due
        at once, so it runs again within the same call.
        """
        driver, executor = self.driver(connection), self.executor(connection)
        stats = WorkStats()
        names = list(worked_queues(self, queues or ())[0])
        while got := driver.reserve(names, 1):
            executor.refresh_cancellations([got[0].id])
            outcome = executor.run(got[0])
            Executor.settle(driver, [outcome])
            stats.add(outcome)
        return stats

    def close(self) -> None:
        with self._lock:
            for executor in self._executors.values():
                executor.close()
            for driver in self._drivers.values():
                driver.close()
            if self._tracker is not None:
                self._tracker.store.close()
            self._executors.clear()
            self._drivers.clear()
            self._tracker, self._tracker_opened = None, False


def _available_at(now: float, delay: Delay | None, at: datetime | None) -> float:
    if delay is not None and at is not None:
        raise ValueError("give delay= or at=, not both")
    if at is not None:
        moment = at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # naive means UTC
        return moment.timestamp()
    if delay is None:
        return now
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    if seconds < 0:
        raise ValueError(f"delay must not be negative, got {seconds}")
    return now + seconds


def transactions() -> ModuleType:
    """`jobbridge.transactions`, imported when a dispatch first names a transaction: it needs
    SQLAlchemy's ORM, which a worker on redis or sqs never loads otherwise."""
    import jobbridge.transactions

    return jobbridge.transactions
