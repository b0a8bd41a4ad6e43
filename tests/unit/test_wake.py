"""`jobbridge.wake.Wake`: set from any thread, and from a signal handler that lands anywhere in it, without blocking.

The handler tests run an operation with the handler's ``set`` landing at one
instruction of the wake's own code (`tests.landing`), then the next, until every
instruction has been tried, each such test in a fresh process
(`tests.fresh_process`: CPython 3.11 can spin for good in a traced frame once an
asynchronous exception was raised in the process, as the watchdog tests do); a
real signal (SIGALRM) landing in a blocked wait is a test of its own. A handler that waited
for a lock held by the frame it interrupted would hang there for good:
`faulthandler` then ends the process with every thread's traceback, which fails
the test (a second signal handler raising into the first is no guard: it can land
anywhere too).
"""

from __future__ import annotations

import collections
import faulthandler
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobbridge.wake import Wake
from tests.fresh_process import fresh_process, runs_elsewhere
from tests.landing import landing

#: seconds an operation may take before the process is ended as hung
HUNG = 60
pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signal handlers run on the main thread")


@pytest.fixture(autouse=True)
def hang_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    if runs_elsewhere(request.function):  # the child's guard ends the child, whose failure this process reports
        yield
        return
    faulthandler.dump_traceback_later(HUNG, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def every_landing(start_set: bool, operation: Callable[[Wake], Any]) -> Iterator[tuple[Wake, Any]]:
    """``operation`` on a fresh wake with the handler landing at each of its instructions in turn."""
    for k in range(10_000):
        wake = Wake()
        if start_set:
            wake.set()
        with landing(wake, k, wake.set) as landed:
            result = operation(wake)
        if not landed.fired:
            assert k > 3, "the tracer never reached the wake's code"
            return
        yield wake, result
    raise AssertionError("the operation never ran out of instructions")


@fresh_process
def test_a_handler_landing_in_a_wait_ends_it_and_the_wake_stays_set() -> None:
    # wait(0.5): a landing before the wait sleeps ends it at once (True); one after it slept its time out
    # finds it returning False; once no instruction is left to land on, the loop ends
    results = []
    for wake, got in every_landing(False, lambda wake: wake.wait(0.5)):
        assert wake.is_set()
        results.append(got)
    slept = results.index(False) if False in results else len(results)
    assert slept > 3 and all(got is True for got in results[:slept])
    assert all(got is False for got in results[slept:]), "a landing after the sleep found the wait True"


def test_a_signal_landing_in_a_blocked_wait_ends_it_at_once() -> None:
    wake = Wake()
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: wake.set())
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        assert wake.wait(HUNG / 2) is True  # the handler ran inside the blocked acquire, which then took the gate
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert wake.is_set()


@fresh_process
def test_a_handler_landing_in_a_set_leaves_it_set() -> None:
    for start_set in (False, True):
        for wake, _ in every_landing(start_set, lambda wake: wake.set()):
            assert wake.is_set()


@fresh_process
def test_a_handler_landing_in_a_clear_never_blocks_it() -> None:
    landings = sum(1 for _ in every_landing(True, lambda wake: wake.clear()))  # each returned: none blocked
    assert landings > 3  # set or clear after it, either is right: the set came before the clear, or after


@fresh_process
def test_a_handler_landing_in_is_set_never_blocks_it() -> None:
    for wake, _ in every_landing(False, lambda wake: wake.is_set()):
        assert wake.is_set()


def test_a_plain_threading_event_is_what_these_tests_catch() -> None:
    """The same landing on `threading.Event`'s lock, held by its own frame, hangs: the failure `Wake` prevents."""
    event = threading.Event()
    got = []

    def land() -> None:
        got.append(event._cond.acquire(timeout=0.5))  # type: ignore[attr-defined]  # what Event.set takes first

    with event._cond:  # type: ignore[attr-defined]  # the loop's thread inside Event.wait or Event.clear
        land()  # the stop handler, landing there
    assert got == [False], "the handler got a lock its own thread held: Event.set would have waited for ever"


def test_wakes_from_other_threads_are_never_lost() -> None:
    wake, items, woke = Wake(), collections.deque[int](), []
    total = 20_000

    def produce() -> None:
        for i in range(total):
            items.append(i)
            if not wake.is_set():
                wake.set()

    producers = [threading.Thread(target=produce) for _ in range(4)]
    for thread in producers:
        thread.start()
    taken = 0
    while taken < total * len(producers):
        wake.clear()
        while items:
            items.popleft()
            taken += 1
        if taken < total * len(producers):
            woke.append(wake.wait(10))
    for thread in producers:
        thread.join()
    assert all(woke), "a wait slept out its timeout: a set was lost"


def test_a_wait_without_a_bound_or_with_a_huge_one_takes_both() -> None:
    wake = Wake()
    wake.set()
    assert wake.wait() and wake.wait(10**12) and wake.wait(-1)
    wake.clear()
    assert wake.wait(0) is False and wake.wait(-5) is False
