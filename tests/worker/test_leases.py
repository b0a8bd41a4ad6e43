"""Leases: the heartbeat keeps a running job's reservation, a lost one is reported, lapsed ones come back,
and an attempt stuck past its timeout gets the process replaced."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Reservation
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from jobbridge.worker import REPLACE_EXIT_CODE
from tests.worker import jobs
from tests.worker.conftest import Harness, wait_until

LEASE = 2.0  # the shortest reservation the settings accept; the heartbeat runs every 0.5 s


class Recording(MemoryDriver):
    """A memory driver that records every heartbeat."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.extends: list[tuple[list[str], float]] = []

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        kept = super().extend(reservations, seconds)
        self.extends.append(([r.id for r in reservations], seconds))
        return kept


def test_the_heartbeat_keeps_a_running_jobs_reservation(harness: Harness, clock: FixedClock) -> None:
    driver = Recording(reservation=LEASE, clock=clock)
    bridge = harness.bridge(reservation=LEASE, driver=driver)
    job_id = bridge.dispatch(jobs.Block())
    running = harness.start(harness.worker(bridge, concurrency=1))
    assert jobs.STARTED.wait(30)
    for _ in range(3):  # 3 x 1.5 s = 4.5 s: more than two leases, each step less than one
        seen = len(driver.extends)
        clock.advance(1.5)
        wait_until(lambda n=seen: len(driver.extends) > n, "a heartbeat after the clock moved")
        assert driver.reclaim_expired() == 0, "the renewed reservation has not lapsed"
    assert all(ids == [job_id] and seconds == LEASE for ids, seconds in driver.extends)
    jobs.GO.set()
    wait_until(lambda: pending(driver, "default") == 0, "the job to be acknowledged")
    running.worker.stop()
    stats = running.join()
    assert (stats.succeeded, stats.processed) == (1, 1)
    assert [r for r in jobs.RAN if r[0] == "block"] == [("block", 1)], "it ran once"


def test_a_lost_reservation_is_reported_and_its_outcome_not_stored(
        harness: Harness, clock: FixedClock, caplog: pytest.LogCaptureFixture) -> None:
    driver = Recording(reservation=LEASE, clock=clock)
    bridge = harness.bridge(reservation=LEASE, driver=driver)
    bridge.dispatch(jobs.Block())
    running = harness.start(harness.worker(bridge, concurrency=1))
    assert jobs.STARTED.wait(30)
    with caplog.at_level(logging.WARNING, logger="jobbridge.worker"):
        clock.advance(LEASE * 5)  # the worker "stalled": its lease lapsed, and another took the job
        assert driver.reclaim_expired() == 1
        seen = len(driver.extends)
        wait_until(lambda: len(driver.extends) > seen, "the next heartbeat")
        wait_until(lambda: "was lost" in caplog.text, "the lost reservation to be logged")
        jobs.GO.set()
        wait_until(lambda: pending(driver, "default") == 0, "the second attempt to be acknowledged")
    running.worker.stop()
    running.join()
    assert "finished after its reservation was lost" in caplog.text
    assert [r for r in jobs.RAN if r[0] == "block"] == [("block", 1), ("block", 2)]


def test_the_worker_reclaims_a_dead_workers_job_and_runs_it(harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge(reservation=LEASE)
    driver = bridge.driver()
    bridge.dispatch(jobs.Noop(n=7))
    (dead,) = driver.reserve(["default"], 1)  # a worker that took the job and was killed
    clock.advance(LEASE + 0.1)
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert stats.succeeded == 1
    assert jobs.RAN == [("noop", 7)]
    assert dead.attempt == 1 and pending(driver, "default") == 0


def test_an_attempt_stuck_in_c_past_its_timeout_gets_the_process_replaced(
        harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge()
    bridge.executor().watchdog.grace = 0.1
    stuck_id = bridge.dispatch(jobs.Stuck())
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(3))
    worker = harness.worker(bridge, concurrency=2)  # no stop condition: only the stuck attempt ends it
    stats = worker.run()
    assert worker.replace_process
    assert worker.exit_code == REPLACE_EXIT_CODE
    assert stats.succeeded >= 1, "the other thread went on while the stuck one was watched"
    (counts,) = bridge.driver().counts()
    assert counts.reserved == 1, f"job {stuck_id} keeps its reservation until the process is gone"
    clock.advance(3600)
    assert bridge.driver().reclaim_expired() == 1, "then its lease lapses and a reclaim makes it a new attempt"
