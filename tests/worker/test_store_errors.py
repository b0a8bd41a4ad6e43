"""A store that fails now and then (a restarting server) does not kill the worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobbridge import signals
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Reservation
from jobbridge.errors import DriverUnavailable
from jobbridge.testing.clock import FixedClock
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
    assert driver.pending_count("default") == 0, "every job was acknowledged in the end"
    assert sorted(op for _, op in seen) == ["reclaim", "reserve", "reserve", "reserve", "settle", "settle"]
    assert all(sender is worker for sender, _ in seen)


class RefusesUntilTheLeaseLapses(Flaky):
    """Refuses every acknowledge; on the sixth refusal the clock passes the job's lease."""

    def __init__(self, clock: FixedClock) -> None:
        super().__init__({"acknowledge": 10**6}, clock=clock)
        self.refused = 0

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self.refused += 1
        if self.refused == 6:
            self.clock.advance(self.reservation + 1)  # type: ignore[attr-defined]
        super().acknowledge(reservations)


def test_outcomes_are_stored_while_the_lease_lasts_then_given_up_to_it(
        harness: Harness, clock: FixedClock) -> None:
    driver = RefusesUntilTheLeaseLapses(clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch(jobs.Noop(n=1))
    stats = harness.worker(bridge, stop_when_empty=True, sleep=0.01).run()
    assert stats.processed == 1
    assert driver.refused >= 6, "it kept trying while the reservation was still the worker's"
    (counts,) = driver.counts()
    assert counts.reserved == 1, "not acknowledged: it runs again once its reservation lapses"
