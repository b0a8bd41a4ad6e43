"""Run one reservation and decide: acknowledge, release (with backoff) or fail.

The attempt runs inside a middleware chain, ``(ctx, call_next) -> result``,
composed once; the whole of it, from the job's lookup to its outcome, inside
the telemetry hooks (`jobbridge.telemetry_hooks`) when any are added.
Nothing here reserves or loops; `jobbridge.worker` does that.
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from jobbridge import limits, payload, signals
from jobbridge.attempt_log import log
from jobbridge.attempt_log import log_attempt as _log_attempt
from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.container import Container
from jobbridge.context import JobContext, attempt_context
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import JobBridgeError, JobCancelled, PayloadDecodeError, UnknownJob
from jobbridge.event_loop import EventLoop
from jobbridge.expiry import dropped, has_expired
from jobbridge.job import JobOptions, options_of
from jobbridge.outcome import AcknowledgeJob, FailJob, Outcome, ReleaseJob, acknowledged
from jobbridge.registry import JobRegistry
from jobbridge.settling import store_outcomes
from jobbridge.telemetry_hooks import ATTEMPT_HOOKS, around_attempt
from jobbridge.timeouts import AttemptInterrupted, Watchdog
from jobbridge.tracking import ResultTracker

CallNext = Callable[[], Any]
Middleware = Callable[[JobContext, CallNext], Any]


def shown(exc: BaseException) -> BaseException:
    """The failure to store: the cause, for a `FailJob` / `ReleaseJob` that only carries it."""
    if getattr(exc, "stands_for_cause", False) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def describe(exc: BaseException) -> str:
    """The stored error: ``Type: message`` on the first line, then the traceback."""
    head = f"{type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(exc)).rstrip()
    return f"{head}\n{tb}" if exc.__traceback__ is not None else head


class Executor:
    """Runs attempts for one connection; thread-safe, shared by a worker's threads."""

    def __init__(
        self,
        registry: JobRegistry,
        container: Container,
        *,
        connection: str = "default",
        middleware: Sequence[Middleware] = (),
        watchdog: Watchdog | None = None,
        loop: EventLoop | None = None,
        tracker: ResultTracker | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.registry = registry
        self.clock = clock  # what an envelope's expires_at is judged by
        self.container = container
        self.connection = connection
        self.watchdog = watchdog or Watchdog()
        self.loop = loop or EventLoop()
        self.tracker = tracker
        self.cancelled_ids: set[str] = set()
        self._running: dict[str, Future[Any] | None] = {}
        self._doomed: set[str] = set()  # terminated before their attempt could be stopped
        self._guard = threading.Lock()
        self._middleware: tuple[Middleware, ...] = tuple(middleware)  # the app's; then `_timed`, innermost
        self._async: dict[type, bool] = {}  # job class -> whether its handle is a coroutine function
        self._options: dict[type, JobOptions] = {}  # job class -> its options, looked up once
        self._on_loop: dict[str, bool] = {}  # job name -> `runs_on_loop`

    # -- the attempt -------------------------------------------------------------------------

    def run(self, res: Reservation) -> Outcome:
        """One attempt of one reservation, with its signals and its log line.

        Inside the telemetry hooks (`jobbridge.telemetry_hooks`) when some were added; with none, nothing
        wraps the attempt.
        """
        if ATTEMPT_HOOKS:
            return around_attempt(self, res, self._attempt)
        return self._attempt(res)

    def _attempt(self, res: Reservation) -> Outcome:
        start = time.perf_counter()
        env = res.envelope
        if res.cancelled or env.id in self.cancelled_ids:  # marked by a driver that read them in its reserve
            self.cancelled_ids.discard(env.id)
            return self._revoked(res, None, start, terminated=False)
        if env.expires_at is not None and has_expired(res, self.clock):  # acknowledged unrun, stored REVOKED
            return dropped(res, self._class_or_none(env.name), self.tracker, _ms(start))
        ready = self.prepare(res, start)
        if isinstance(ready, Outcome):
            return ready
        cls, ctx = ready
        if signals.job_processing.receivers:  # no call (and no keyword dict) per attempt while nobody listens
            signals.send(signals.job_processing, cls, ctx=ctx, envelope=env)
        if self.tracker is not None:
            options = self._options_of(cls)
            if options.track_started:  # no call for the many jobs that do not
                self.tracker.started(ctx, options)
        job_id = env.id
        with self._guard:  # `begin(job_id, None)`, inline: once per attempt
            self._running[job_id] = None
        try:
            scope = self.container.enter_scope()  # `Container.scope`, spelled out: no generator per attempt
            try:
                value = self._call(ctx, 0) if self._middleware else self._timed(ctx)
            finally:
                self.container.exit_scope(scope)
        except Exception as exc:
            return self.decide(ctx, res, exc, start)
        finally:
            with self._guard:  # `ended(job_id)`, inline
                self._running.pop(job_id, None)
                if self._doomed:
                    self._doomed.discard(job_id)
        return self.succeeded(cls, ctx, res, value, start)

    def begin(self, job_id: str, future: Future[Any] | None) -> bool:
        """An attempt of ``job_id`` starts (``future``: what cancels it); True if a terminate came first."""
        with self._guard:
            self._running[job_id] = future
            return job_id in self._doomed

    def ended(self, job_id: str) -> None:
        with self._guard:
            self._running.pop(job_id, None)
            if self._doomed:
                self._doomed.discard(job_id)

    def succeeded(self, cls: type, ctx: JobContext, res: Reservation, value: Any, start: float) -> Outcome:
        outcome = acknowledged(res, "succeeded", _ms(start))
        if signals.job_processed.receivers:
            signals.send(signals.job_processed, cls, ctx=ctx, envelope=res.envelope, duration_ms=outcome.duration_ms)
        return self._finish(outcome, ctx, value)

    def decide(self, ctx: JobContext, res: Reservation, exc: Exception, start: float) -> Outcome:
        """The outcome of an attempt that raised ``exc``: revoked, released, ignored or failed."""
        env = res.envelope
        if isinstance(exc, JobCancelled):
            return self._revoked(res, ctx, start, terminated=True)
        if isinstance(exc, ReleaseJob):
            return self._release(ctx, res, exc, exc.delay, start)
        if isinstance(exc, AcknowledgeJob):
            return self._finish(Outcome(res, "acknowledge", "ignored", duration_ms=_ms(start)), ctx)
        if not isinstance(exc, FailJob) and env.attempts < env.tries:
            return self._release(ctx, res, exc, ctx.job.backoff(env.attempts), start)
        return self._give_up(ctx, res, exc, start)

    def prepare(self, res: Reservation, start: float) -> Outcome | tuple[type, JobContext]:
        """The job class and context to run, or the outcome of a message that must not run.

        A message that cannot become a job (undecodable, an attempt count out of
        range, a name nobody registered, a payload that does not decode, whatever
        the decoder raised) is failed at once with the reason, never released:
        another attempt would fail the same way. One whose attempts are spent
        (its last reservation lapsed) is given up without running.
        """
        env = res.envelope
        if res.decode_error is not None:
            return self._discard(res, f"undecodable message: {res.decode_error}", start)
        if env.attempts < 1:
            return self._discard(res, f"undecodable message: attempt number {env.attempts} is below 1", start)
        try:
            cls = self.registry.get(env.name)
            job = payload.decode(cls, env.payload)
        except Exception as exc:
            return self._discard(res, _not_a_job(exc), start)
        ctx = attempt_context(env.id, env.name, env.queue, env.attempts, env.tries, env.timeout, self.connection,
                              self.container, log, env.headers, job)
        if env.attempts > env.tries:
            lost = JobBridgeError(
                f"attempts exhausted: attempt {env.attempts} of {env.tries} began after the reservation "
                "of the last one lapsed (its worker was lost or stopped heartbeating)"
            )
            return self._give_up(ctx, res, lost, start)
        return cls, ctx

    def runs_on_loop(self, res: Reservation) -> bool:
        """Whether the worker may run this attempt on the event loop itself (`jobbridge.worker_async`).

        Only an ``async def handle`` with nothing to run around it on a thread: no
        middleware, no attempt hook, no result-store write (``store_result``, ``track_started``).
        """
        if ATTEMPT_HOOKS or self._middleware or res.decode_error is not None:
            return False
        name = res.envelope.name
        fits = self._on_loop.get(name)  # by name: one look-up per job (a name, once registered, keeps its class)
        if fits is None:
            if name not in self.registry:
                return False
            cls = self.registry.get(name)
            options = options_of(cls)
            fits = self._on_loop[name] = (inspect.iscoroutinefunction(getattr(cls, "handle", None))
                                          and not options.store_result
                                          and not options.track_started)
        return fits

    def _call(self, ctx: JobContext, index: int) -> Any:
        if index == len(self._middleware):
            return self._timed(ctx)
        return self._middleware[index](ctx, lambda: self._call(ctx, index + 1))

    def _timed(self, ctx: JobContext) -> Any:
        """Innermost, inside every middleware: sync attempts run under the watchdog; async ones are cancelled."""
        cls = type(ctx.job)
        is_async = self._async.get(cls)
        if is_async is None:  # looked up once per class: `inspect` walks the function's wrappers every time
            is_async = self._async[cls] = inspect.iscoroutinefunction(cls.handle)
        if is_async:
            return self._invoke(ctx)
        # `with self.watchdog.watch(ctx.timeout, ctx.id):`, spelled out (`Watchdog.arm`): no generator per attempt
        watchdog = self.watchdog
        entry = watchdog.arm(ctx.timeout, ctx.id)
        try:
            try:
                if self._doomed:  # only a terminate can add to it: no lock while it is empty
                    with self._guard:
                        doomed = ctx.id in self._doomed
                    if doomed:
                        raise JobCancelled("the job was cancelled while starting (terminate=True)")
                return self._invoke(ctx)
            finally:
                watchdog.disarm(entry)
        except AttemptInterrupted:
            # Also caught when it lands inside the finally above, before the watch's lock is taken.
            raise watchdog.stopped(entry, ctx.timeout) from None

    def _invoke(self, ctx: JobContext) -> Any:
        result = ctx.job.handle(ctx)
        if result is not None and inspect.isawaitable(result):  # most handles return None: no ABC check
            return self.loop.run(result, ctx.timeout, lambda future: self._started(ctx.id, future))
        return result

    def _started(self, job_id: str, future: Future[Any]) -> None:
        with self._guard:
            if job_id in self._running:
                self._running[job_id] = future
            doomed = job_id in self._doomed
        if doomed:
            future.cancel()

    # -- cancellation ------------------------------------------------------------------------

    def refresh_cancellations(self, waiting: Sequence[str]) -> None:
        """Ask the store (one round trip) which of these held jobs, and which running ones, were cancelled.

        A waiting job that was cancelled is acknowledged unrun when its turn comes; a running
        one cancelled with ``terminate`` is stopped now, as a timeout would stop it.
        """
        if self.tracker is None:
            return
        with self._guard:
            running = list(self._running)
        cancelled, stop = self.tracker.cancelled(waiting, running)
        self.cancelled_ids.update(cancelled.difference(running))
        for job_id in stop:
            self.terminate(job_id)

    def terminate(self, job_id: str) -> bool:
        """Stop a running attempt of ``job_id``; it ends REVOKED (`JobCancelled` inside it)."""
        with self._guard:
            if job_id not in self._running:
                return False
            future = self._running[job_id]
            # Between "running" and "stoppable" (its watch or its future not yet in place) the
            # request is remembered, and applied the moment the attempt can be stopped.
            self._doomed.add(job_id)
        if future is not None:
            return future.cancel()
        self.watchdog.interrupt(job_id)
        return True

    # -- the decisions -----------------------------------------------------------------------

    def _release(self, ctx: JobContext, res: Reservation, exc: BaseException, delay: float,
                 start: float) -> Outcome:
        exc = shown(exc)
        error = describe(exc)
        outcome = Outcome(res, "release", "released", delay=limits.release_delay(delay), error=error, exception=exc,
                          duration_ms=_ms(start))
        signals.send(signals.job_released, type(ctx.job), ctx=ctx, delay=outcome.delay, error=error,
                     exception=exc)
        return self._finish(outcome, ctx)

    def _give_up(self, ctx: JobContext, res: Reservation, exc: BaseException, start: float) -> Outcome:
        try:
            result = ctx.job.failed(ctx, exc)
            if inspect.isawaitable(result):
                self.loop.run(result, ctx.timeout)
        except Exception:
            log.exception("failed() of %s %s raised; the job is stored as failed all the same", ctx.name, ctx.id)
        exc = shown(exc)
        error = describe(exc)
        outcome = Outcome(res, "fail", "failed", error=error, exception=exc, duration_ms=_ms(start))
        signals.send(signals.job_failed, type(ctx.job), ctx=ctx, error=error, exception=exc)
        return self._finish(outcome, ctx)

    def _revoked(self, res: Reservation, ctx: JobContext | None, start: float, *, terminated: bool) -> Outcome:
        """A cancelled job: acknowledged, never retried, stored REVOKED."""
        outcome = Outcome(res, "acknowledge", "revoked", duration_ms=_ms(start))
        cls = self._class_or_none(res.envelope.name)
        signals.send(signals.job_cancelled, cls, envelope=res.envelope, terminated=terminated)
        if ctx is None:
            _log_attempt(res.envelope, outcome)
            if self.tracker is not None:
                self.tracker.settled(outcome, None, None)
            return outcome
        return self._finish(outcome, ctx)

    def _options_of(self, cls: type) -> JobOptions:
        options = self._options.get(cls)
        if options is None:
            options = self._options[cls] = options_of(cls)
        return options

    def _class_or_none(self, name: str) -> type | None:
        return self.registry.get(name) if name in self.registry else None

    def _discard(self, res: Reservation, reason: str, start: float) -> Outcome:
        """A message that cannot become a job: failed at once, with the reason, never retried."""
        outcome = Outcome(res, "fail", "discarded", error=reason, duration_ms=_ms(start))
        signals.send(signals.message_discarded, None, envelope=res.envelope, reason=reason)
        _log_attempt(res.envelope, outcome)
        return outcome

    def _finish(self, outcome: Outcome, ctx: JobContext, value: Any = None) -> Outcome:
        _log_attempt(outcome.reservation.envelope, outcome)
        if self.tracker is not None:
            options = self._options_of(type(ctx.job))
            if options.store_result or outcome.label == "revoked":  # what `ResultTracker.settled` writes at all
                self.tracker.settled(outcome, options, value)
        return outcome

    # -- applying outcomes -------------------------------------------------------------------

    #: apply outcomes to the store (`jobbridge.settling.store_outcomes`); kept here, where callers found it
    settle = staticmethod(store_outcomes)

    def run_inline(self, env: Envelope) -> None:
        """Run every attempt now, in this thread, without a store (``dispatch_now``, the sync driver).

        Retries follow at once; after the last failed attempt the error is raised to the caller.
        """
        for attempt in range(env.attempts + 1, env.tries + 1):
            res = Reservation(env.replace(attempts=attempt), None, float("inf"))
            outcome = self.run(res)
            if outcome.action == "acknowledge":
                return
            if outcome.action == "fail":
                if outcome.exception is not None:
                    raise outcome.exception
                raise JobBridgeError(outcome.error)

    def close(self) -> None:
        self.loop.close()


def _not_a_job(exc: Exception) -> str:
    """Why a message is not a job; our own errors name the field, another's message might quote a value."""
    if isinstance(exc, (UnknownJob, PayloadDecodeError)):
        return f"{type(exc).__name__}: {exc}"
    return f"PayloadDecodeError: the payload could not be decoded ({type(exc).__name__} while decoding it)"


def _ms(start: float) -> float:
    """Milliseconds since ``start``, to the microsecond: the nearest float to a whole number of
    microseconds / 1000, as ``round(ms, 3)`` gives, without its decimal conversion (a sixth of the cost)."""
    return round((time.perf_counter() - start) * 1_000_000) / 1000
