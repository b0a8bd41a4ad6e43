"""The database driver at the edges of what its tables hold (issue 9), on every dialect.

One row with values no dispatch writes must never stop a queue; every outcome
must be storable; a refusal of the data is permanent (`StoreRefused`), never an
outage a caller retries forever; a payload over the documented size is refused
at dispatch; and deadlines are read off the server's clock, whatever this
process's wall clock says.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import exc, insert, select, text

from jobbridge.clock import SYSTEM_CLOCK, StoreClock
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.failures import translated
from jobbridge.drivers.database.limits import ATTEMPTS_CEILING, CUT, ERROR_CHARS, NAME_WIDTH, packet_limit
from jobbridge.drivers.database.schema import failed_jobs, jobs, locks
from jobbridge.drivers.database.server_clock import SERVER_TIME
from jobbridge.envelope import new_id
from jobbridge.errors import DriverUnavailable, PayloadTooLarge, StoreRefused
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope, pending
from tests.drivers.database_servers import DIALECTS, fresh_database


@pytest.fixture(params=DIALECTS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def driver(database_url: str, clock: FixedClock) -> Iterator[DatabaseDriver]:
    driver = DatabaseDriver(database_url, clock=clock)
    driver.migrate()
    yield driver
    driver.close()


def _write_row(driver: DatabaseDriver, clock: FixedClock, body: Any, attempts: int = 0, queue: str = "default",
               name: str = "contract.noop") -> str:
    """A row as a buggy producer or a hand edit leaves it, straight into the jobs table."""
    job_id, now = new_id(), clock.now()
    mark = "?" if driver.engine.dialect.paramstyle == "qmark" else "%s"
    with driver.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO jobbridge_jobs (id, queue, name, body, attempts, available_at, created_at) "
            f"VALUES ({', '.join([mark] * 7)})", (job_id, queue, name, body, attempts, now, now))
    return job_id


# -- one row never blocks a queue ------------------------------------------------------------


@pytest.mark.parametrize("attempts", [ATTEMPTS_CEILING, ATTEMPTS_CEILING - 1, -1, -(2**31)])
def test_an_attempt_count_out_of_range_is_failed_and_the_queue_moves(driver: DatabaseDriver, clock: FixedClock,
                                                                      attempts: int) -> None:
    env = make_envelope(clock)
    bad = _write_row(driver, clock, env.replace(id=new_id()).encode(), attempts=attempts)
    driver.push([make_envelope(clock) for _ in range(3)])
    got = driver.reserve(["default"], 10)
    assert len(got) == 4, "the claim takes the bad row and the good ones beside it"
    (malformed,) = [r for r in got if r.id == bad]
    assert malformed.decode_error is not None and "attempt count" in malformed.decode_error
    assert all(r.decode_error is None and r.attempt == 1 for r in got if r.id != bad)
    driver.fail(malformed, malformed.decode_error)
    with driver.engine.connect() as conn:
        stored = conn.execute(select(failed_jobs.c.attempts, failed_jobs.c.body)).one()
    assert stored.body == env.replace(id=orjson.loads(stored.body)["id"]).encode(), "the body as it was stored"
    assert driver.failed.count() == 1


def test_a_body_of_any_type_sqlite_holds_is_handed_out(tmp_path: Path, clock: FixedClock) -> None:
    driver = DatabaseDriver(f"sqlite:///{tmp_path / 'jobs.sqlite3'}", clock=clock)
    driver.migrate()
    env = make_envelope(clock)
    as_text = _write_row(driver, clock, env.encode().decode())
    as_int = _write_row(driver, clock, 42)
    got = {r.receipt[0]: r for r in driver.reserve(["default"], 10)}
    assert got[as_text].decode_error is None and got[as_text].envelope.payload == env.payload
    reason = got[as_int].decode_error
    assert reason is not None and "int" in reason
    driver.fail(got[as_int], reason)
    (failed,) = driver.failed.list()
    assert failed.body == b"42", "the failed store keeps bytes, whatever the column held"
    driver.close()


# -- every outcome can be stored -------------------------------------------------------------


def test_a_failure_too_long_for_the_failed_store_is_cut_to_fit(driver: DatabaseDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    (res,) = driver.reserve(["default"], 1)
    long = dataclasses.replace(res, envelope=res.envelope.replace(name="n" * 300, queue="q" * 300))
    driver.fail(long, "first line\x00\n" + "e" * (ERROR_CHARS * 3))
    (failed,) = driver.failed.list()
    assert len(failed.name) == NAME_WIDTH and failed.name.endswith(CUT)
    assert len(failed.queue) == NAME_WIDTH and failed.queue.startswith("q")
    assert len(failed.error) <= ERROR_CHARS and failed.error.startswith("first line\ufffd")
    assert orjson.loads(failed.body)["id"] == res.id, "the body is the stored one, in full"
    assert driver.counts() == []


def test_a_unique_key_longer_than_the_column_still_locks(driver: DatabaseDriver) -> None:
    key, other = "k" * 400, "k" * 399 + "j"
    assert driver.locks.acquire(key, "a", 60)
    assert not driver.locks.acquire(key, "b", 60), "one holder"
    assert driver.locks.acquire(other, "b", 60), "two long keys with one start are two locks"
    driver.locks.release(key, "a")
    assert driver.locks.acquire(key, "c", 60)
    with driver.engine.connect() as conn:
        assert max(len(k) for k in conn.execute(select(locks.c.key)).scalars()) <= NAME_WIDTH


def test_a_unique_key_that_is_not_a_string_is_refused_not_raised_raw(driver: DatabaseDriver) -> None:
    with pytest.raises(StoreRefused, match="unique key must be a string"):
        driver.locks.acquire({"k": [1]}, "a", 60)  # type: ignore[arg-type]
    driver.locks.release({"k": [1]}, "a")  # type: ignore[arg-type]  # nothing is held under it: nothing to do


# -- refusals are permanent ------------------------------------------------------------------


@pytest.fixture(params=[d for d in DIALECTS if d != "sqlite"])
def server_driver(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Iterator[DatabaseDriver]:
    with fresh_database(request.param, tmp_path) as url:
        driver = DatabaseDriver(url, clock=clock)
        driver.migrate()
        yield driver
        driver.close()


def test_data_the_server_refuses_is_store_refused(server_driver: DatabaseDriver, clock: FixedClock) -> None:
    with pytest.raises(StoreRefused) as caught:
        server_driver.push([make_envelope(clock, queue="q" * 300)])
    assert not isinstance(caught.value, DriverUnavailable)
    with pytest.raises(StoreRefused), translated("store a row"), server_driver.engine.begin() as conn:
        conn.execute(insert(jobs), {"id": new_id(), "queue": "q", "name": "n", "body": b"{}",
                                    "attempts": 2**40, "available_at": 0.0, "created_at": 0.0})


def test_a_value_the_client_cannot_send_is_store_refused(driver: DatabaseDriver) -> None:
    with pytest.raises(StoreRefused, match="refused"), translated("store a row"), driver.engine.begin() as conn:
        conn.exec_driver_sql("SELECT 1 FROM jobbridge_jobs WHERE id = " + (
            "?" if driver.engine.dialect.paramstyle == "qmark" else "%s"), ({"k": [1]},))


def test_a_packet_too_large_is_refused_not_unavailable() -> None:
    class PacketTooLarge(Exception):
        pass

    too_large = PacketTooLarge(1153, "Got a packet bigger than 'max_allowed_packet' bytes")
    error = exc.OperationalError("INSERT ...", {}, too_large)
    with pytest.raises(StoreRefused), translated("push jobs"):
        raise error


# -- the size limit --------------------------------------------------------------------------


def test_each_dialect_declares_a_size_limit_and_refuses_more(driver: DatabaseDriver, clock: FixedClock) -> None:
    limit = driver.capabilities.max_message_bytes
    assert limit == driver.max_message_bytes and limit is not None
    assert limit == (6 if driver.dialect == "mysql" else 64) * 1024 * 1024
    fits = make_envelope(clock, payload={"blob": "x" * 1000})
    driver.max_message_bytes = len(fits.encode())
    driver.push([fits])
    with pytest.raises(PayloadTooLarge, match=f"at most {len(fits.encode())}"):
        driver.push([make_envelope(clock, payload={"blob": "x" * 1001})])
    assert pending(driver, "default") == 1


def test_the_mariadb_limit_fits_the_server_packet() -> None:
    assert packet_limit(16 * 1024 * 1024) == 6 * 1024 * 1024
    assert packet_limit(64 * 1024 * 1024) == 6 * 1024 * 1024
    assert packet_limit(4 * 1024 * 1024) == (3 * 1024 * 1024) // 2


# -- the server's clock ----------------------------------------------------------------------


def test_deadlines_are_read_off_the_server_clock(database_url: str) -> None:
    driver = DatabaseDriver(database_url, clock=SYSTEM_CLOCK)
    driver.migrate()
    try:
        if driver.dialect == "sqlite":
            assert driver.clock is SYSTEM_CLOCK, "one host, one clock: SQLite keeps the system's"
            return
        assert isinstance(driver.clock, StoreClock)
        with driver.engine.connect() as conn:
            server = float(conn.execute(SERVER_TIME[driver.dialect]).scalar_one())
        # this process's wall clock an hour ahead: the server's clock still sets every deadline
        driver.clock = StoreClock(driver.clock._read, wall=lambda: time.time() + 3600)
        driver.push([make_envelope(FixedClock(time.time() + 3600))])  # "due now" by the skewed clock
        (res,) = driver.reserve(["default"], 1)
        assert abs(res.lease_until - driver.reservation - server) < 60
        with driver.engine.connect() as conn:
            (due,) = conn.execute(text("SELECT available_at FROM jobbridge_jobs")).one()
        assert abs(due - server) < 60, "the pushed available_at was placed on the server's clock"
    finally:
        driver.close()


def test_an_injected_clock_is_kept(database_url: str, clock: FixedClock) -> None:
    driver = DatabaseDriver(database_url, clock=clock)
    assert driver.clock is clock
    driver.close()
