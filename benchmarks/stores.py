"""The servers the benchmarks use, and how each library's store is emptied without touching anyone else's.

Every library gets a store of its own: a database (``jobbridge_bench`` on
PostgreSQL and MariaDB, ``jobbridge_bench_procrastinate``), a SQLite file, or a
Redis DB index (`benchmarks.apps.REDIS_DB`). The harness empties only those:
never the ``test`` databases the test suite uses, never ``FLUSHALL``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

PG = os.environ.get("JB_BENCH_PG", "postgresql://postgres@127.0.0.1:5432").rstrip("/")
MYSQL = os.environ.get("JB_BENCH_MYSQL", "mysql://root@127.0.0.1:3306").rstrip("/")
BENCH_DB = "jobbridge_bench"
PROCRASTINATE_DB = "jobbridge_bench_procrastinate"
#: the amqp driver's shared store (failed jobs, unique locks) in the RabbitMQ benchmark
AMQP_SHARED_DB = "jobbridge_bench_amqp"
SQLITE_FILE = Path(tempfile.gettempdir()) / "jb-bench" / "jobbridge.sqlite3"


def pg_url(database: str = BENCH_DB) -> str:
    return f"{PG}/{database}"


def mysql_url(database: str = BENCH_DB) -> str:
    return f"{MYSQL}/{database}"


def sqlite_url() -> str:
    return f"sqlite:///{SQLITE_FILE}"


def ensure_pg_database(name: str) -> None:
    """Create database ``name`` on the PostgreSQL server unless it exists."""
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True, connect_timeout=5) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not found:
            conn.execute(f'CREATE DATABASE "{name}"')


def ensure_mysql_database(name: str) -> None:
    """Create database ``name`` on the MariaDB/MySQL server unless it exists."""
    import pymysql

    parts = urlsplit(MYSQL)
    conn = pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                           user=parts.username or "root", password=parts.password or "", connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        conn.commit()
    finally:
        conn.close()


def fresh_sqlite() -> None:
    """Remove the benchmark's SQLite file (and its WAL files) so each run starts empty."""
    SQLITE_FILE.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{SQLITE_FILE}{suffix}").unlink(missing_ok=True)


def drop_jobbridge_tables(url: str) -> None:
    """Drop jobbridge's tables in the benchmark database, so that `migrate` creates today's schema.

    Emptying is not enough at the start of a run: a database left by an older
    checkout keeps its older indexes, and the figures would be of that schema.
    """
    import sqlalchemy as sa

    from jobbridge.drivers.database import metadata

    engine = sa.create_engine(_sqlalchemy_url(url))
    try:
        metadata.drop_all(engine)
    finally:
        engine.dispose()


def empty_jobbridge_tables(url: str) -> None:
    """Empty jobbridge's tables (the schema version stays): TRUNCATE on servers, so no dead rows are left
    for the next measurement to skip, as Procrastinate's tables are truncated; DELETE on SQLite."""
    import sqlalchemy as sa

    from jobbridge.drivers.database import metadata

    engine = sa.create_engine(_sqlalchemy_url(url))
    try:
        with engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                if table.name == "jobbridge_schema":
                    continue
                if engine.dialect.name == "sqlite":
                    conn.execute(table.delete())
                else:
                    conn.execute(sa.text(f"TRUNCATE TABLE {table.name}"))
    finally:
        engine.dispose()


def _sqlalchemy_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg",
            "mysql": "mysql+pymysql", "mariadb": "mysql+pymysql"}.get(scheme, scheme) + "://" + rest


def flush_redis_db(url: str) -> None:
    """FLUSHDB on the DB index of ``url`` alone (never FLUSHALL: the server is shared)."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        client.flushdb()
    finally:
        client.close()


def versions() -> list[str]:
    """The servers' versions, for the machine line (a server that does not answer says so)."""
    found = []
    try:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            found.append(f"PostgreSQL {row[0] if row else '?'}")
    except Exception as exc:
        found.append(f"PostgreSQL unavailable ({type(exc).__name__})")
    try:
        import pymysql

        parts = urlsplit(MYSQL)
        conn = pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                               user=parts.username or "root", password=parts.password or "", connect_timeout=3)
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
        conn.close()
        found.append(f"MariaDB/MySQL {row[0] if row else '?'}")
    except Exception as exc:
        found.append(f"MariaDB/MySQL unavailable ({type(exc).__name__})")
    try:
        import redis

        from benchmarks.apps import REDIS

        info = redis.Redis.from_url(REDIS, socket_connect_timeout=3).info("server")
        found.append(f"Redis {info.get('redis_version', '?')}")
    except Exception as exc:
        found.append(f"Redis unavailable ({type(exc).__name__})")
    found.append(_rabbitmq_version())
    return found


def _rabbitmq_version() -> str:
    """RabbitMQ's version, as the node announces it when a connection opens."""
    try:
        import amqp

        from benchmarks.vhosts import RABBIT

        where = urlsplit(RABBIT)
        conn = amqp.Connection(f"{where.hostname or '127.0.0.1'}:{where.port or 5672}",
                               userid=where.username or "guest", password=where.password or "guest",
                               connect_timeout=3)
        conn.connect()
        version = conn.server_properties.get("version", "?")
        conn.close()
        return f"RabbitMQ {version}"
    except Exception as exc:
        return f"RabbitMQ unavailable ({type(exc).__name__})"
