"""The pytest plugin (entry point ``pytest11``): fixtures for testing code that dispatches jobs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobbridge.app import JobBridge
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.fake import QueueFake


@pytest.fixture
def jobbridge_clock() -> FixedClock:
    """A fixed clock; advance it past delays and leases instead of sleeping."""
    return FixedClock()


@pytest.fixture
def queue_fake() -> Iterator[QueueFake]:
    """A `QueueFake` wrapping a bridge of its own on the memory settings; register your jobs on it.

    To record what an app's own bridge is asked to push, wrap that one instead:
    ``QueueFake(myapp.bridge)``, put where the code under test finds its bridge.
    """
    fake = QueueFake()
    yield fake
    fake.bridge.close()


@pytest.fixture
def jobbridge_memory(jobbridge_clock: FixedClock) -> Iterator[JobBridge]:
    """A real `JobBridge` on the memory driver and the fixed clock: dispatch, then `run_pending()`."""
    settings = Settings.from_mapping({"driver": "memory"})
    driver = MemoryDriver(reservation=settings.connection().reservation, clock=jobbridge_clock)
    bridge = JobBridge(settings, clock=jobbridge_clock, drivers={settings.default_connection: driver})
    yield bridge
    bridge.close()
