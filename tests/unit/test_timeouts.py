"""The watchdog: finished attempts leave nothing behind, and no one timeout or entry can switch timeouts off."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator

import pytest

from jobbridge.errors import JobTimeout
from jobbridge.timeouts import SWEEP_AT, AttemptInterrupted, Watchdog


def spin_until_stopped(watchdog: Watchdog, timeout: float = 0.2) -> None:
    """A pure-Python loop under ``timeout``: it must be stopped (it would otherwise run for a minute)."""
    deadline = time.monotonic() + 60
    with pytest.raises(JobTimeout), watchdog.watch(timeout, "spin"):
        while time.monotonic() < deadline:
            pass


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    yield Watchdog(grace=0.05)


def test_finished_attempts_leave_nothing_behind(watchdog: Watchdog) -> None:
    def attempts(start: int) -> None:
        for i in range(start, start + 2_500):
            with watchdog.watch(30 * 86400.0, f"job-{i}"):  # a facade task with no time limit
                pass

    threads = [threading.Thread(target=attempts, args=(n * 2_500,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert watchdog.held <= SWEEP_AT, f"{watchdog.held} entries held after 10,000 finished attempts"


def test_stopped_attempts_leave_nothing_behind_either(watchdog: Watchdog) -> None:
    for _ in range(3):
        spin_until_stopped(watchdog, 0.01)
    time.sleep(0.1)  # past every grace period
    with watchdog.watch(1.0, "last"):
        pass
    assert watchdog.held <= 4 and watchdog.stuck == []


@pytest.mark.parametrize("huge", [1e12, 1e300, math.inf, math.nan, -5.0])
def test_a_later_short_timeout_is_still_enforced_after_any_value(watchdog: Watchdog, huge: float) -> None:
    if huge < 0:  # a negative timeout is due at once: the attempt is stopped straight away
        spin_until_stopped(watchdog, huge)
    else:
        with watchdog.watch(huge, "huge"):
            time.sleep(0.01)  # the watchdog thread is waiting on the huge deadline meanwhile
    spin_until_stopped(watchdog)
    assert watchdog._thread is not None and watchdog._thread.is_alive()


def test_a_huge_timeout_still_running_does_not_hold_back_a_short_one(watchdog: Watchdog) -> None:
    release = threading.Event()

    def long_attempt() -> None:
        with watchdog.watch(1e12, "long"):
            release.wait(30)

    other = threading.Thread(target=long_attempt)
    other.start()
    try:
        time.sleep(0.05)
        spin_until_stopped(watchdog)
    finally:
        release.set()
        other.join()


def test_a_listener_that_raises_does_not_end_the_watchdog() -> None:
    def raises(label: str) -> None:
        raise RuntimeError("a listener's bug")

    watchdog = Watchdog(grace=0.05, on_stuck=raises)
    with pytest.raises(JobTimeout), watchdog.watch(0.05, "blocked"):
        time.sleep(0.4)  # in C: stopped only once the sleep returns, after the grace passed
    assert watchdog.stuck == ["blocked"]
    spin_until_stopped(watchdog)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_watchdog_thread_that_died_is_started_again(watchdog: Watchdog) -> None:
    real = watchdog._next
    died = threading.Event()

    def dies_once() -> object:
        if not died.is_set():
            died.set()
            raise SystemExit  # not one entry's fault: the loop lets it end the thread
        return real()

    watchdog._next = dies_once  # type: ignore[method-assign]
    with watchdog.watch(10.0, "first"):
        pass
    first = watchdog._thread
    assert first is not None and died.wait(5)
    first.join(5)
    assert not first.is_alive()
    spin_until_stopped(watchdog)
    assert watchdog._thread is not first and watchdog._thread is not None and watchdog._thread.is_alive()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_watchdog_thread(watchdog: Watchdog) -> None:
    """The parent's thread does not come along into a forked child: the child's first watch starts one."""
    spin_until_stopped(watchdog)  # the parent's thread runs
    pid = os.fork()
    if pid == 0:  # the child: its timeouts must still be enforced
        code = 1
        try:
            spin_until_stopped(watchdog)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_executor_spelling_stops_an_overrun_and_leaves_nothing_behind(watchdog: Watchdog) -> None:
    """`arm` / `disarm` / `stopped`, as `Executor` calls them, do what `watch` does."""
    deadline = time.monotonic() + 60
    entry = watchdog.arm(0.1, "spelled")
    with pytest.raises(JobTimeout):
        try:
            try:
                while time.monotonic() < deadline:
                    pass
            finally:
                watchdog.disarm(entry)
        except AttemptInterrupted:
            raise watchdog.stopped(entry, 0.1) from None
    assert time.monotonic() < deadline
    entry = watchdog.arm(10.0, "quick")
    watchdog.disarm(entry)
    assert watchdog.held <= SWEEP_AT * 2 and "quick" not in watchdog._watching
