"""The database driver reads a database result store's cancellations in its claims (`ReadsCancellations`).

A cancellation that landed before a job was reserved still stops it: the claim
(plain, or folded into an acknowledgement) reads ``jobbridge_cancelled`` in its
own statement and marks the reservation ``cancelled``, and the worker, which then
makes no lookup of its own per batch, acknowledges it unrun. On every dialect.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.cancellations import database_of
from jobbridge.drivers.database.engine import parse_url
from jobbridge.drivers.database.hot_sql import CANCELLED_TABLE
from jobbridge.results.celery_database import open_celery_database_store
from jobbridge.results.database import DatabaseResultStore, open_database_store
from jobbridge.results.tables import cancelled
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import ReadsCancellationsContract, make_envelope
from tests.drivers.cancellation_checks import check_a_cancelled_job_is_acknowledged_unrun
from tests.drivers.database_servers import DIALECTS, fresh_database

CLOCK = FixedClock()  # never moved: every pushed job is due at once


@pytest.fixture(params=DIALECTS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as made:
        yield made


@pytest.fixture
def driver(url: str) -> Iterator[DatabaseDriver]:
    made = DatabaseDriver(url, reservation=30, clock=CLOCK)
    made.migrate()
    yield made
    made.close()


def _store(url: str, clock: FixedClock = CLOCK, *, migrate: bool = True) -> DatabaseResultStore:
    return open_database_store(url, clock=clock, migrate=migrate)


def _push(driver: DatabaseDriver, n: int) -> list[str]:
    envelopes = [make_envelope(CLOCK) for _ in range(n)]
    driver.push(envelopes)
    return [env.id for env in envelopes]


def test_the_sql_names_the_result_stores_table() -> None:
    assert cancelled.name == CANCELLED_TABLE


class TestReadsCancellations(ReadsCancellationsContract):
    """The shipped suite, on each dialect; the driver's fixture is this module's."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return CLOCK

    @pytest.fixture
    def cancelling_store(self, url: str, store_clock: FixedClock) -> Iterator[DatabaseResultStore]:
        store = _store(url, store_clock)
        yield store
        store.close()


def test_the_waiting_reserve_marks_the_cancelled_jobs(driver: DatabaseDriver, url: str) -> None:
    store = _store(url)
    assert driver.read_cancellations(store)
    ids = _push(driver, 2)
    store.cancel([ids[1]], 60)
    got = driver.reserve(["default"], 5, wait=1.0)  # PostgreSQL's waiting reserve claims the same way
    assert [(r.id, r.cancelled) for r in got] == [(ids[0], False), (ids[1], True)]
    (counts,) = driver.counts()
    assert (counts.ready, counts.reserved) == (0, 2)
    store.close()


def test_without_the_store_the_claims_mark_nothing(driver: DatabaseDriver, url: str) -> None:
    store = _store(url)
    (job_id,) = _push(driver, 1)
    store.cancel([job_id], 60)
    (res,) = driver.reserve(["default"], 1)
    assert not res.cancelled, "left to the worker's own lookup"
    assert store.cancelled([job_id]) == {job_id}
    store.close()


def test_a_store_on_another_database_is_not_read(driver: DatabaseDriver, tmp_path: Path) -> None:
    dialect = "postgresql" if driver.dialect == "postgresql" else "mariadb" if driver.dialect == "mysql" else "sqlite"
    with fresh_database(dialect, tmp_path / "other") as other:
        (tmp_path / "other").mkdir(exist_ok=True)
        store = _store(other)
        assert not driver.read_cancellations(store)
        assert not driver.read_cancellations(object())
        (job_id,) = _push(driver, 1)
        store.cancel([job_id], 60)
        (res,) = driver.reserve(["default"], 1)
        assert not res.cancelled
        store.close()


def test_a_store_whose_tables_are_missing_is_not_read(driver: DatabaseDriver, url: str) -> None:
    store = _store(url, migrate=False)
    assert not driver.read_cancellations(store), "a claim would fail on the missing table"
    _push(driver, 1)
    assert len(driver.reserve(["default"], 1)) == 1
    store.close()


def test_a_store_wrapping_one_is_not_read(driver: DatabaseDriver, url: str) -> None:
    store = open_celery_database_store(url, clock=CLOCK)
    assert not driver.read_cancellations(store), "its lookup is its own to define"
    store.close()


def test_a_database_is_told_by_file_server_user_and_search_path(tmp_path: Path) -> None:
    same = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    assert database_of(parse_url(same)) == database_of(parse_url(f"sqlite:///{tmp_path / 'x' / '..' / 'a.sqlite3'}"))
    assert database_of(parse_url(same)) != database_of(parse_url(f"sqlite:///{tmp_path / 'b.sqlite3'}"))
    pg = "postgresql://u@127.0.0.1/test"
    assert database_of(parse_url(pg)) == database_of(parse_url("postgresql://u:secret@127.0.0.1:5432/test"))
    for other in ("postgresql://u@127.0.0.1/other", "postgresql://u@127.0.0.1:5433/test",
                  "postgresql://v@127.0.0.1/test", "postgresql://u@127.0.0.1/test?options=-csearch_path%3Ds",
                  "mysql://u@127.0.0.1/test"):
        assert database_of(parse_url(pg)) != database_of(parse_url(other)), other


def test_a_worker_acknowledges_a_job_cancelled_before_its_reserve_unrun(url: str) -> None:
    check_a_cancelled_job_is_acknowledged_unrun({"driver": "database", "database_url": url})
