"""The database driver on SQLite, PostgreSQL and MariaDB: the contract, then what only it promises."""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, insert, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from jobbridge.drivers import Resources, load
from jobbridge.drivers.database import REFUSED, SETTINGS, DatabaseDriver, metadata, open
from jobbridge.drivers.database.engine import parse_url
from jobbridge.drivers.database.failures import is_deadlock
from jobbridge.drivers.database.migrations import recorded_version
from jobbridge.drivers.database.schema import SCHEMA_VERSION, jobs, schema_versions
from jobbridge.envelope import Envelope, new_id
from jobbridge.errors import ConfigurationError, DriverError, DriverUnavailable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import (
    AcknowledgingReserveContract,
    DriverContract,
    FailedStoreContract,
    LockStoreContract,
    make_envelope,
    pending,
)
from tests.drivers import database_workers
from tests.drivers.database_servers import DIALECTS, fresh_database, fresh_postgres, terminate_connections


@pytest.fixture(params=DIALECTS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture(scope="module", params=DIALECTS)
def migrated_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated store per dialect for every `driver` test of the module, emptied after each.

    Creating and migrating a database for each test cost more than most tests (about 0.2 s on
    MariaDB); a test that needs a database no driver has touched takes ``database_url`` instead.
    """
    with fresh_database(str(request.param), tmp_path_factory.mktemp(str(request.param))) as url:
        yield url


def empty(driver: DatabaseDriver) -> None:
    """Every row a test left deleted, and the schema back at `SCHEMA_VERSION`: as freshly migrated."""
    with driver.engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            statement = table.delete()
            if table is schema_versions:
                statement = statement.where(schema_versions.c.version > SCHEMA_VERSION)
            conn.execute(statement)
    assert recorded_version(driver.engine) == SCHEMA_VERSION


@pytest.fixture
def driver(migrated_url: str, clock: FixedClock) -> Iterator[DatabaseDriver]:
    driver = DatabaseDriver(migrated_url, reservation=DriverContract.RESERVATION, clock=clock)
    driver.migrate()
    assert driver.counts() == [] and driver.failed.count() == 0, "the store starts empty"
    yield driver
    try:
        empty(driver)
    finally:
        driver.close()


class TestDatabaseContract(DriverContract, FailedStoreContract, LockStoreContract, AcknowledgingReserveContract):
    """The shared contract, all three suites, once per dialect (the ``driver`` fixture above is parametrised)."""

    def inject_undecodable(self, driver: DatabaseDriver, queue: str, body: bytes) -> None:
        now = driver.clock.now()
        with driver.engine.begin() as conn:
            conn.execute(insert(jobs), {"id": new_id(), "queue": queue, "name": "raw", "body": body,
                                        "attempts": 0, "available_at": now, "created_at": now})


def test_a_stale_receipt_touches_nothing(driver: DatabaseDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    (stale,) = driver.reserve(["default"], 1)
    clock.advance(DriverContract.RESERVATION + 1)
    assert driver.reclaim_expired() == 1
    (fresh,) = driver.reserve(["default"], 1)
    driver.acknowledge([stale])
    driver.release(stale, 0)
    driver.fail(stale, "too late")
    assert driver.failed.count() == 0
    assert driver.reserve(["default"], 1) == []
    assert driver.extend([stale, fresh], 30) == [dataclasses.replace(fresh, lease_until=clock.now() + 30)]
    driver.acknowledge([fresh])
    assert pending(driver, "default") == 0


def test_acknowledge_mixes_batches_from_several_reserves(driver: DatabaseDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock) for _ in range(4)])
    first = driver.reserve(["default"], 2)
    second = driver.reserve(["default"], 2)
    assert first[0].receipt[1] != second[0].receipt[1]
    driver.acknowledge(first + second)
    assert pending(driver, "default") == 0


def test_attempts_column_is_authoritative(driver: DatabaseDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock, attempts=2)])
    (res,) = driver.reserve(["default"], 1)
    assert res.attempt == 3
    driver.fail(res, "x")
    (failed,) = driver.failed.list()
    assert failed.attempts == 3
    driver.failed.retry(failed.id)
    assert driver.reserve(["default"], 1)[0].attempt == 1


def test_retry_keeps_an_undecodable_body_as_it_was(driver: DatabaseDriver, clock: FixedClock) -> None:
    TestDatabaseContract().inject_undecodable(driver, "default", b"{broken")
    (res,) = driver.reserve(["default"], 1)
    assert res.decode_error and res.envelope.queue == "default"
    driver.fail(res, res.decode_error)
    assert driver.failed.retry("all") == 1
    (again,) = driver.reserve(["default"], 1)
    assert again.body == b"{broken" and again.id == res.id


def test_retry_all_moves_more_than_one_batch(driver: DatabaseDriver, clock: FixedClock,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jobbridge.drivers.database.failed.RETRY_BATCH", 3)
    driver.push([make_envelope(clock) for _ in range(7)])
    for res in driver.reserve(["default"], 7):
        driver.fail(res, "x")
    assert driver.failed.retry("all") == 7
    assert driver.failed.count() == 0 and pending(driver, "default") == 7


# -- transactional push ------------------------------------------------------


def test_push_joins_a_connection_that_commits(driver: DatabaseDriver, clock: FixedClock) -> None:
    engine = create_engine(driver.url)
    with engine.connect() as conn:
        driver.push([make_envelope(clock)], transaction=conn)
        assert pending(driver, "default") == 0, "visible before the caller committed"
        conn.commit()
    engine.dispose()
    assert len(driver.reserve(["default"], 5)) == 1


def test_push_joins_a_connection_that_rolls_back(driver: DatabaseDriver, clock: FixedClock) -> None:
    engine = create_engine(driver.url)
    with engine.connect() as conn:
        driver.push([make_envelope(clock) for _ in range(3)], transaction=conn)
        conn.rollback()
    engine.dispose()
    assert pending(driver, "default") == 0


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_push_joins_a_session(driver: DatabaseDriver, clock: FixedClock, outcome: str) -> None:
    engine = create_engine(driver.url)
    with Session(engine) as session:
        driver.push([make_envelope(clock)], transaction=session)
        assert pending(driver, "default") == 0
        getattr(session, outcome)()
    engine.dispose()
    assert pending(driver, "default") == (1 if outcome == "commit" else 0)


def test_push_refuses_what_is_not_a_transaction(driver: DatabaseDriver, clock: FixedClock) -> None:
    with pytest.raises(TypeError, match="Connection or Session"):
        driver.push([make_envelope(clock)], transaction=object())


def test_push_refuses_a_transaction_on_another_database(tmp_path: Path, clock: FixedClock) -> None:
    driver = DatabaseDriver(f"sqlite:///{tmp_path / 'jobs.sqlite3'}", clock=clock)
    other = create_engine(f"sqlite:///{tmp_path / 'app.sqlite3'}")
    with other.connect() as conn, pytest.raises(ValueError, match="driver's own database"):
        driver.push([make_envelope(clock)], transaction=conn)
    other.dispose()
    driver.close()


# -- several processes -------------------------------------------------------


def _spawn(target: Any, args_for: Any, n: int) -> list[Any]:
    """Run ``n`` processes that start together; return what each put on the queue."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_for(i), start, out)) for i in range(n)]
    for proc in procs:
        proc.start()
    results: list[Any] = []
    deadline = time.monotonic() + 120
    while len(results) < n and time.monotonic() < deadline:
        try:
            results.append(out.get(timeout=0.5))
        except queue.Empty:
            if not any(proc.is_alive() for proc in procs):
                break
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0, f"a worker process failed (exit code {proc.exitcode})"
    assert len(results) == n
    return results


def _live_clock() -> FixedClock:
    # the child processes run on the real clock, so these jobs must be due by it
    return FixedClock(time.time() - 1)


@pytest.mark.slow
def test_processes_reserving_together_never_share_a_job(database_url: str) -> None:
    driver = DatabaseDriver(database_url)
    driver.migrate()
    envs = [make_envelope(_live_clock(), payload={"n": i}) for i in range(1200)]
    driver.push(envs)
    handed = _spawn(database_workers.drain, lambda i: (database_url, 10), 4)
    ids = [job_id for seen in handed for job_id in seen]
    assert len(ids) == len(set(ids)), "a job was handed out twice"
    assert set(ids) == {e.id for e in envs}
    assert pending(driver, "default") == 0
    driver.close()


@pytest.mark.slow
@pytest.mark.parametrize("expired_row", [False, True])
def test_processes_racing_for_a_lock_leave_one_winner(database_url: str, expired_row: bool) -> None:
    driver = DatabaseDriver(database_url, clock=FixedClock(time.time() - 1000))
    driver.migrate()
    if expired_row:
        assert driver.locks.acquire("race", "long-gone", 1)
    results = _spawn(database_workers.race_for_lock, lambda i: (database_url, "race", f"p{i}"), 4)
    winners = [owner for owner, won in results if won]
    assert len(winners) == 1, f"winners: {winners}"
    with driver.engine.connect() as conn:
        assert conn.execute(text("SELECT owner FROM jobbridge_locks")).scalar_one() == winners[0]
    driver.close()


# -- PostgreSQL's wake-up call -------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_postgres() as url:
        yield url


def _reserve_in_thread(driver: DatabaseDriver, wait: float) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        began = time.monotonic()
        result["got"] = driver.reserve(["default"], 1, wait=wait)
        result["took"] = time.monotonic() - began

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def test_a_waiting_reserve_wakes_when_another_connection_pushes(pg_url: str, clock: FixedClock) -> None:
    waiter = DatabaseDriver(pg_url, clock=clock)
    waiter.migrate()
    pusher = DatabaseDriver(pg_url, clock=clock)
    assert waiter.capabilities.blocking_reserve
    thread, result = _reserve_in_thread(waiter, wait=30)
    time.sleep(0.5)  # let it find the table empty and start waiting
    env = make_envelope(clock)
    pusher.push([env])
    thread.join(timeout=40)
    assert [r.id for r in result["got"]] == [env.id]
    # wide, for a busy machine: the wait is 30 s, so anything well under it woke on the notification
    assert result["took"] < 15, f"woke after {result['took']:.2f} s, not on the notification"
    waiter.close()
    pusher.close()


def test_a_waiting_reserve_returns_empty_when_nothing_comes(pg_url: str, clock: FixedClock) -> None:
    driver = DatabaseDriver(pg_url, clock=clock)
    driver.migrate()
    began = time.monotonic()
    assert driver.reserve(["default"], 1, wait=0.3) == []
    assert time.monotonic() - began >= 0.3
    driver.close()


def test_the_listen_connection_comes_back_after_it_drops(pg_url: str, clock: FixedClock) -> None:
    driver = DatabaseDriver(pg_url, clock=clock)
    driver.migrate()
    driver.reserve(["default"], 1, wait=0.05)  # opens the LISTEN connection
    assert terminate_connections(pg_url) >= 1
    time.sleep(1.0)  # the thread notices within its poll interval and reconnects
    thread, result = _reserve_in_thread(driver, wait=8)
    time.sleep(0.5)
    pusher = DatabaseDriver(pg_url, clock=clock)
    pusher.push([make_envelope(clock)])
    thread.join(timeout=15)
    assert len(result["got"]) == 1 and result["took"] < 4
    pusher.close()
    driver.close()


def test_only_postgresql_blocks_in_reserve(driver: DatabaseDriver) -> None:
    blocking = driver.dialect == "postgresql"
    assert driver.capabilities.blocking_reserve is blocking
    began = time.monotonic()
    driver.reserve(["default"], 1, wait=0.0 if blocking else 5)
    assert time.monotonic() - began < 2


# -- connections lost and refused -------------------------------------------------


@pytest.fixture(params=[d for d in DIALECTS if d != "sqlite"])
def server_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


def test_a_dropped_connection_is_replaced(server_url: str, clock: FixedClock) -> None:
    driver = DatabaseDriver(server_url, clock=clock)
    driver.migrate()
    driver.push([make_envelope(clock)])
    assert terminate_connections(server_url) >= 1
    try:
        assert pending(driver, "default") == 1  # pre-ping found the dead connection and replaced it
    except DriverUnavailable:
        assert pending(driver, "default") == 1  # or it said so, and the next call works
    assert len(driver.reserve(["default"], 1)) == 1
    driver.close()


@pytest.mark.parametrize("url", [
    "postgresql://postgres@127.0.0.1:1/test",
    "mysql://root@127.0.0.1:1/test",
])
def test_a_server_that_is_not_there_is_unavailable(url: str) -> None:
    driver = DatabaseDriver(url)
    with pytest.raises(DriverUnavailable) as caught:
        pending(driver, "default")
    assert caught.value.__cause__ is not None
    with pytest.raises(DriverUnavailable):
        open({"url": url}, Resources())


def test_a_constraint_violation_is_a_driver_error(driver: DatabaseDriver, clock: FixedClock) -> None:
    env = make_envelope(clock)
    driver.push([env])
    with pytest.raises(DriverError) as caught:
        driver.push([env])
    assert not isinstance(caught.value, DriverUnavailable)


# -- schema ------------------------------------------------------------------------


def test_migrate_twice_is_harmless_and_records_the_version(driver: DatabaseDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    driver.migrate()
    driver.migrate()
    assert recorded_version(driver.engine) == SCHEMA_VERSION == 6
    with driver.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema_versions)).scalar_one() == 1
    assert pending(driver, "default") == 1


def test_a_newer_schema_is_refused(driver: DatabaseDriver) -> None:
    with driver.engine.begin() as conn:
        conn.execute(insert(schema_versions), {"version": SCHEMA_VERSION + 1, "applied_at": 0.0})
    with pytest.raises(DriverError, match="upgrade jobbridge"):
        driver.migrate()


def test_metadata_names_the_fixed_tables() -> None:
    assert set(metadata.tables) == {"jobbridge_jobs", "jobbridge_failed_jobs", "jobbridge_locks",
                                    "jobbridge_schedules", "jobbridge_rate_buckets", "jobbridge_workers",
                                    "jobbridge_throughput", "jobbridge_schema"}


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    driver = open({"url": f"sqlite:///{tmp_path / 'sub' / 'jobs.sqlite3'}"}, Resources())
    with driver.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert driver.describe() == f"sqlite at {tmp_path / 'sub' / 'jobs.sqlite3'}"
    driver.close()


# -- settings and URLs ------------------------------------------------------------------


def test_the_module_follows_the_driver_convention(tmp_path: Path) -> None:
    module = load("database")
    assert module.SETTINGS == SETTINGS == {"url", "reservation", "connect_timeout", "statement_timeout"}
    for key, (why, instead, _) in REFUSED.items():
        assert key not in SETTINGS and why and instead
    assert {"table", "retry_after", "after_commit", "connection"} <= set(REFUSED)
    clock = FixedClock()
    driver = module.open({"url": f"sqlite:///{tmp_path / 'j.sqlite3'}", "reservation": 90},
                         Resources(clock=clock))
    assert isinstance(driver, DatabaseDriver) and driver.reservation == 90 and driver.clock is clock
    driver.close()


@pytest.mark.parametrize("settings, message", [
    ({}, "JOBBRIDGE_DATABASE_URL"),
    ({"url": "sqlite://"}, "in-memory"),
    ({"url": "sqlite:///:memory:"}, "in-memory"),
    ({"url": "oracle://x@y/z"}, "does not speak"),
    ({"url": "sqlite:///x.db", "reservation": 0}, "positive"),
])
def test_bad_settings_fail_at_open(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        open(settings, Resources())


@pytest.mark.parametrize("url, drivername", [
    ("postgresql://u@h/db", "postgresql+psycopg"),
    ("postgres://u@h/db", "postgresql+psycopg"),
    ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2"),
    ("mysql://u@h/db", "mysql+pymysql"),
    ("mariadb://u@h/db", "mysql+pymysql"),
    ("sqlite:///jobs.db", "sqlite"),
])
def test_urls_pick_the_dbapi(url: str, drivername: str) -> None:
    assert parse_url(url).drivername == drivername


def test_describe_never_shows_the_password() -> None:
    driver = DatabaseDriver("postgresql://app:s3cret@db.example:5432/app")
    assert driver.describe() == "postgresql at postgresql://app@db.example:5432/app"
    assert "s3cret" not in repr(driver)
    driver.close()


def test_an_envelope_round_trips_every_field(driver: DatabaseDriver, clock: FixedClock) -> None:
    env = make_envelope(clock, queue="mail", unique_key="k", unique_for=30.0, headers={"trace": "t"})
    driver.push([env])
    (res,) = driver.reserve(["mail"], 1)
    assert res.envelope == env.replace(attempts=1)
    assert isinstance(res.envelope, Envelope)


def test_every_worker_reclaiming_at_once_reclaims_each_job_once(driver: DatabaseDriver,
                                                                clock: FixedClock) -> None:
    driver.push([make_envelope(clock) for _ in range(200)])
    assert len(driver.reserve(["default"], 200)) == 200
    clock.advance(DriverContract.RESERVATION + 1)
    counts: list[int] = []
    start = threading.Barrier(4)

    def reclaim() -> None:
        start.wait()
        counts.append(driver.reclaim_expired())

    threads = [threading.Thread(target=reclaim) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 200
    again = driver.reserve(["default"], 500)
    assert len(again) == 200 and {r.attempt for r in again} == {2}


def test_only_a_deadlock_victim_is_run_again() -> None:
    class PgError(Exception):
        sqlstate = "40P01"

    deadlocked = [OperationalError("UPDATE", {}, PgError()),
                  OperationalError("UPDATE", {}, Exception(1213, "Deadlock found"))]
    assert all(is_deadlock(error) for error in deadlocked)
    assert not is_deadlock(OperationalError("UPDATE", {}, Exception(2003, "Can't connect")))


def test_migrations_racing_from_several_drivers_all_succeed(database_url: str) -> None:
    drivers = [DatabaseDriver(database_url) for _ in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(drivers))

    def migrate(driver: DatabaseDriver) -> None:
        start.wait()
        try:
            driver.migrate()
        except BaseException as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=migrate, args=(d,)) for d in drivers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert recorded_version(drivers[0].engine) == SCHEMA_VERSION
    with drivers[0].engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema_versions)).scalar_one() == 1
    for driver in drivers:
        driver.close()
