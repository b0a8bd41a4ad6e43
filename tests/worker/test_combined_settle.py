"""With acknowledgements to store and room to reserve, the worker does both in one transaction.

`Worker._settle` calls `AcknowledgingReserve.acknowledge_and_reserve` on a driver
that offers it (the database driver). Either both halves commit or neither: a
failure between them leaves the finished jobs held, the next try acknowledges
them the plain way, and the jobs the claim would have taken are reserved later.
No job is lost and none runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from jobbridge import signals
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.envelope import Reservation
from tests.worker.conftest import Harness, drain_noops

JOBS = 120


class Counting(DatabaseDriver):
    """Counts the worker's acknowledging calls; ``break_claims`` fails that many combined calls between halves."""

    def __init__(self, url: str, **kw: Any) -> None:
        super().__init__(url, **kw)
        self.calls = {"acknowledge": 0, "acknowledge_and_reserve": 0}
        self.break_claims = 0
        self._combining = False
        plain_claim = self._claim

        def claim(conn: Any, **kw: Any) -> Any:
            if self._combining and self.break_claims:
                self.break_claims -= 1
                raise OperationalError("claim", {}, Exception("the connection dropped"))
            return plain_claim(conn, **kw)

        self._claim = claim

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self.calls["acknowledge"] += 1
        super().acknowledge(reservations)

    def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        self.calls["acknowledge_and_reserve"] += 1
        self._combining = True
        try:
            return super().acknowledge_and_reserve(reservations, queues, limit, meanwhile)
        finally:
            self._combining = False


@pytest.fixture
def driver(tmp_path: Path, harness: Harness) -> Iterator[Counting]:
    made = Counting(f"sqlite:///{tmp_path / 'jobs.sqlite3'}", reservation=60, clock=harness.clock)
    made.migrate()
    yield made
    made.close()


def _drain(harness: Harness, driver: Counting) -> None:
    drain_noops(harness, driver, JOBS)


def test_the_combined_path_is_taken(harness: Harness, driver: Counting) -> None:
    _drain(harness, driver)
    assert driver.calls["acknowledge_and_reserve"] > 0


def test_a_failure_between_the_halves_loses_nothing(harness: Harness, driver: Counting) -> None:
    driver.break_claims = 3
    failed: list[str] = []

    def record(sender: object, **kw: Any) -> None:
        failed.append(kw["operation"])

    signals.queue_operation_failed.connect(record)
    try:
        _drain(harness, driver)
    finally:
        signals.queue_operation_failed.disconnect(record)
    assert driver.break_claims == 0 and failed.count("acknowledge and reserve") == 3
    assert driver.calls["acknowledge"] >= 3, "after each failure, the plain acknowledgement"
