"""Run one reservation and decide: acknowledge, release (with backoff) or fail.

The attempt runs inside a middleware chain, ``(ctx, call_next) -> result``,
composed once. Nothing here reserves or loops; `jobbridge.worker` does that.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

from jobbridge import payload, signals
from jobbridge.container import Container
from jobbridge.context import JobContext
from jobbridge.drivers.base import Driver
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import JobBridgeError, JobTimeout, PayloadDecodeError, UnknownJob
from jobbridge.outcome import AcknowledgeJob, FailJob, Outcome, ReleaseJob
from jobbridge.registry import JobRegistry
from jobbridge.timeouts import Watchdog

CallNext = Callable[[], Any]
Middleware = Callable[[JobContext, CallNext], Any]
log = logging.getLogger("jobbridge.job")


def describe(exc: BaseException) -> str:
    """The stored error: ``Type: message`` on the first line, then the traceback."""
    head = f"{type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(exc)).rstrip()
    return f"{head}\n{tb}" if exc.__traceback__ is not None else head


class EventLoop:
    """One event loop in a thread of its own, where every async ``handle`` of a process runs."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Awaitable[Any], timeout: float) -> Any:
        """Run ``coro`` on the loop; at ``timeout`` it is cancelled and `JobTimeout` raised here."""
        loop = self._ensure()

        async def bounded() -> Any:
            try:
                return await asyncio.wait_for(coro, timeout)
            except TimeoutError:
                raise JobTimeout(f"attempt exceeded its timeout of {timeout:g}s and was cancelled") from None

        future: Future[Any] = asyncio.run_coroutine_threadsafe(bounded(), loop)
        return future.result()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="jobbridge-async", daemon=True).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        with self._lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None


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
    ) -> None:
        self.registry = registry
        self.container = container
        self.connection = connection
        self.watchdog = watchdog or Watchdog()
        self.loop = loop or EventLoop()
        self._middleware: tuple[Middleware, ...] = (*middleware, self._timeout)

    # -- the attempt -------------------------------------------------------------------------

    def run(self, res: Reservation) -> Outcome:
        """One attempt of one reservation, with its signals and its log line."""
        start = time.perf_counter()
        env = res.envelope
        if res.decode_error is not None:
            return self._discard(res, f"undecodable message: {res.decode_error}", start)
        try:
            cls = self.registry.get(env.name)
            job = payload.decode(cls, env.payload)
        except (UnknownJob, PayloadDecodeError) as exc:
            return self._discard(res, f"{type(exc).__name__}: {exc}", start)
        ctx = self._context(env, job)
        if env.attempts > env.tries:
            lost = JobBridgeError(
                f"attempts exhausted: attempt {env.attempts} of {env.tries} began after the reservation "
                "of the last one lapsed (its worker was lost or stopped heartbeating)"
            )
            return self._give_up(ctx, res, lost, start)
        signals.send(signals.job_processing, cls, ctx=ctx, envelope=env)
        try:
            with self.container.scope():
                self._call(ctx, 0)
        except ReleaseJob as exc:
            return self._release(ctx, res, exc, exc.delay, start)
        except AcknowledgeJob:
            return self._finish(Outcome(res, "acknowledge", "ignored", duration_ms=_ms(start)), ctx)
        except FailJob as exc:
            return self._give_up(ctx, res, exc, start)
        except Exception as exc:
            if env.attempts < env.tries:
                return self._release(ctx, res, exc, job.backoff(env.attempts), start)
            return self._give_up(ctx, res, exc, start)
        outcome = Outcome(res, "acknowledge", "succeeded", duration_ms=_ms(start))
        signals.send(signals.job_processed, cls, ctx=ctx, envelope=env, duration_ms=outcome.duration_ms)
        return self._finish(outcome, ctx)

    def _context(self, env: Envelope, job: Any) -> JobContext:
        return JobContext(
            id=env.id, name=env.name, queue=env.queue, attempt=env.attempts, max_attempts=env.tries,
            timeout=env.timeout, connection=self.connection, container=self.container,
            logger=log, headers=env.headers, job=job,
        )

    def _call(self, ctx: JobContext, index: int) -> Any:
        if index == len(self._middleware):
            return self._invoke(ctx)
        return self._middleware[index](ctx, lambda: self._call(ctx, index + 1))

    def _timeout(self, ctx: JobContext, call_next: CallNext) -> Any:
        """The innermost middleware: sync attempts run under the watchdog; async ones are cancelled."""
        if inspect.iscoroutinefunction(type(ctx.job).handle):
            return call_next()
        with self.watchdog.watch(ctx.timeout, ctx.id):
            return call_next()

    def _invoke(self, ctx: JobContext) -> Any:
        result = ctx.job.handle(ctx)
        if inspect.isawaitable(result):
            return self.loop.run(result, ctx.timeout)
        return result

    # -- the decisions -----------------------------------------------------------------------

    def _release(self, ctx: JobContext, res: Reservation, exc: BaseException, delay: float,
                 start: float) -> Outcome:
        error = describe(exc)
        outcome = Outcome(res, "release", "released", delay=max(0.0, delay), error=error, exception=exc,
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
        error = describe(exc)
        outcome = Outcome(res, "fail", "failed", error=error, exception=exc, duration_ms=_ms(start))
        signals.send(signals.job_failed, type(ctx.job), ctx=ctx, error=error, exception=exc)
        return self._finish(outcome, ctx)

    def _discard(self, res: Reservation, reason: str, start: float) -> Outcome:
        """A message that cannot become a job: failed at once, with the reason, never retried."""
        outcome = Outcome(res, "fail", "discarded", error=reason, duration_ms=_ms(start))
        signals.send(signals.message_discarded, None, envelope=res.envelope, reason=reason)
        _log_attempt(res.envelope, outcome)
        return outcome

    def _finish(self, outcome: Outcome, ctx: JobContext) -> Outcome:
        _log_attempt(outcome.reservation.envelope, outcome)
        return outcome

    # -- applying outcomes -------------------------------------------------------------------

    @staticmethod
    def settle(driver: Driver, outcomes: Sequence[Outcome]) -> None:
        """Apply outcomes to the store: acknowledgements in one batch, then releases and failures.

        A unique job's lock is released on success and on final failure, never on a release:
        a retrying job is still pending, so a duplicate dispatched meanwhile is rightly dropped.
        """
        done = [o.reservation for o in outcomes if o.action == "acknowledge"]
        if done:
            driver.acknowledge(done)
        for o in outcomes:
            if o.action == "release":
                driver.release(o.reservation, o.delay)
            elif o.action == "fail":
                driver.fail(o.reservation, o.error)
        for o in outcomes:
            env = o.reservation.envelope
            if env.unique_key is not None and o.action != "release":
                driver.release_lock(env.unique_key, env.id)

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


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _log_attempt(env: Envelope, outcome: Outcome) -> None:
    """One line per attempt; never the payload."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "name": env.name, "job_id": env.id, "queue": env.queue, "attempt": env.attempts,
        "duration_ms": outcome.duration_ms, "outcome": outcome.label,
    }
    if outcome.action == "release":
        fields["retry_in"] = round(outcome.delay, 3)
    if outcome.error:
        fields["error"] = outcome.error.split("\n", 1)[0]
    level = logging.INFO if outcome.action == "acknowledge" else logging.WARNING
    log.log(level, " ".join(f"{k}={v}" for k, v in fields.items()), extra={"jobbridge": fields})
