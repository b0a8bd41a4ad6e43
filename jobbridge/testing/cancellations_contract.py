"""`ReadsCancellationsContract`: the optional suite of a driver that reads cancellations in its reserve.

A driver that offers `jobbridge.drivers.base.ReadsCancellations` marks each
reservation whose job the result store had cancelled when it was reserved,
and the worker then makes no cancellation lookup of its own per batch: a
reserve that missed one would run a cancelled job. The suite asks for one
fixture beside ``driver`` and ``clock``: ``cancelling_store``, a result store
the driver can read (on the same server and database) whose clock is the
suite's ``store_clock``, never the driver's: a cancellation lapses by the
store's clock, as the store's own lookup judges it.
"""

from __future__ import annotations

import pytest

from jobbridge.drivers.base import AcknowledgingReserve, Driver, ReadsCancellations
from jobbridge.results.base import ResultStore
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract_support import ContractHelpers


class ReadsCancellationsContract(ContractHelpers):
    """``read_cancellations``, optional: every way of reserving marks what was cancelled, nothing else."""

    @pytest.fixture
    def store_clock(self) -> FixedClock:
        """The result store's clock (``cancelling_store`` is built on it), apart from the driver's."""
        return FixedClock()

    def test_each_way_of_reserving_marks_the_cancelled_jobs(self, driver: Driver, clock: FixedClock,
                                                           cancelling_store: ResultStore) -> None:
        assert isinstance(driver, ReadsCancellations) and driver.read_cancellations(cancelling_store)
        ids = [env.id for env in self.push(driver, clock, 4)]
        cancelling_store.cancel([ids[1], ids[3]], 60)
        first = driver.reserve(["default"], 2)
        assert [(r.id, r.cancelled) for r in first] == [(ids[0], False), (ids[1], True)]
        if isinstance(driver, AcknowledgingReserve):
            more = driver.acknowledge_and_reserve(first, ["default"], 2)
        else:
            driver.acknowledge(first)
            more = driver.reserve(["default"], 2)
        assert [(r.id, r.cancelled) for r in more] == [(ids[2], False), (ids[3], True)]

    def test_a_lapsed_cancellation_is_not_in_force(self, driver: Driver, clock: FixedClock, store_clock: FixedClock,
                                                   cancelling_store: ResultStore) -> None:
        assert isinstance(driver, ReadsCancellations) and driver.read_cancellations(cancelling_store)
        first, second = (env.id for env in self.push(driver, clock, 2))
        cancelling_store.cancel([first, second], 10)
        store_clock.advance(11)  # the store's clock only: the driver's still says the cancellations hold
        (res,) = driver.reserve(["default"], 1)
        assert (res.id, res.cancelled) == (first, False)
        if isinstance(driver, AcknowledgingReserve):
            (res,) = driver.acknowledge_and_reserve([res], ["default"], 1)
        else:
            (res,) = driver.reserve(["default"], 1)
        assert (res.id, res.cancelled) == (second, False)
        assert cancelling_store.cancelled([first, second]) == set(), "the store's own lookup agrees"

__all__ = ["ReadsCancellationsContract"]
