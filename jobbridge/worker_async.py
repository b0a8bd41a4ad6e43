"""Async attempts run on the event loop itself, started from the worker's loop: no thread per attempt.

An ``async def handle`` run through a pool thread costs that thread a hand-off
to the event loop's thread and a wait for the answer: two thread wake-ups per
attempt, more than the no-op job itself. When nothing has to run around the
attempt on a thread (`Executor.runs_on_loop`: no middleware, no attempt hook,
no result-store write), the pool hands the reservation here instead: the loop
runs up to ``size`` such attempts at once (as many as the pool has threads),
each as a task, and gives each outcome to the worker as a thread would.

Everything that is not a plain run (a cancelled, expired or undecodable
message, attempts exhausted, an attempt that raised) is decided on a thread
(`asyncio.to_thread`), exactly as the pool would decide it, so that a
``failed()`` hook or a store write never blocks the loop. A terminate cancels
the attempt's task; its timeout is the job's, as on the thread path.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from jobbridge import signals
from jobbridge.envelope import Reservation
from jobbridge.errors import JobCancelled
from jobbridge.event_loop import bounded
from jobbridge.expiry import has_expired
from jobbridge.outcome import Outcome

if TYPE_CHECKING:
    from jobbridge.execution import Executor

log = logging.getLogger("jobbridge.worker")


class LoopAttempts:
    """Async attempts started on the executor's event loop, at most ``size`` at once."""

    def __init__(self, size: int, executor: Executor, done: Callable[[Outcome], None],
                 fault: Callable[[Reservation, BaseException], Outcome]) -> None:
        self._size, self._executor, self._done, self._fault = size, executor, done, fault
        self._inbox: deque[Reservation] = deque()  # appended by the worker's loop, taken by the event loop
        self._waiting: deque[Reservation] = deque()  # the event loop's own
        self._called = False  # a `_take` is due on the event loop
        self._lock = threading.Lock()
        #: attempts running on the loop now (read by the monitor thread)
        self.running = 0

    def takes(self, res: Reservation) -> bool:
        return self._executor.runs_on_loop(res)

    def submit(self, res: Reservation) -> None:
        """From the worker's loop: one call onto the event loop per batch, not per job."""
        self._inbox.append(res)
        with self._lock:
            if self._called:
                return  # the `_take` due takes this one too: it clears the flag before it reads the inbox
            self._called = True
        self._executor.loop.call_soon(self._take)

    def _take(self) -> None:
        with self._lock:
            self._called = False
        while self._inbox:
            self._waiting.append(self._inbox.popleft())
        self._start()

    def _start(self) -> None:
        while self._waiting and self.running < self._size:
            self.running += 1
            asyncio.get_running_loop().create_task(self._run(self._waiting.popleft()))

    async def _run(self, res: Reservation) -> None:
        try:
            outcome = await attempt(self._executor, res)
        except BaseException as exc:  # a fault outside the job's own code, as on a pool thread
            outcome = self._fault(res, exc)
            log.exception("running job %s failed outside the job; it is %s", res.id, outcome.label)
        finally:
            self.running -= 1
        self._done(outcome)
        self._start()


async def attempt(executor: Executor, res: Reservation) -> Outcome:
    """One attempt on the loop: what `Executor.run` does, with the job awaited here rather than from a thread."""
    env = res.envelope
    if (res.cancelled or env.id in executor.cancelled_ids or res.decode_error is not None
            or not 1 <= env.attempts <= env.tries or has_expired(res, executor.clock)):
        return await asyncio.to_thread(executor.run, res)  # not a plain run: decided as a pool thread decides
    start = time.perf_counter()
    ready = executor.prepare(res, start)
    if isinstance(ready, Outcome):
        return ready
    cls, ctx = ready
    if signals.job_processing.receivers:
        signals.send(signals.job_processing, cls, ctx=ctx, envelope=env)
    stop: Future[Any] = Future()  # what a terminate cancels (from any thread): it cancels this task
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    stop.add_done_callback(lambda _: task is not None and loop.call_soon_threadsafe(task.cancel))
    try:
        if executor.begin(env.id, stop):
            raise JobCancelled("the job was cancelled while starting (terminate=True)")
        try:
            with executor.container.scope():
                value = await bounded(ctx.job.handle(ctx), ctx.timeout)
        except asyncio.CancelledError:
            if not stop.cancelled():
                raise  # the loop is closing: not a terminate
            raise JobCancelled("the job was cancelled while running (terminate=True)") from None
    except Exception as exc:
        executor.ended(env.id)
        return await asyncio.to_thread(executor.decide, ctx, res, exc, start)
    executor.ended(env.id)
    return executor.succeeded(cls, ctx, res, value, start)
