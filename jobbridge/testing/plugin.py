"""The pytest plugin (entry point ``pytest11``): fixtures for tests of code that dispatches jobs."""

from __future__ import annotations

import pytest

from jobbridge.testing.clock import FixedClock


@pytest.fixture
def jobbridge_clock() -> FixedClock:
    """A fixed clock; advance it past delays and leases instead of sleeping."""
    return FixedClock()
