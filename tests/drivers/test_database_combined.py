"""`DatabaseDriver.acknowledge_and_reserve`: a batch's acknowledgement and the next claim, one transaction.

Either both halves are stored or neither: a claim that fails after the
acknowledgement's DELETE leaves the acknowledged jobs held under their receipts
(as a worker killed before its COMMIT would), so nothing is lost either way.

What every such driver must do is `jobbridge.testing.combined_contract`, run by
`TestDatabaseContract`; here, what is the database's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from jobbridge.drivers.database import DatabaseDriver
from jobbridge.errors import DriverUnavailable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.database_servers import DIALECTS, fresh_database

CLOCK = FixedClock()  # never moved: every pushed job is due at once


@pytest.fixture(params=DIALECTS)
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseDriver]:
    with fresh_database(request.param, tmp_path) as url:
        made = DatabaseDriver(url, reservation=30, clock=CLOCK)
        made.migrate()
        yield made
        made.close()


def _push(driver: DatabaseDriver, n: int) -> list[str]:
    envelopes = [make_envelope(CLOCK) for _ in range(n)]
    driver.push(envelopes)
    return [env.id for env in envelopes]


def test_a_failed_claim_takes_the_acknowledgement_back(driver: DatabaseDriver,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _push(driver, 3)
    held = driver.reserve(["default"], 2)

    def claim(*args: Any, **kw: Any) -> Any:  # between the two halves: after the DELETE, before the claim
        raise OperationalError("claim", {}, Exception("the server went away"))

    monkeypatch.setattr(driver, "_claim", claim)
    with pytest.raises(DriverUnavailable):
        driver.acknowledge_and_reserve(held, ["default"], 5)
    monkeypatch.undo()
    assert {r.id for r in driver.extend(held, 30)} == {r.id for r in held}, "still held, under the old receipts"
    (counts,) = driver.counts()
    assert (counts.ready, counts.reserved) == (1, 2)  # and the claim took nothing
