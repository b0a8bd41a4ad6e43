"""PostgreSQL's claims from the last claimed row (`jobbridge.drivers.database.claim_marks`), on a real server.

Each test has a schema of its own (`fresh_postgres`) and a driver on a fixed
clock. What is checked: a row that is due but sorts behind the mark (dispatched
with a time already past) is still claimed, in claim order, as soon as a claim
from the mark comes up short, and within `FULL_SCAN_EVERY` while a backlog
keeps every claim full; and a claim from the mark reads a handful of index
pages where a claim from the start walks the dead entries of every row claimed
before it (autovacuum is off on the test's table, so none is cleaned meanwhile).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pytest
from sqlalchemy import event, text

from jobbridge.drivers.database import DatabaseDriver, hot_sql
from jobbridge.drivers.database.claim_marks import FULL_SCAN_EVERY, FromLastClaim
from jobbridge.drivers.database.claims import claim_postgres
from jobbridge.envelope import Envelope, Reservation
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.database_servers import fresh_postgres, migrated_driver


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def driver(clock: FixedClock) -> Iterator[DatabaseDriver]:
    with fresh_postgres() as url, migrated_driver(url, clock) as made:
        yield made


def ids(reservations: Sequence[Reservation]) -> list[str]:
    return [r.envelope.id for r in reservations]


def queued(clock: FixedClock, n: int) -> list[Envelope]:
    return [make_envelope(clock) for _ in range(n)]


def test_a_due_row_behind_the_mark_is_claimed_when_the_claim_from_the_mark_comes_up_short(
        driver: DatabaseDriver, clock: FixedClock) -> None:
    first = queued(clock, 10)
    driver.push(first)
    assert ids(driver.reserve(["default"], 4)) == [e.id for e in first[:4]]  # the mark: the 4th row
    late = make_envelope(clock, delay=-3600)  # due an hour ago: sorts before every row claimed
    driver.push([late])
    got = driver.reserve(["default"], 10)
    assert ids(got) == [late.id, *(e.id for e in first[4:])]  # all seven, in claim order
    assert driver.reserve(["default"], 10) == []


def test_while_a_backlog_lasts_a_row_behind_the_mark_waits_at_most_the_full_scan_interval(
        driver: DatabaseDriver, clock: FixedClock) -> None:
    ticks = [0.0]
    driver._claim = FromLastClaim(claim_postgres, monotonic=lambda: ticks[0])
    backlog = queued(clock, 30)
    driver.push(backlog)
    assert ids(driver.reserve(["default"], 5)) == [e.id for e in backlog[:5]]  # a scan from the start
    late = make_envelope(clock, delay=-3600)
    driver.push([late])
    ticks[0] += FULL_SCAN_EVERY / 2
    assert ids(driver.reserve(["default"], 5)) == [e.id for e in backlog[5:10]]  # from the mark: full
    ticks[0] += FULL_SCAN_EVERY / 2
    got = ids(driver.reserve(["default"], 5))  # the interval passed: from the start again
    assert got == [late.id, *(e.id for e in backlog[10:14])]


def test_a_claim_from_the_mark_skips_the_dead_entries_a_claim_from_the_start_walks(
        driver: DatabaseDriver, clock: FixedClock) -> None:
    with driver.engine.begin() as conn:
        conn.execute(text("ALTER TABLE jobbridge_jobs SET (autovacuum_enabled = false)"))
    driver.push(queued(clock, 4000))
    for _ in range(60):  # 3,000 claimed and acknowledged: as many dead entries at the index's front
        driver.acknowledge(driver.reserve(["default"], 50))
    [last] = driver.reserve(["default"], 1)
    mark = (last.envelope.available_at, last.envelope.id)
    from_start = pages_read(driver, hot_sql.postgres_claim(forget=False, cancels=False, after_mark=False),
                            ("default", clock.now() + 1, 50, "t", clock.now() + 60))
    from_mark = pages_read(driver, hot_sql.postgres_claim(forget=False, cancels=False, after_mark=True),
                           ("default", clock.now() + 1, *mark, 50, "t", clock.now() + 60))
    assert from_mark * 5 < from_start, (from_mark, from_start)


def pages_read(driver: DatabaseDriver, sql: str, params: tuple[object, ...]) -> int:
    """The shared buffers the claim's ready-row index scan touched (EXPLAIN ANALYZE, rolled back)."""
    with driver.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        with raw.cursor() as cur:
            cur.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql.replace('%b', '%s')}", params)
            plan = "\n".join(row[0] for row in cur.fetchall())
        raw.rollback()
    scan = plan[plan.index("Index Scan using jobbridge_jobs_unreserved"):]
    found = re.search(r"Buffers: shared hit=(\d+)", scan)
    assert found is not None, plan
    return int(found.group(1))


def test_a_queue_with_a_trickle_of_jobs_claims_in_one_statement_per_reserve(
        driver: DatabaseDriver, clock: FixedClock) -> None:
    statements: list[str] = []
    event.listen(driver._statements, "before_cursor_execute",
                 lambda conn, cursor, sql, params, context, many: statements.append(sql))
    for _ in range(3):  # each reserve asks for more than is there: no mark kept, so no second scan
        job = make_envelope(clock)
        driver.push([job])
        statements.clear()
        assert ids(driver.reserve(["default"], 10)) == [job.id]
        assert len([sql for sql in statements if "FOR UPDATE SKIP LOCKED" in sql]) == 1, statements
