"""A store that fails now and then (a restarting server) does not kill the worker."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jobbridge import signals
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Reservation
from jobbridge.errors import DriverUnavailable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from jobbridge.worker import Worker, WorkerOptions
from tests.worker import jobs
from tests.worker.conftest import Harness


class Flaky(MemoryDriver):
    """Raises `DriverUnavailable` from the first few calls of each operation."""

    def __init__(self, failures: dict[str, int], **kw: Any) -> None:
        super().__init__(**kw)
        self.failures = dict(failures)

    def _maybe_fail(self, operation: str) -> None:
        if self.failures.get(operation, 0) > 0:
            self.failures[operation] -= 1
            raise DriverUnavailable(f"{operation}: connection refused")

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        self._maybe_fail("reserve")
        return super().reserve(queues, limit, wait=wait)

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self._maybe_fail("acknowledge")
        super().acknowledge(reservations)

    def reclaim_expired(self) -> int:
        self._maybe_fail("reclaim")
        return super().reclaim_expired()


def test_store_errors_are_reported_and_the_worker_goes_on(harness: Harness, clock: FixedClock) -> None:
    driver = Flaky({"reserve": 3, "acknowledge": 2, "reclaim": 1}, clock=clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(20))
    seen: list[tuple[object, str]] = []

    def failed(sender: object, **kw: Any) -> None:
        seen.append((sender, str(kw["operation"])))
        assert isinstance(kw["exception"], DriverUnavailable) and "connection refused" in kw["error"]

    signals.queue_operation_failed.connect(failed)
    try:
        worker = harness.worker(bridge, stop_when_empty=True, sleep=0.01)
        stats = worker.run()
    finally:
        signals.queue_operation_failed.disconnect(failed)
    assert stats.succeeded == 20
    assert sorted(n for _, n in jobs.RAN) == list(range(20)), "every job ran once"
    assert pending(driver, "default") == 0, "every job was acknowledged in the end"
    assert sorted(op for _, op in seen) == ["reclaim", "reserve", "reserve", "reserve", "settle", "settle"]
    assert all(sender is worker for sender, _ in seen)


class Shifted:
    """A monotonic clock a test can move on, as a worker's own timers read it."""

    def __init__(self) -> None:
        self.by = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.by


class UnreachableUntilTheLeaseLapses(Flaky):
    """Cannot be reached to acknowledge; on the sixth try the worker's clock passes the job's lease."""

    def __init__(self, clock: FixedClock, shifted: Shifted) -> None:
        super().__init__({"acknowledge": 10**6}, clock=clock)
        self.shifted = shifted
        self.refused = 0

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self.refused += 1
        if self.refused == 6:
            self.shifted.by += self.reservation + 1
        super().acknowledge(reservations)


def test_outcomes_are_stored_while_the_lease_lasts_then_given_up_to_it(
        harness: Harness, clock: FixedClock) -> None:
    shifted = Shifted()
    driver = UnreachableUntilTheLeaseLapses(clock, shifted)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch(jobs.Noop(n=1))
    worker = Worker(bridge, WorkerOptions(stop_when_empty=True, sleep=0.01), monotonic=shifted)
    stats = harness.start(worker).join()  # a worker held by its outcome for ever would never stop
    assert stats.processed == 1
    assert driver.refused == 6, "it kept trying while the reservation was still the worker's, then gave up"
    (counts,) = driver.counts()
    assert counts.reserved == 1, "not acknowledged: it runs again once its reservation lapses"


def test_leases_are_judged_by_the_worker_not_by_its_wall_clock_against_the_stores_deadline(
        harness: Harness, clock: FixedClock) -> None:
    """The store's clock is an hour behind this process's: its deadlines look long past to the local clock."""
    store_clock = FixedClock(clock.now() - 3600)
    driver = Flaky({"acknowledge": 3}, clock=store_clock)
    bridge = harness.bridge(driver=driver)
    driver.push([bridge.envelope(jobs.Noop(n=1)).replace(available_at=store_clock.now())])
    stats = harness.worker(bridge, stop_when_empty=True, sleep=0.01).run()
    assert stats.succeeded == 1
    assert pending(driver, "default") == 0, "stored once the store answered: the lease was still held"


class AcknowledgesNothing(Flaky):
    """Answers every call but acknowledge; each refusal moves the worker's clock past a heartbeat."""

    def __init__(self, clock: FixedClock, shifted: Shifted) -> None:
        super().__init__({"acknowledge": 10**6}, clock=clock)
        self.shifted = shifted
        self.refused = 0
        self.extended: list[str] = []

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self.refused += 1
        self.shifted.by += self.reservation / 4 + 1
        super().acknowledge(reservations)

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        self.extended += [r.id for r in reservations]
        return super().extend(reservations, seconds)


def test_a_finished_job_is_not_renewed_while_its_outcome_waits_so_no_failing_store_holds_it_for_ever(
        harness: Harness, clock: FixedClock) -> None:
    shifted = Shifted()
    driver = AcknowledgesNothing(clock, shifted)
    bridge = harness.bridge(driver=driver)
    job_id = bridge.dispatch(jobs.Noop(n=1))
    worker = Worker(bridge, WorkerOptions(stop_when_empty=True, sleep=0.01), monotonic=shifted)
    stats = harness.start(worker).join()  # a worker held by its outcome for ever would never stop
    assert stats.processed == 1
    assert job_id not in driver.extended, "its heartbeats skipped it once its attempt had ended"
    assert driver.refused == 4, "tried for the rest of its lease (16 s a try, 60 s lease), then given up"
