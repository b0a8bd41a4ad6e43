"""A clean database for each database-driver test: a SQLite file, a PostgreSQL schema, a MariaDB database.

Each URL carries an ``application_name`` (PostgreSQL) so that a test can find
and terminate exactly the connections its own driver opened.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from jobbridge.clock import Clock
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.database.engine import parse_url
from tests.services import ensure_mariadb, ensure_postgres

DIALECTS = ("sqlite", "postgresql", "mariadb")


def unique_name() -> str:
    return f"jb_{uuid.uuid4().hex[:12]}"


@contextmanager
def fresh_postgres() -> Iterator[str]:
    """A URL whose search_path is a new, empty schema, dropped afterwards."""
    base = ensure_postgres()
    schema = unique_name()
    admin = create_engine(parse_url(base), poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{base}?options=-csearch_path%3D{schema}&application_name={schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@contextmanager
def fresh_mariadb() -> Iterator[str]:
    """A URL on a new, empty database, dropped afterwards."""
    base = ensure_mariadb()
    database = unique_name()
    admin = create_engine(parse_url(base), poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE {database}"))
    try:
        yield f"{base.rsplit('/', 1)[0]}/{database}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE {database}"))
        admin.dispose()


@contextmanager
def migrated_driver(url: str, clock: Clock) -> Iterator[DatabaseDriver]:
    """A driver on ``url`` with its tables made, closed afterwards."""
    driver = DatabaseDriver(url, clock=clock)
    driver.migrate()
    try:
        yield driver
    finally:
        driver.close()


@contextmanager
def fresh_database(dialect: str, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store of the given kind."""
    if dialect == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    elif dialect == "postgresql":
        with fresh_postgres() as url:
            yield url
    else:
        with fresh_mariadb() as url:
            yield url


def terminate_connections(url: str) -> int:
    """Cut every server connection a driver on ``url`` holds, as a server restart would."""
    parsed = parse_url(url)
    admin = create_engine(parsed.set(query={}), poolclass=NullPool)
    try:
        with admin.begin() as conn:
            if parsed.get_backend_name() == "postgresql":
                name = parsed.query["application_name"]
                found = conn.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"
                ), {"name": name}).all()
                return len(found)
            ids = conn.execute(text(
                "SELECT id FROM information_schema.processlist WHERE db = :db AND id <> CONNECTION_ID()"
            ), {"db": parsed.database}).scalars().all()
            for conn_id in ids:
                conn.execute(text(f"KILL CONNECTION {int(conn_id)}"))
            return len(ids)
    finally:
        admin.dispose()
