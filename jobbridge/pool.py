"""The worker's attempt threads: ``size`` daemon threads running reservations handed over through one queue.

`Executor.run` turns everything a job does into an outcome. When the executor
*itself* raises (a result store down while it records the start, a backoff
method that raises, a bug), the thread survives and the attempt still ends in
an outcome: released with the default backoff while tries remain, failed once
they are spent. Releasing it unconditionally, as this once did, ran such a
job every second for ever.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from jobbridge.backoff import DEFAULT_BACKOFF
from jobbridge.envelope import Reservation
from jobbridge.execution import Executor, describe
from jobbridge.outcome import Outcome
from jobbridge.worker_async import LoopAttempts

log = logging.getLogger("jobbridge.worker")
#: seconds the loop waits at most for a thread to take an idle worker's job (`Pool.let_them_start`)
HANDOFF_WAIT = 0.002


def outcome_of_a_fault(res: Reservation, exc: BaseException) -> Outcome:
    """The outcome of an attempt that failed outside the job's own code."""
    env, error = res.envelope, describe(exc)
    if res.decode_error is not None or not 1 <= env.attempts < env.tries:
        return Outcome(res, "fail", "failed", error=error, exception=exc)
    return Outcome(res, "release", "released", delay=DEFAULT_BACKOFF.delay(env.attempts), error=error,
                   exception=exc)


class Pool:
    """``size`` daemon threads running attempts handed over through one queue.

    With an ``executor``, the attempts it can run on its event loop (`Executor.runs_on_loop`: an
    ``async def handle`` and nothing around it) are started there instead (`jobbridge.worker_async`),
    at most ``size`` at once too, without a thread hand-off per attempt.
    """

    def __init__(self, size: int, run: Callable[[Reservation], Outcome],
                 done: Callable[[Outcome], None], *, executor: Executor | None = None) -> None:
        self._inbox: queue.SimpleQueue[Reservation | None] = queue.SimpleQueue()
        self._run, self._done = run, done
        self._loop = None if executor is None else LoopAttempts(size, executor, done, outcome_of_a_fault)
        self._on_loop = None if executor is None else executor.runs_on_loop  # `LoopAttempts.takes`, one call less
        self._busy = [False] * size  # slot i: whether thread i is in an attempt
        #: set by `submit`: an attempt went to the threads since the loop last waited for one to be taken
        self._submitted = False
        #: what `let_them_start` waits on; the first thread to take an attempt sets it
        self._taken: threading.Event | None = None
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"jobbridge-worker-{i}", daemon=True)
                         for i in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, reservation: Reservation) -> None:
        loop, on_loop = self._loop, self._on_loop
        if loop is not None and on_loop is not None and on_loop(reservation):
            loop.submit(reservation)
        else:
            self._submitted = True
            self._inbox.put(reservation)

    def let_them_start(self) -> None:
        """Wait (the GIL given up) until a thread took an attempt submitted since the last call; `HANDOFF_WAIT` at most.

        A thread woken by `submit` cannot start while the caller holds the GIL, and the
        worker's loop, after handing jobs over, goes on in Python (settle, timers, the next
        reserve) for 0.1 to 0.3 ms before it blocks (measured): the job waited for all
        of it. Called by the loop after an *idle* worker's reserve handed jobs over, it
        costs the loop that thread's wake-up once per idle spell, never a busy worker's
        anything (docs/rabbitmq.md, "Speed"). Attempts on the event loop are not waited for.
        """
        if not self._submitted:
            return
        self._submitted = False
        taken = self._taken = threading.Event()
        if self._inbox.empty():  # taken already: a thread is running it
            self._taken = None
            return
        taken.wait(HANDOFF_WAIT)
        self._taken = None

    @property
    def running(self) -> int:
        """Attempts running now (read by the monitor thread once a second; each thread sets its own slot)."""
        return sum(self._busy) + (0 if self._loop is None else self._loop.running)

    def _serve(self, slot: int) -> None:
        busy = self._busy
        while (res := self._inbox.get()) is not None:
            busy[slot] = True
            taken = self._taken
            if taken is not None:  # the loop waits for this hand-off (`let_them_start`)
                taken.set()
            try:
                outcome = self._run(res)
            except BaseException as exc:  # a fault outside the job's own code: keep the thread alive
                outcome = outcome_of_a_fault(res, exc)
                log.exception("running job %s failed outside the job; it is %s", res.id, outcome.label)
            busy[slot] = False
            self._done(outcome)

    def close(self) -> None:
        """Let idle threads end; a thread stuck in an attempt is a daemon and dies with the process."""
        for _ in self._threads:
            self._inbox.put(None)
