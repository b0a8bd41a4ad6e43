"""Schema version 6 on PostgreSQL: the failed store's error text gets a trigram index, or an exact scan.

Where ``pg_trgm`` can be created, ``migrate`` creates it and a GIN index that
the error filter's ``ILIKE`` uses (the plan shows it). Where it cannot (a role
without the CREATE privilege on its database), migrate warns, still records
version 6, and the filter still finds exactly what it should, by a scan.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.engine import parse_url
from jobbridge.drivers.database.error_search import index_name
from jobbridge.drivers.database.migrations import recorded_version
from jobbridge.drivers.database.schema import SCHEMA_VERSION, failed_jobs
from jobbridge.envelope import Envelope
from jobbridge.testing.clock import FixedClock
from tests.drivers.database_servers import fresh_mariadb, fresh_postgres, unique_name
from tests.services import ensure_postgres

INDEX = index_name(failed_jobs.name)


def fail_three(driver: DatabaseDriver) -> list[str]:
    ids = []
    for n, error in enumerate(["ConnectionError: the SMTP server closed", "KeyError: 'customer'",
                               "RareError: the one needle in the store"]):
        env = Envelope.new("x.job", "default", {"n": n}, tries=1, timeout=60, now=driver.clock.now())
        driver.push([env])
        (res,) = driver.reserve(["default"], 1)
        driver.fail(res, error)
        ids.append(env.id)
    return ids


def test_migrate_creates_the_trigram_index_and_the_error_filter_uses_it() -> None:
    with fresh_postgres() as url:
        driver = DatabaseDriver(url, clock=FixedClock())
        try:
            driver.migrate()
            assert recorded_version(driver.engine) == SCHEMA_VERSION == 6
            assert INDEX in {i["name"] for i in inspect(driver.engine).get_indexes(failed_jobs.name)}
            _, _, rare = fail_three(driver)
            assert [job.id for job in driver.failed.list(10, FailedFilter(error="NEEDLE in"))] == [rare]
            with driver.engine.connect() as conn:
                conn.execute(text("SET enable_seqscan = off"))  # three rows: the planner would rather scan
                plan = " ".join(str(row) for row in conn.execute(text(
                    "EXPLAIN SELECT id FROM jobbridge_failed_jobs WHERE error ILIKE '%needle in%' ESCAPE '/'")))
            assert INDEX in plan
        finally:
            driver.close()


@pytest.fixture
def unprivileged() -> Iterator[str]:
    """A URL on a new database, as a role that may create tables but not extensions (no CREATE on the database)."""
    admin = create_engine(parse_url(ensure_postgres()), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    name = unique_name()
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {name} LOGIN"))
        conn.execute(text(f"CREATE DATABASE {name}"))
        conn.execute(text(f"REVOKE CREATE ON DATABASE {name} FROM PUBLIC"))
    owner = create_engine(parse_url(ensure_postgres()).set(database=name), poolclass=NullPool,
                          isolation_level="AUTOCOMMIT")
    with owner.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'")).scalar() == 0
        conn.execute(text(f"GRANT CREATE, USAGE ON SCHEMA public TO {name}"))
    owner.dispose()
    try:
        yield f"postgresql://{name}@127.0.0.1:5432/{name}?application_name={name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
            conn.execute(text(f"DROP ROLE {name}"))
        admin.dispose()


def test_without_the_extension_migrate_warns_and_the_filter_stays_exact(
        unprivileged: str, caplog: pytest.LogCaptureFixture) -> None:
    driver = DatabaseDriver(unprivileged, clock=FixedClock())
    try:
        with caplog.at_level(logging.WARNING, logger="jobbridge.drivers.database"):
            driver.migrate()
        (warning,) = [r.getMessage() for r in caplog.records if "pg_trgm" in r.getMessage()]
        assert "reads every row" in warning and "permission denied" in warning
        assert recorded_version(driver.engine) == SCHEMA_VERSION
        assert INDEX not in {i["name"] for i in inspect(driver.engine).get_indexes(failed_jobs.name)}
        smtp, _, rare = fail_three(driver)
        assert [job.id for job in driver.failed.list(10, FailedFilter(error="needle IN the"))] == [rare]
        assert [job.id for job in driver.failed.list(10, FailedFilter(error="smtp"))] == [smtp]
    finally:
        driver.close()


def test_mariadb_reads_the_newest_in_order_then_scans_the_rest_and_misses_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from jobbridge.drivers.database import failed

    monkeypatch.setattr(failed, "RECENT", 3)
    with fresh_mariadb() as url:
        clock = FixedClock()
        driver = DatabaseDriver(url, clock=clock)
        try:
            driver.migrate()
            errors = ["KeyError: 'needle'", "ValueError", "OSError: NEEDLE", "KeyError", "ValueError: needle",
                      "OSError", "KeyError: Needle"]
            for n, error in enumerate(errors):
                env = Envelope.new("x.job", "q" if n % 2 else "default", {"n": n}, tries=1, timeout=60,
                                   now=clock.now())
                driver.push([env])
                (res,) = driver.reserve([env.queue], 1)
                driver.fail(res, error)
                clock.advance(1)
            every = driver.failed.list(100)
            for where in (FailedFilter(error="needle"), FailedFilter(error="needle", queue="default"),
                          FailedFilter(error="error"), FailedFilter(error="none")):
                expected = [job.id for job in every if where.matches(job)]
                for limit in (1, 2, 3, 4, 100):
                    got = [job.id for job in driver.failed.list(limit, where)]
                    assert got == expected[:limit], (where, limit)
        finally:
            driver.close()


def test_a_shared_store_table_gets_the_index_where_the_extension_is_installed() -> None:
    from sqlalchemy import MetaData

    from jobbridge.drivers.shared.sql_failed import failed_table

    with fresh_postgres() as url:
        driver = DatabaseDriver(url, clock=FixedClock())
        try:
            driver.migrate()  # installs pg_trgm (in schema public, off this test's search path)
            metadata = MetaData()
            table = failed_table(metadata, "jb_test_shared_failed")
            with driver.engine.begin() as conn:
                metadata.create_all(conn)
            assert index_name(table.name) in {i["name"] for i in inspect(driver.engine).get_indexes(table.name)}
        finally:
            driver.close()
