"""The result-store contract on SQLite, PostgreSQL and MariaDB, then what only the database store does.

Each test gets an empty store: a SQLite file in its tmp_path, a fresh PostgreSQL
schema (on the URL's search_path) or a fresh MariaDB database, dropped afterwards.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from jobbridge.drivers.database.engine import parse_url
from jobbridge.errors import ConfigurationError, DriverUnavailable
from jobbridge.results import STARTED, SUCCESS, ResultRecord, open_store
from jobbridge.results import database as results_database
from jobbridge.results.database import DatabaseResultStore, metadata
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.results_contract import WAKE_TIMEOUT, Reopen, ResultStoreContract, StoreUrl
from tests.services import ensure_mariadb, ensure_postgres

DIALECTS = ("sqlite", "postgresql", "mariadb")
TABLES = {"jobbridge_results", "jobbridge_cancelled", "jobbridge_counters"}


@contextmanager
def fresh_database(dialect: str, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty database of the given kind, dropped afterwards."""
    name = f"jbr_{uuid.uuid4().hex[:12]}"
    if dialect == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.sqlite3'}"
        return
    base = ensure_postgres() if dialect == "postgresql" else ensure_mariadb()
    admin = create_engine(parse_url(base), poolclass=NullPool)
    kind = "SCHEMA" if dialect == "postgresql" else "DATABASE"
    with admin.begin() as conn:
        conn.execute(text(f"CREATE {kind} {name}"))
    try:
        if dialect == "postgresql":
            # application_name lets a test find (and cut) exactly this store's connections
            yield f"{base}?options=-csearch_path%3D{name}&application_name={name}"
        else:
            yield f"{base.rsplit('/', 1)[0]}/{name}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP {kind} {name}" + (" CASCADE" if dialect == "postgresql" else "")))
        admin.dispose()


@pytest.fixture(params=DIALECTS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    with fresh_database("postgresql", tmp_path) as url:
        yield url


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


def open_many(url: str, clock: FixedClock) -> Iterator[Reopen]:
    opened: list[DatabaseResultStore] = []

    def reopen() -> DatabaseResultStore:
        opened.append(results_database.open_database_store(url, clock=clock))
        return opened[-1]

    yield reopen
    for store in opened:
        store.close()


class TestDatabaseResultStore(ResultStoreContract):
    """The shared contract, once per dialect."""

    @pytest.fixture
    def store(self, database_url: str, clock: FixedClock) -> Iterator[DatabaseResultStore]:
        store = results_database.open_database_store(database_url, clock=clock)
        yield store
        store.close()

    @pytest.fixture
    def reopen(self, database_url: str, clock: FixedClock) -> Iterator[Reopen]:
        yield from open_many(database_url, clock)

    @pytest.fixture
    def store_url(self, database_url: str) -> StoreUrl:
        return database_url, {}


# -- schema and opening -----------------------------------------------------------------------


def test_the_tables_live_in_their_own_metadata(database_url: str, clock: FixedClock) -> None:
    assert set(metadata.tables) == TABLES
    store = open_store(database_url, clock=clock)
    try:
        assert isinstance(store, DatabaseResultStore)
        assert set(inspect(store.engine).get_table_names()) >= TABLES
        assert "jobbridge_jobs" not in inspect(store.engine).get_table_names()
    finally:
        store.close()


def test_migrate_false_creates_nothing_and_bad_settings_fail(database_url: str, clock: FixedClock) -> None:
    store = open_store(database_url, clock=clock, migrate=False)
    assert isinstance(store, DatabaseResultStore)
    try:
        assert not TABLES & set(inspect(store.engine).get_table_names())
    finally:
        store.close()
    with pytest.raises(ConfigurationError, match="reconnect"):
        open_store(database_url, clock=clock, reconnect=True)


def test_migrations_racing_from_many_threads_all_succeed(database_url: str, clock: FixedClock) -> None:
    store = open_store(database_url, clock=clock, migrate=False)
    assert isinstance(store, DatabaseResultStore)
    errors: list[BaseException] = []
    go = threading.Barrier(4)

    def migrate() -> None:
        go.wait()
        try:
            store.migrate()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert errors == []


def test_an_unreachable_server_is_driver_unavailable(clock: FixedClock) -> None:
    with pytest.raises(DriverUnavailable) as caught:
        open_store("postgresql://postgres@127.0.0.1:1/test", clock=clock)
    assert caught.value.__cause__ is not None
    store = open_store("mysql://root@127.0.0.1:1/test", clock=clock, migrate=False)
    try:
        with pytest.raises(DriverUnavailable):
            store.wait("anything", 0.3)  # gives up at its deadline, never hangs
    finally:
        store.close()


# -- PostgreSQL's wake-up ---------------------------------------------------------------------


def store_later(url: str, now: float, id: str, go: object) -> None:
    """In another process: at the signal, store SUCCESS for ``id``."""
    store = open_store(url, clock=FixedClock(now))
    try:
        assert go.wait(60)  # type: ignore[attr-defined]
        store.store(ResultRecord(id, SUCCESS, result="from afar"), 3600)
    finally:
        store.close()


def counting_reads(store: DatabaseResultStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = store.get

    def get(id: str) -> ResultRecord | None:
        reads.append(id)
        return real(id)

    monkeypatch.setattr(store, "get", get)
    return reads


def test_a_notify_from_another_process_wakes_the_waiter(postgres_url: str, clock: FixedClock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_database, "PG_SAFETY_POLL", 3600.0)  # no polling: only NOTIFY can wake it
    store = results_database.open_database_store(postgres_url, clock=clock)
    reads = counting_reads(store, monkeypatch)
    store.store(ResultRecord("far", STARTED), 3600)
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    child = ctx.Process(target=store_later, args=(postgres_url, clock.now(), "far", go))
    child.start()
    timer = threading.Timer(0.3, go.set)
    timer.start()
    try:
        got = store.wait("far", WAKE_TIMEOUT)
    finally:
        timer.join()
        child.join(30)
        store.close()
    assert got is not None and got.state == SUCCESS and got.result == "from afar"
    assert len(reads) >= 2  # it read, slept, and was woken to read again
    assert child.exitcode == 0


def terminate_backends(url: str) -> int:
    """Cut every connection this URL's stores hold, as a server restart would, and wait until they are gone.

    ``pg_terminate_backend`` returns once the backend is signalled, before it has
    closed its end; a restarted server has closed every one before it serves again,
    so this waits for that too (the pool's check at checkout then finds each closed).
    """
    parsed = parse_url(url)
    admin = create_engine(parsed.set(query={}), poolclass=NullPool)
    try:
        with admin.begin() as conn:
            killed = [pid for pid, cut in conn.execute(text(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"
            ), {"name": parsed.query["application_name"]}) if cut]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with admin.begin() as conn:
                left = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)"),
                                    {"pids": killed}).scalar()
            if not left:
                break
            time.sleep(0.01)
        return len(killed)
    finally:
        admin.dispose()


def test_the_listen_connection_comes_back_after_it_is_cut(postgres_url: str, clock: FixedClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_database, "PG_SAFETY_POLL", 3600.0)
    store = results_database.open_database_store(postgres_url, clock=clock)
    other = results_database.open_database_store(postgres_url, clock=clock)
    try:
        store.store(ResultRecord("cut", STARTED), 3600)
        assert store.wait("cut", 0.1) is not None  # the listener is up
        assert terminate_backends(postgres_url) >= 1
        # the pool finds the connection closed at checkout, so the next command reconnects; the listener by itself
        assert store.get("cut") is not None
        time.sleep(0.2)
        timer = threading.Timer(0.5, lambda: other.store(ResultRecord("cut", SUCCESS, result=1), 3600))
        timer.start()
        got = store.wait("cut", WAKE_TIMEOUT)
        timer.join()
        assert got is not None and got.state == SUCCESS
    finally:
        store.close()
        other.close()


def test_reads_of_many_ids_go_in_chunks(database_url: str, clock: FixedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_database, "CHUNK", 7)
    store = results_database.open_database_store(database_url, clock=clock)
    try:
        ids = [f"id-{i}" for i in range(30)]
        for id in ids[::2]:
            store.store(ResultRecord(id, SUCCESS, result=id), 3600)
        store.cancel(ids[1::2], 3600)
        assert set(store.get_many([*ids, *ids])) == set(ids[::2])
        assert store.cancelled(ids) == set(ids[1::2])
    finally:
        store.close()
