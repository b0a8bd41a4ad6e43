"""One outcome the store refuses never holds the others of its batch, and no store call can end the worker.

`jobbridge.settling`: a batch that fails for any reason but an unreachable
store is stored outcome by outcome; one outcome refused `MAX_REFUSALS` times
running is given up, named in an error, and let go, so that its lease lapses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from jobbridge import signals
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Reservation
from jobbridge.errors import StoreRefused
from jobbridge.settling import MAX_REFUSALS
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.worker import jobs
from tests.worker.conftest import Harness


class RefusesOne(MemoryDriver):
    """Raises ``error`` from ``operation`` whenever the poisoned job is among the reservations."""

    def __init__(self, operation: str, error: Exception, **kw: Any) -> None:
        super().__init__(**kw)
        self.operation, self.error = operation, error
        self.poisoned = ""
        self.refused = 0
        self.extended: list[str] = []

    def _refuse(self, operation: str, reservations: Sequence[Reservation]) -> None:
        if operation == self.operation and any(r.id == self.poisoned for r in reservations):
            self.refused += 1
            raise self.error

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self._refuse("acknowledge", reservations)
        super().acknowledge(reservations)

    def fail(self, reservation: Reservation, error: str) -> None:
        self._refuse("fail", [reservation])
        super().fail(reservation, error)

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        self.extended += [r.id for r in reservations]
        return super().extend(reservations, seconds)


@pytest.fixture
def failures() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def record(sender: object, **kw: Any) -> None:
        seen.append(kw)

    signals.queue_operation_failed.connect(record)
    yield seen
    signals.queue_operation_failed.disconnect(record)


@pytest.mark.parametrize(("operation", "error"), [
    ("fail", StoreRefused("Data too long for column 'name'")),
    ("fail", TypeError("a client refused a value")),  # no DriverError at all: a driver's bug
    ("acknowledge", StoreRefused("value out of range")),
])
def test_the_refused_outcome_is_given_up_and_the_rest_of_its_batch_is_stored(
        harness: Harness, clock: FixedClock, caplog: pytest.LogCaptureFixture, failures: list[dict[str, Any]],
        operation: str, error: Exception) -> None:
    driver = RefusesOne(operation, error, clock=clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(6))
    poisoned = bridge.dispatch(jobs.Fails() if operation == "fail" else jobs.Noop(n=99), tries=1)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(6, 12))
    assert poisoned is not None
    driver.poisoned = poisoned
    caplog.set_level(logging.WARNING, logger="jobbridge.worker")

    stats = harness.start(harness.worker(bridge, concurrency=4, stop_when_empty=True)).join()  # never froze

    assert stats.processed == 13
    assert sorted(n for kind, n in jobs.RAN if kind == "noop" and n != 99) == list(range(12))
    assert pending(driver, "default") == 1, "the other outcomes were stored; only the refused one is left"
    assert driver.refused >= MAX_REFUSALS, "tried alone (and in the batches it came in) up to the bound"
    (gave_up,) = [r for r in caplog.records if r.levelno == logging.ERROR and "gave up" in r.getMessage()]
    assert poisoned in gave_up.getMessage() and type(error).__name__ in gave_up.getMessage()
    assert [f["operation"] for f in failures].count(f"settle job {poisoned}") == MAX_REFUSALS, "then given up"
    (counts,) = driver.counts()
    assert counts.reserved == 1, "let go without an outcome: its reservation is left to lapse"
    clock.advance(61)
    assert driver.reclaim_expired() == 1, "no longer renewed: it lapsed, and comes back as a new attempt"


class RaisesFromTheStore(MemoryDriver):
    """A driver whose calls raise exceptions that are no `DriverError` (a client's, a bug's) now and then."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.left = {"reserve": 2, "acknowledge": 1, "reclaim": 1}

    def _maybe(self, operation: str) -> None:
        if self.left[operation] > 0:
            self.left[operation] -= 1
            raise TypeError(f"{operation}: an unwrapped client error")

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        self._maybe("reserve")
        return super().reserve(queues, limit, wait=wait)

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self._maybe("acknowledge")
        super().acknowledge(reservations)

    def reclaim_expired(self) -> int:
        self._maybe("reclaim")
        return super().reclaim_expired()


def test_an_exception_from_the_store_that_is_no_store_error_is_logged_and_handled_like_one(
        harness: Harness, clock: FixedClock, caplog: pytest.LogCaptureFixture,
        failures: list[dict[str, Any]]) -> None:
    driver = RaisesFromTheStore(clock=clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(10))
    caplog.set_level(logging.WARNING, logger="jobbridge.worker")
    worker = harness.worker(bridge, stop_when_empty=True, sleep=0.01)
    stats = harness.start(worker).join()
    assert (stats.succeeded, worker.exit_code) == (10, 0)
    assert sorted(n for _, n in jobs.RAN) == list(range(10)), "every job ran once"
    assert pending(driver, "default") == 0
    # the acknowledge refused once: of a batch ("settle") or of a lone outcome ("settle job <id>")
    assert sorted(f["operation"].split()[0] for f in failures) == ["reclaim", "reserve", "reserve", "settle"]
    assert all(isinstance(f["exception"], TypeError) for f in failures)
    logged = [r for r in caplog.records if r.levelno == logging.ERROR and "no store error" in r.getMessage()]
    assert len(logged) == 4 and all(r.exc_info is not None for r in logged), "each with its traceback"
