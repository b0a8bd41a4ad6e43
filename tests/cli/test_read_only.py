"""Read-only commands read: ``status``, ``failed``, ``retry``, ``flush``, ``purge``, ``reclaim`` never create a store.

Each test runs the real command in a subprocess against a store that is not
there (a SQLite path in a missing directory, the default SQLite file of an
empty directory, a PostgreSQL schema without jobbridge's tables) and checks
that it exits non-zero naming the store and ``jobbridge migrate``, and that
nothing was created. Every command says which store it uses, on stderr.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from jobbridge.drivers.database.engine import parse_url
from tests.cli.support import APP, errors, jobbridge
from tests.drivers.database_servers import fresh_postgres
from tests.services import ensure_redis

READ_ONLY = [["status"], ["failed"], ["failed", "show", "0190-no-such-id"], ["retry", "all"], ["flush", "--yes"],
             ["purge", "default", "--yes"], ["reclaim"]]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda args: " ".join(args))
def test_a_missing_sqlite_file_is_an_error_and_nothing_is_created(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nonexist" / "dir" / "x.db"
    ran = jobbridge(*args, env={"JOBBRIDGE_DATABASE_URL": f"sqlite:///{missing}"}, cwd=tmp_path)
    assert ran.returncode == 1, ran
    (error,) = errors(ran)
    assert f"there is no jobbridge store at sqlite at {missing}" in error and "the file does not exist" in error
    assert "`jobbridge migrate`" in error
    assert "migrate the jobbridge tables" not in ran.stderr  # nothing tried to create it
    assert ran.stderr.splitlines()[0] == f"store: sqlite:///{missing} (connection 'database', database driver)"
    assert not (tmp_path / "nonexist").exists()


def test_with_nothing_configured_status_does_not_create_the_default_file(tmp_path: Path) -> None:
    ran = jobbridge("status", env={}, cwd=tmp_path)
    assert ran.returncode == 1
    assert f"no jobbridge store at sqlite at {tmp_path / 'jobbridge.sqlite3'}" in errors(ran)[0]
    assert list(tmp_path.iterdir()) == []


def test_migrate_creates_the_store_the_read_only_commands_then_read(tmp_path: Path) -> None:
    env = {"JOBBRIDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'new' / 'jobs.db'}"}
    created = jobbridge("migrate", env=env)
    assert created.returncode == 0 and created.stdout.strip() == f"migrated sqlite at {tmp_path / 'new' / 'jobs.db'}"
    assert "store: sqlite:///" in created.stderr
    ran = jobbridge("status", "-A", APP, env=env)
    assert ran.returncode == 0, ran.stderr
    assert [line.split()[0] for line in ran.stdout.splitlines()[3:7]] == ["default", "mail", "reports", "orders"]


def test_a_postgresql_database_without_the_tables_is_not_migrated(tmp_path: Path) -> None:
    with fresh_postgres() as url:
        # trust authentication ignores the password: it is there to be masked
        env = {"JOBBRIDGE_DATABASE_URL": url.replace("postgres@", "postgres:s3cret-pw@", 1)}
        for args in (["status"], ["failed", "--json"], ["purge", "mail", "--yes"]):
            ran = jobbridge(*args, env=env, cwd=tmp_path)
            assert ran.returncode == 1, ran
            (error,) = errors(ran)
            assert "there is no jobbridge store at postgresql at postgresql://postgres@127.0.0.1" in error
            assert "the database has no jobbridge tables" in error and "`jobbridge migrate`" in error
            assert "s3cret-pw" not in ran.stdout + ran.stderr and "postgres:***@" in ran.stderr
            assert "database unavailable while trying to migrate" not in ran.stderr
        engine = create_engine(parse_url(url), poolclass=NullPool)
        try:
            assert inspect(engine).get_table_names() == []
        finally:
            engine.dispose()
        assert jobbridge("migrate", env=env, cwd=tmp_path).returncode == 0
        assert jobbridge("status", env=env, cwd=tmp_path).returncode == 0


def test_status_on_an_empty_redis_writes_no_key(tmp_path: Path) -> None:
    url = ensure_redis()
    prefix = f"jbcli{tmp_path.name[-12:]}:"
    ran = jobbridge("status", "--json", env={"JOBBRIDGE_REDIS_URL": url, "JOBBRIDGE_REDIS_PREFIX": prefix},
                    cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert f"store: {url} (connection 'redis', redis driver)" in ran.stderr
    assert '"failed": 0' in ran.stdout
    client = redis.Redis.from_url(url)
    try:
        assert list(client.scan_iter(match=f"{prefix}*")) == []
    finally:
        client.close()
