"""Testing support: a clock tests fix, the queue fake, and the driver contract suite."""

from jobbridge.testing.clock import FixedClock
from jobbridge.testing.fake import QueueFake

__all__ = ["FixedClock", "QueueFake"]
