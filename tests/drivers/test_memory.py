"""The driver contract (all three suites) on the memory driver."""

from __future__ import annotations

import pytest

from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Envelope, Reservation, undecodable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract, FailedStoreContract, LockStoreContract, pending


class TestMemoryDriver(DriverContract, FailedStoreContract, LockStoreContract):
    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, clock: FixedClock) -> MemoryDriver:
        return MemoryDriver(reservation=self.RESERVATION, clock=clock)


def test_a_stand_in_is_failed_under_its_own_name_and_kept_out_of_a_retry() -> None:
    """A reservation built for a body that did not decode fails as ``<undecodable>``, with the stored bytes."""
    clock = FixedClock()
    driver = MemoryDriver(clock=clock)
    now = clock.now()
    driver.push([Envelope(id="a", name="x", queue="q", payload={}, tries=1, timeout=1.0, available_at=now,
                          created_at=now)])
    (res,) = driver.reserve(["q"], 1)
    stand_in = undecodable(id="a", queue="q", attempts=res.attempt, now=now)
    driver.fail(Reservation(stand_in, res.receipt, res.lease_until, b"\xffraw", "not JSON"), "not JSON")
    (failed,) = driver.failed.list()
    assert (failed.name, failed.body, failed.error) == ("<undecodable>", b"\xffraw", "not JSON")
    assert driver.failed.retry("all") == 0, "a body that never was a job is not put back to fail again"
    assert driver.failed.count() == 1 and pending(driver, "q") == 0
