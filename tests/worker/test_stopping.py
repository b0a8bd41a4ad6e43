"""When a worker stops: --once, --max-jobs, --stop-when-empty, stop(), SIGTERM, a second signal."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest

from jobbridge import JobBridge
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.errors import ConfigurationError
from jobbridge.settings import ConnectionSettings, Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from jobbridge.worker import STOPPED_AT_ONCE_EXIT_CODE, Worker, WorkerOptions
from tests.fresh_process import fresh_process
from tests.landing import landing
from tests.worker import jobs
from tests.worker.conftest import Harness, wait_until


def test_once_runs_one_job_then_returns(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(3))
    worker = harness.worker(bridge, once=True)
    stats = worker.run()
    assert stats.processed == 1 and worker.exit_code == 0
    assert jobs.RAN == [("noop", 0)]
    assert pending(bridge.driver(), "default") == 2


def test_once_on_empty_queues_returns_at_once(harness: Harness) -> None:
    assert harness.worker(harness.bridge(), once=True).run().processed == 0


def test_max_jobs_stops_after_that_many_attempts(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(10))
    stats = harness.worker(bridge, max_jobs=4, concurrency=8).run()
    assert stats.processed == 4
    assert pending(bridge.driver(), "default") == 6


def test_stop_when_empty_drains_what_is_available_now(harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(5))
    bridge.dispatch(jobs.Noop(n=99), delay=60)
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert stats.succeeded == 5
    assert ("noop", 99) not in jobs.RAN
    assert pending(bridge.driver(), "default") == 1, "the delayed job waits"


def test_stop_finishes_the_running_job_and_settles_it(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Block())
    bridge.dispatch(jobs.Noop(n=1))
    running = harness.start(harness.worker(bridge, concurrency=1))
    assert jobs.STARTED.wait(30)
    running.worker.stop()
    jobs.GO.set()
    stats = running.join()
    assert (stats.processed, stats.succeeded) == (1, 1)
    assert ("block.done", 1) in jobs.RAN and ("noop", 1) not in jobs.RAN, "no new job after stop()"
    assert pending(bridge.driver(), "default") == 1
    assert running.worker.exit_code == 0


def test_stop_now_leaves_without_settling(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Block())
    running = harness.start(harness.worker(bridge, concurrency=1))
    assert jobs.STARTED.wait(30)
    running.worker.stop(now=True)
    stats = running.join()
    assert stats.processed == 0
    assert running.worker.stopped_at_once and running.worker.exit_code == STOPPED_AT_ONCE_EXIT_CODE
    (counts,) = bridge.driver().counts()
    assert counts.reserved == 1, "the job comes back when its reservation lapses"


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_sigterm_lets_the_running_job_finish(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Signals())
    bridge.dispatch(jobs.Noop(n=1))
    worker = harness.worker(bridge, concurrency=1)
    stats = worker.run()  # on the main thread: the worker's own SIGTERM handler is installed
    assert (stats.processed, stats.succeeded) == (1, 1)
    assert ("signals.done", 1) in jobs.RAN and ("noop", 1) not in jobs.RAN
    assert worker.exit_code == 0
    assert pending(bridge.driver(), "default") == 1


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_a_second_signal_stops_at_once(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Signals(twice=True))
    worker = harness.worker(bridge, concurrency=1)
    stats = worker.run()
    jobs.GO.set()
    assert stats.processed == 0
    assert worker.stopped_at_once and worker.exit_code == STOPPED_AT_ONCE_EXIT_CODE
    (counts,) = bridge.driver().counts()
    assert counts.reserved == 1


def run_signalled_at(worker: Worker, k: int) -> None:
    """Run ``worker`` on this thread with its SIGTERM handler landing at the ``k``-th instruction of its wake's code."""
    def hung(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"the worker did not stop after a SIGTERM landing at wake instruction {k}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        with landing(worker._wake, k, lambda: worker._on_signal(signal.SIGTERM, None)):
            worker.run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
@fresh_process  # traced: `tests.fresh_process` says why
def test_a_stop_signal_landing_at_any_instruction_of_the_loops_wake_stops_the_worker(harness: Harness) -> None:
    """A signal's handler runs on the loop's own thread, between any two of its instructions.

    It once hung the worker for good when it landed while the loop held its wake's
    lock (a `threading.Event`'s, in ``clear`` or around ``wait``): here it lands at
    each instruction of the wake's code in the loop's first rounds in turn, and
    each run must end, drained (SIGALRM turns a hang into a failure).
    """
    for k in range(120):
        bridge = harness.bridge()
        bridge.dispatch_many(jobs.Noop(n=i) for i in range(3))
        worker = harness.worker(bridge, concurrency=2)
        run_signalled_at(worker, k)
        assert worker.lifecycle.reason == "received SIGTERM" and worker.exit_code == 0, k


def test_a_supervised_child_ignores_the_second_signal(harness: Harness) -> None:
    bridge = harness.bridge()
    worker = harness.worker(bridge)
    worker.ignore_second_signal = True
    worker._on_signal(15, None)
    worker._on_signal(15, None)  # does not raise: the supervisor escalates with SIGKILL
    assert not worker.stopped_at_once


def test_a_reservation_the_heartbeat_cannot_keep_refuses_to_start(clock: FixedClock) -> None:
    # built by hand: Settings.from_mapping already refuses it, and the worker checks again at start
    conf = Settings(connections={"m": ConnectionSettings("m", "memory", {"reservation": 1})}, default_connection="m")
    bridge = JobBridge(conf, clock=clock, drivers={"m": MemoryDriver(reservation=1, clock=clock)})
    with pytest.raises(ConfigurationError, match="reservation of 1 s"):
        Worker(bridge, WorkerOptions()).run()
    bridge.close()


@pytest.mark.parametrize("bad", [
    {"queues": ()}, {"queues": ("",)}, {"concurrency": 0}, {"processes": 0}, {"max_jobs": 0}, {"sleep": -1},
])
def test_options_are_checked(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorkerOptions(**bad)  # type: ignore[arg-type]


def test_banner_names_the_store_queues_and_concurrency(harness: Harness) -> None:
    bridge = harness.bridge()
    text = harness.worker(bridge, queues=("high", "default"), concurrency=3).banner()
    assert "memory (this process only)" in text
    assert "high, default" in text and "3 thread(s)" in text
    assert "WARNING" not in text


def test_wait_until_gives_up(harness: Harness) -> None:
    with pytest.raises(AssertionError, match="never"):
        wait_until(lambda: False, "never", timeout=0.05)
