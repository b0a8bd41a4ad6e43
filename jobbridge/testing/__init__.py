"""Testing support: a clock tests fix, the queue fake, and the driver contract suite."""

from jobbridge.testing.clock import FixedClock
from jobbridge.testing.fake import QueueFake, as_fake

__all__ = ["FixedClock", "QueueFake", "as_fake"]
