"""Testing support: a clock that tests fix, the queue fake and the driver contract."""

from jobbridge.testing.clock import FixedClock

__all__ = ["FixedClock"]
