"""The stores' bare-client floors (`benchmarks.store_floor`) drain exactly what was queued and leave nothing behind.

Each floor runs against the real server the suite uses (under CI a missing one
fails the test, `tests.services`), on a table, a stream or a file of its own,
with a count that is not a multiple of the batch so the last, short batch is
claimed too. Only counts are asserted here: the rates belong to the benchmarks.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from benchmarks import store_floor
from benchmarks.common import Options
from benchmarks.report import Row, floor_lines
from tests.services import ensure_mariadb, ensure_postgres, ensure_redis

JOBS = 350


def _name() -> str:
    return f"jb_floor_{uuid.uuid4().hex[:10]}"


def test_redis_drains_every_entry_and_deletes_its_stream() -> None:
    import redis

    url, stream = ensure_redis(), _name()
    done = store_floor.drain_redis(url, JOBS, stream=stream)
    assert done.jobs == JOBS
    client = redis.Redis.from_url(url)
    try:
        assert client.exists(stream) == 0
    finally:
        client.close()


def test_postgres_drains_every_row_and_drops_its_table() -> None:
    import psycopg

    url, table = ensure_postgres(), _name()
    done = store_floor.drain_postgres(url, JOBS, table=table)
    assert done.jobs == JOBS
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,)


def test_mariadb_drains_every_row_and_drops_its_table() -> None:
    import pymysql

    url, table = ensure_mariadb(), _name()
    done = store_floor.drain_mysql(url, JOBS, table=table)
    assert done.jobs == JOBS
    parts = urlsplit(url)
    conn = pymysql.connect(host=parts.hostname, port=parts.port or 3306, user=parts.username or "root",
                           database=parts.path.lstrip("/"))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                        "AND table_name = %s", (table,))
            assert cur.fetchone() == (0,)
    finally:
        conn.close()


def test_sqlite_drains_every_row_and_removes_its_file(tmp_path: Path) -> None:
    path = tmp_path / "floor.sqlite3"
    done = store_floor.drain_sqlite(path, JOBS)
    assert done.jobs == JOBS
    assert sorted(tmp_path.iterdir()) == []


def test_the_row_sits_beside_jobbridges_default_and_the_share_is_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    floor = store_floor.FLOORS["sqlite"]
    monkeypatch.setitem(store_floor.FLOORS, "sqlite", store_floor.Floor(
        floor.library, floor.key, lambda n, limit: store_floor.drain_sqlite(tmp_path / "f.sqlite3", n, limit=limit),
        floor.detail))
    (row,) = store_floor.run("sqlite", Options(jobs=JOBS))
    assert (row.library, row.key, row.jobs, row.error) == ("sqlite3 (bare)", "process-1p", JOBS, "")
    assert store_floor.word("sqlite") == "sqlite3"
    jobbridge = Row("jobbridge (sqlite)", "process-1p", "process, default", jobs=1_000, seconds=1.0)
    quiet = Row("jobbridge (sqlite)", "process-1p-warning", "process, default, -l warning", jobs=1_000, seconds=0.5)
    bare = Row("sqlite3 (bare)", "process-1p", store_floor.SCENARIO, jobs=4_000, seconds=1.0)
    assert floor_lines([jobbridge, quiet, bare]) == [
        "  jobbridge (sqlite) process, default at INFO: 25% of the bare client's limit (1,000 jobs/s against 4,000)"]


def test_a_store_that_fails_gives_a_row_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(count: int, limit: float) -> store_floor.Drained:
        raise ConnectionRefusedError("no server")

    floor = store_floor.FLOORS["redis"]
    monkeypatch.setitem(store_floor.FLOORS, "redis", store_floor.Floor(floor.library, floor.key, refused,
                                                                        floor.detail))
    (row,) = store_floor.run("redis", Options(jobs=JOBS))
    assert row.rate is None and row.error == "ConnectionRefusedError: no server"
