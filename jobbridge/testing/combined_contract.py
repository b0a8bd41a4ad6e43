"""`AcknowledgingReserveContract`: the optional suite of a driver that acknowledges and reserves in one call.

A driver that offers `jobbridge.drivers.base.AcknowledgingReserve` stores a
batch's acknowledgements and claims the next jobs in one round trip (one
transaction, one script). The worker then relies on both halves doing exactly
what `acknowledge` and `reserve` do alone: the acknowledged jobs are gone for
good, the claimed ones are held under fresh leases, no room means the
acknowledgements are stored alone, and nothing to acknowledge means a plain
reserve, and ``meanwhile`` runs once in every call. Its own module so that
`jobbridge.testing.contract` stays the import point without growing past one
screen per suite.
"""

from __future__ import annotations

from jobbridge.drivers.base import AcknowledgingReserve, Driver
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract_support import ContractHelpers


class AcknowledgingReserveContract(ContractHelpers):
    """``acknowledge_and_reserve``, optional: what `acknowledge` then `reserve` would do, in one call."""

    def test_declares_the_port(self, driver: Driver) -> None:
        assert isinstance(driver, AcknowledgingReserve)

    def test_acknowledges_and_reserves_in_one_call(self, driver: Driver, clock: FixedClock) -> None:
        assert isinstance(driver, AcknowledgingReserve)
        ids = {env.id for env in self.push(driver, clock, 5)}
        first = driver.reserve(["default"], 2)
        more = driver.acknowledge_and_reserve(first, ["default"], 2)
        assert len({r.id for r in first + more} & ids) == 4
        assert all(r.envelope.attempts == 1 for r in more)
        (counts,) = driver.counts()
        assert (counts.ready, counts.reserved) == (1, 2)  # the first two are gone for good
        assert driver.extend(first, self.RESERVATION) == []
        assert {r.id for r in driver.extend(more, self.RESERVATION)} == {r.id for r in more}

    def test_no_room_acknowledges_alone_and_nothing_to_acknowledge_reserves(self, driver: Driver,
                                                                          clock: FixedClock) -> None:
        assert isinstance(driver, AcknowledgingReserve)
        self.push(driver, clock, 3)
        held = driver.reserve(["default"], 1)
        assert driver.acknowledge_and_reserve(held, ["default"], 0) == []
        assert len(driver.acknowledge_and_reserve([], ["default"], 5)) == 2
        (counts,) = driver.counts()
        assert (counts.ready, counts.reserved) == (0, 2)


    def test_runs_meanwhile_once_and_does_what_the_combined_call_does(self, driver: Driver,
                                                                     clock: FixedClock) -> None:
        assert isinstance(driver, AcknowledgingReserve)
        ids = {env.id for env in self.push(driver, clock, 5)}
        ran: list[str] = []
        first = driver.acknowledge_and_reserve([], ["default"], 2, lambda: ran.append("reserve"))
        more = driver.acknowledge_and_reserve(first, ["default"], 2, lambda: ran.append("both"))
        assert ran == ["reserve", "both"]
        assert len({r.id for r in first + more} & ids) == 4
        (counts,) = driver.counts()
        assert (counts.ready, counts.reserved) == (1, 2)  # the first two are gone for good
        assert {r.id for r in driver.extend(more, self.RESERVATION)} == {r.id for r in more}
