"""Async attempts run on the event loop itself (`jobbridge.worker_async`), started from the worker's loop.

What the thread path decides, this path decides the same way: a timeout, a
failure and its ``failed()`` hook, a cancellation before the start, a terminate
while running; and no more attempts run at once than the worker has threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.envelope import Reservation
from jobbridge.outcome import Outcome
from jobbridge.pool import outcome_of_a_fault
from jobbridge.worker import Worker, WorkerOptions
from jobbridge.worker_async import LoopAttempts
from tests.worker.conftest import wait_until

SEEN: list[tuple[str, Any]] = []
RUNNING = threading.Event()
AT_ONCE = {"now": 0, "most": 0}


def _task() -> str:
    """What started the task this attempt awaits in: the loop's own runner, or a thread's hand-off."""
    task = asyncio.current_task()
    assert task is not None
    return str(task.get_coro().__qualname__)  # type: ignore[union-attr]


class Where(Job, name="loop.where"):
    async def handle(self, ctx: JobContext) -> None:
        SEEN.append(("where", _task()))


class Kept(Job, name="loop.kept", store_result=True):
    async def handle(self, ctx: JobContext) -> None:
        SEEN.append(("kept", _task()))


class Pair(Job, name="loop.pair"):
    """Passes only once two run at once; counts how many ever did."""

    async def handle(self, ctx: JobContext) -> None:
        AT_ONCE["now"] += 1
        AT_ONCE["most"] = max(AT_ONCE["most"], AT_ONCE["now"])
        try:
            for _ in range(10_000):
                if AT_ONCE["most"] >= 2:
                    return
                await asyncio.sleep(0.001)
            raise RuntimeError("never two at once")
        finally:
            AT_ONCE["now"] -= 1


class Slow(Job, name="loop.slow", timeout=0.05, tries=2):
    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(30)


class Broken(Job, name="loop.broken", tries=1):
    async def handle(self, ctx: JobContext) -> None:
        raise KeyError("no such thing")

    def failed(self, ctx: JobContext, error: BaseException) -> Awaitable[None] | None:
        async def note() -> None:
            SEEN.append(("failed", type(error).__name__))
        return note()


class Sleeper(Job, name="loop.sleeper", timeout=30):
    async def handle(self, ctx: JobContext) -> None:
        RUNNING.set()
        await asyncio.sleep(30)


JOBS = [Where, Kept, Pair, Slow, Broken, Sleeper]


@pytest.fixture
def bridge(jobbridge_memory: JobBridge) -> JobBridge:
    SEEN.clear()
    RUNNING.clear()
    AT_ONCE.update(now=0, most=0)
    jobbridge_memory.register(*JOBS)
    return jobbridge_memory


def _run(bridge: JobBridge, job: Job, *, size: int = 1, before: Any = None) -> Outcome:
    """One attempt of ``job`` through `LoopAttempts`; ``before(res)`` runs once it is submitted."""
    bridge.dispatch(job)
    (res,) = bridge.driver().reserve(["default"], 1)
    done: list[Outcome] = []
    attempts = LoopAttempts(size, bridge.executor(), done.append, outcome_of_a_fault)
    assert attempts.takes(res)
    attempts.submit(res)
    if before is not None:
        before(res)
    wait_until(lambda: done, "the outcome")
    return done[0]


def test_a_plain_async_job_runs_on_the_loop_and_one_that_keeps_its_result_from_a_thread(
        bridge: JobBridge) -> None:
    bridge.dispatch(Where())
    bridge.dispatch(Kept())
    stats = Worker(bridge, WorkerOptions(stop_when_empty=True, sleep=0.02)).run()
    assert stats.succeeded == 2
    # started by LoopAttempts on the loop; the other through a pool thread's `EventLoop.run`
    assert sorted(SEEN) == [("kept", "bounded"), ("where", "LoopAttempts._run")]
    assert bridge.driver().reserve(["default"], 1) == []  # both acknowledged


def test_attempts_run_side_by_side_but_never_more_than_the_threads(bridge: JobBridge) -> None:
    bridge.dispatch_many(Pair() for _ in range(6))
    held = bridge.driver().reserve(["default"], 6)
    done: list[Outcome] = []
    attempts = LoopAttempts(2, bridge.executor(), done.append, outcome_of_a_fault)
    for res in held:
        attempts.submit(res)
    wait_until(lambda: len(done) == 6, "six outcomes")
    assert [o.label for o in done] == ["succeeded"] * 6
    assert AT_ONCE["most"] == 2


def test_a_timeout_releases_the_attempt(bridge: JobBridge) -> None:
    outcome = _run(bridge, Slow())
    assert (outcome.action, outcome.label) == ("release", "released")
    assert outcome.error.startswith("JobTimeout: attempt exceeded its timeout of 0.05s")


def test_a_last_failure_runs_the_async_failed_hook(bridge: JobBridge) -> None:
    outcome = _run(bridge, Broken())
    assert (outcome.action, outcome.label) == ("fail", "failed")
    assert outcome.error.startswith("KeyError")
    assert SEEN == [("failed", "KeyError")]


def test_a_job_cancelled_before_its_start_never_runs(bridge: JobBridge) -> None:
    job_id = bridge.dispatch(Where())
    assert job_id
    bridge.cancel(job_id)
    (res,) = bridge.driver().reserve(["default"], 1)
    bridge.executor().refresh_cancellations([res.id])  # what the worker does after each reserve
    done: list[Outcome] = []
    LoopAttempts(1, bridge.executor(), done.append, outcome_of_a_fault).submit(res)
    wait_until(lambda: done, "the outcome")
    assert (done[0].action, done[0].label) == ("acknowledge", "revoked")
    assert SEEN == []


def test_terminate_stops_a_running_attempt_which_ends_revoked(bridge: JobBridge) -> None:
    def terminate(res: Reservation) -> None:
        assert RUNNING.wait(10)
        bridge.cancel(res.id, terminate=True)
        bridge.executor().refresh_cancellations([])  # what the heartbeat does

    outcome = _run(bridge, Sleeper(), before=terminate)
    assert (outcome.action, outcome.label) == ("acknowledge", "revoked")
