"""MariaDB's claim (`jobbridge.drivers.database.claims.claim_mysql`) when another transaction holds ready rows.

The claim finds the ready ids by a plain read and locks those rows by primary key,
skipping the ones another transaction holds; the rest come from a locking read of
the ready rows. Each test has a database of its own (`fresh_mariadb`); the rows
are held by a PyMySQL connection of the test's own, in an open transaction, as a
claim in flight in another worker holds them. What is checked: the claim still
takes as many rows as it asked for, none of the held ones, in claim order, with
their cancellations read; and, with nothing held, no locking read of the ready
rows' index runs at all. Also that the statement texts built per batch size are
kept in bounded number.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from jobbridge.drivers.database import DatabaseDriver, hot_sql
from jobbridge.drivers.database.schema import jobs
from jobbridge.envelope import Envelope, Reservation
from jobbridge.results.database import open_database_store
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.database_servers import fresh_mariadb, migrated_driver


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_mariadb() as made:
        yield made


@pytest.fixture
def driver(url: str, clock: FixedClock) -> Iterator[DatabaseDriver]:
    with migrated_driver(url, clock) as made:
        yield made


@pytest.fixture
def other(url: str) -> Iterator[Any]:
    """A second session, at READ COMMITTED as the driver's, whose open transaction holds row locks."""
    parts = make_url(url)
    conn = pymysql.connect(host=parts.host, port=parts.port or 3306, user=parts.username or "root",
                           password=parts.password or "", database=parts.database, autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def hold(conn: Any, envelopes: Sequence[Envelope]) -> None:
    """Lock these jobs' rows in ``conn``'s open transaction, as another claim in flight would.

    By primary key, named: on a table of a few rows the optimizer would read the ids off a whole secondary
    index, and that locking read holds every row of the table, not only these.
    """
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {jobs.name} FORCE INDEX (PRIMARY) WHERE id IN "
                    f"({', '.join(['%s'] * len(envelopes))}) FOR UPDATE", [e.id for e in envelopes])
        assert len(cur.fetchall()) == len(envelopes)


def ids(reservations: Sequence[Reservation]) -> list[str]:
    return [r.envelope.id for r in reservations]


def test_rows_another_claim_holds_are_passed_by_and_the_batch_is_filled_from_the_rest(
        driver: DatabaseDriver, clock: FixedClock, other: Any) -> None:
    queued = [make_envelope(clock) for _ in range(12)]
    driver.push(queued)
    held = [queued[0], queued[2], queued[4]]
    hold(other, held)
    got = driver.reserve(["default"], 5)
    # five asked for, none of the held ones, oldest first: 1, 3, then 5, 6, 7 from the locking read
    assert ids(got) == [queued[i].id for i in (1, 3, 5, 6, 7)]
    assert [r.attempt for r in got] == [1] * 5
    other.rollback()  # the other claim ends without taking them: they are ready again, first in line
    assert ids(driver.reserve(["default"], 4)) == [queued[i].id for i in (0, 2, 4, 8)]


def test_when_every_row_found_is_held_the_claim_takes_the_next_ones(
        driver: DatabaseDriver, clock: FixedClock, other: Any) -> None:
    queued = [make_envelope(clock) for _ in range(6)]
    driver.push(queued)
    hold(other, queued[:3])
    assert ids(driver.reserve(["default"], 3)) == [e.id for e in queued[3:]]
    assert driver.reserve(["default"], 3) == []  # the held three are not handed out twice
    (counts,) = driver.counts()
    assert (counts.ready, counts.reserved) == (3, 3)


def test_the_rows_taken_past_held_ones_carry_their_cancellations(
        driver: DatabaseDriver, clock: FixedClock, url: str, other: Any) -> None:
    store = open_database_store(url, clock=clock)
    try:
        assert driver.read_cancellations(store)
        queued = [make_envelope(clock) for _ in range(6)]
        driver.push(queued)
        store.cancel([queued[1].id, queued[4].id], 60)  # one found by the plain read, one past the held row
        hold(other, [queued[0]])
        got = driver.reserve(["default"], 4)
        assert [(r.id, r.cancelled) for r in got] == [
            (queued[1].id, True), (queued[2].id, False), (queued[3].id, False), (queued[4].id, True)]
    finally:
        store.close()


def test_with_nothing_held_no_locking_read_of_the_ready_rows_runs(
        driver: DatabaseDriver, clock: FixedClock) -> None:
    queued = [make_envelope(clock) for _ in range(40)]
    driver.push(queued)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(driver._statements, "before_cursor_execute", seen)  # the claims' own engine
    try:
        first = driver.reserve(["default"], 16)
        second = driver.acknowledge_and_reserve(first, ["default"], 16)
    finally:
        event.remove(driver._statements, "before_cursor_execute", seen)
    assert ids(first) + ids(second) == [e.id for e in queued[:32]]
    assert hot_sql.MYSQL_PICK not in statements
    assert statements.count(hot_sql.MYSQL_READY_IDS) == 2
    assert statements.count(hot_sql.mysql_lock(16, False)) == 2


def test_the_statement_texts_kept_per_batch_size_are_bounded() -> None:
    for count in range(1, 3 * hot_sql.TEXTS_KEPT):
        assert hot_sql.mysql_lock(count, False).count("%s") == count + 2
        hot_sql.mysql_mark(count)
        hot_sql.forget_in("%s", count)
    for built in (hot_sql.mysql_lock, hot_sql.mysql_mark, hot_sql.forget_in):
        assert built.cache_info().currsize <= hot_sql.TEXTS_KEPT
