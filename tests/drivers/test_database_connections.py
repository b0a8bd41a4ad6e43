"""The database driver's pooled connections: found dead at checkout, not pinged in use, reset only when needed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.engine import build_engine, hot_engine, parse_url
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope, pending
from tests.drivers.database_servers import DIALECTS, fresh_database, fresh_mariadb, terminate_connections


@pytest.fixture(params=[d for d in DIALECTS if d != "sqlite"])
def server_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


def _server_connections(url: str) -> int:
    """How many connections the server still holds for a driver on ``url`` (as `terminate_connections` finds them)."""
    parsed = parse_url(url)
    admin = create_engine(parsed.set(query={}), poolclass=NullPool)
    try:
        with admin.connect() as conn:
            if parsed.get_backend_name() == "postgresql":
                found = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                                     {"name": parsed.query["application_name"]})
            else:
                found = conn.execute(text("SELECT count(*) FROM information_schema.processlist "
                                          "WHERE db = :db AND id <> CONNECTION_ID()"), {"db": parsed.database})
            return int(found.scalar_one())
    finally:
        admin.dispose()


def _count_pings(engine: Engine, pings: list[object]) -> None:
    ping = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return ping(dbapi_connection)

    engine.dialect.do_ping = counted  # type: ignore[method-assign]


def test_a_connection_the_server_closed_is_replaced_before_the_next_call(server_url: str) -> None:
    driver = DatabaseDriver(server_url, clock=FixedClock())
    driver.migrate()
    driver.push([make_envelope(driver.clock), make_envelope(driver.clock)])
    driver.acknowledge(driver.reserve(["default"], 1))  # both pools now hold a connection
    assert terminate_connections(server_url) >= 1
    for _ in range(200):  # until the server has closed them (pg_terminate_backend only signals)
        if _server_connections(server_url) == 0:
            break
        time.sleep(0.05)
    assert pending(driver, "default") == 1  # no DriverUnavailable: the closed socket was noticed at checkout
    assert len(driver.reserve(["default"], 1)) == 1
    driver.close()


def test_a_connection_in_steady_use_is_not_pinged(server_url: str) -> None:
    driver = DatabaseDriver(server_url, clock=FixedClock())
    driver.migrate()
    driver.push([make_envelope(driver.clock) for _ in range(6)])
    pings: list[object] = []
    _count_pings(driver.engine, pings)
    got = driver.reserve(["default"], 2)
    for _ in range(2):
        got = driver.acknowledge_and_reserve(got, ["default"], 2)
    driver.acknowledge(got)
    assert pending(driver, "default") == 0
    assert pings == []
    driver.close()


def test_sqlite_claims_commit_without_an_fsync_and_everything_else_with_one(tmp_path: Path) -> None:
    url = parse_url(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    engine = build_engine(url)
    hot = hot_engine(url, None, engine)
    levels = {}
    for name, each in (("durable", engine), ("claims", hot)):
        with each.connect() as conn:
            levels[name] = conn.exec_driver_sql("PRAGMA synchronous").scalar_one()
    assert levels == {"durable": 2, "claims": 1}  # FULL, NORMAL
    hot.dispose()
    engine.dispose()


def test_postgresql_claims_commit_without_waiting_for_the_wal(tmp_path: Path) -> None:
    if "postgresql" not in DIALECTS:
        pytest.skip("no PostgreSQL server")
    with fresh_database("postgresql", tmp_path) as raw_url:
        url = parse_url(raw_url)
        engine = build_engine(url)
        hot = hot_engine(url, None, engine)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW synchronous_commit").scalar_one() == "on"
        with hot.connect() as conn:
            assert conn.exec_driver_sql("SHOW synchronous_commit").scalar_one() == "off"
        hot.dispose()
        engine.dispose()


def test_mariadb_rolls_back_a_connection_returned_mid_transaction_and_only_that() -> None:
    if "mariadb" not in DIALECTS:
        pytest.skip("no MariaDB server")
    import pymysql

    with fresh_mariadb() as url:
        driver = DatabaseDriver(url, clock=FixedClock())
        driver.migrate()
        driver.push([make_envelope(driver.clock)])
        raw = driver.engine.raw_connection()  # a transaction left open, its row locked
        cursor = raw.cursor()
        cursor.execute("SELECT id FROM jobbridge_jobs FOR UPDATE")
        cursor.fetchall()
        cursor.close()
        raw.close()
        other = create_engine(parse_url(url), poolclass=NullPool)
        with other.connect() as conn:  # the lock is gone: NOWAIT would fail while it was held
            assert len(conn.exec_driver_sql("SELECT id FROM jobbridge_jobs FOR UPDATE NOWAIT").all()) == 1
        other.dispose()
        rollbacks: list[object] = []
        rollback = pymysql.connections.Connection.rollback

        def counted(self: Any) -> None:
            rollbacks.append(self)
            rollback(self)

        pymysql.connections.Connection.rollback = counted  # type: ignore[method-assign]
        try:
            driver.acknowledge(driver.reserve(["default"], 1))
        finally:
            pymysql.connections.Connection.rollback = rollback  # type: ignore[method-assign]
        assert rollbacks == []  # committed transactions are not rolled back again at check-in
        assert pending(driver, "default") == 0
        driver.close()
