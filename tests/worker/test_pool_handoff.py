"""An idle worker's hand-off: the loop waits until a thread took the job (`Pool.let_them_start`).

The wait exists so that the loop's own Python after the hand-off does not hold the
GIL the woken thread needs to start the job; these tests pin what it promises: when
it returns, a thread holds the attempt, and with nothing handed over it does not wait.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jobbridge import pool as pool_module
from jobbridge.envelope import Reservation
from jobbridge.outcome import Outcome
from jobbridge.pool import Pool


def _reservation(job_id: str) -> Any:
    class _Res:  # the pool reads nothing of a reservation but hands it to ``run``
        id = job_id
    return _Res()


def test_after_let_them_start_a_thread_holds_the_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "HANDOFF_WAIT", 60.0)  # returns only when taken: no race with a timeout
    release, done = threading.Event(), threading.Event()
    ran: list[str] = []

    def run(res: Reservation) -> Outcome:
        ran.append(res.id)
        release.wait(60)
        return Outcome(res, "acknowledge", "succeeded")

    pool = Pool(2, run, lambda outcome: done.set())
    try:
        pool.submit(_reservation("a"))
        pool.let_them_start()
        assert pool.running == 1  # a thread marks itself busy before it tells the loop it took the job
        release.set()
        assert done.wait(60)
        assert ran == ["a"]
    finally:
        release.set()
        pool.close()


def test_let_them_start_without_a_hand_off_returns_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "HANDOFF_WAIT", 60.0)  # a wait here would hang the test, not pass it
    pool = Pool(1, lambda res: Outcome(res, "acknowledge", "succeeded"), lambda outcome: None)
    try:
        pool.let_them_start()
        assert pool.running == 0
    finally:
        pool.close()
