"""The result-store contract on the memory store, and `open_store`'s choice of backend."""

from __future__ import annotations

import pytest

from jobbridge.errors import ConfigurationError
from jobbridge.results import ResultStore, open_store
from jobbridge.results.memory import MemoryResultStore
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.results_contract import ResultStoreContract


class TestMemoryResultStore(ResultStoreContract):
    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def store(self, clock: FixedClock) -> ResultStore:
        return open_store("memory://", clock=clock)


def test_open_store_picks_memory(fixed_clock: FixedClock) -> None:
    store = open_store("memory://", clock=fixed_clock)
    assert isinstance(store, MemoryResultStore) and store.clock is fixed_clock


def test_an_unknown_scheme_names_the_ones_that_work(fixed_clock: FixedClock) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store("amqp://localhost", clock=fixed_clock)
    message = str(caught.value)
    assert "'amqp'" in message
    for scheme in ("memory://", "sqlite://", "postgresql://", "mysql://", "mariadb://", "redis://", "rediss://"):
        assert scheme in message
    with pytest.raises(ConfigurationError, match="scheme ''"):
        open_store("no-scheme", clock=fixed_clock)


def test_the_memory_store_takes_no_settings(fixed_clock: FixedClock) -> None:
    with pytest.raises(ConfigurationError, match="reconnect"):
        open_store("memory://", clock=fixed_clock, reconnect=True)
