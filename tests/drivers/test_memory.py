"""The driver contract on the memory driver."""

from __future__ import annotations

import pytest

from jobbridge.drivers.memory import MemoryDriver
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract


class TestMemoryDriver(DriverContract):
    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, clock: FixedClock) -> MemoryDriver:
        return MemoryDriver(reservation=self.RESERVATION, clock=clock)
