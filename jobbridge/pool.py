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
        self._busy = [False] * size  # slot i: whether thread i is in an attempt
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"jobbridge-worker-{i}", daemon=True)
                         for i in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, reservation: Reservation) -> None:
        loop = self._loop
        if loop is not None and loop.takes(reservation):
            loop.submit(reservation)
        else:
            self._inbox.put(reservation)

    @property
    def running(self) -> int:
        """Attempts running now (read by the monitor thread once a second; each thread sets its own slot)."""
        return sum(self._busy) + (0 if self._loop is None else self._loop.running)

    def _serve(self, slot: int) -> None:
        busy = self._busy
        while (res := self._inbox.get()) is not None:
            busy[slot] = True
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
