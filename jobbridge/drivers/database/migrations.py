"""``migrate()``: create the tables (and indexes) that are missing and record the schema version, once.

Two processes may migrate at the same moment (two workers booting), so the
work runs under a database-wide lock: PostgreSQL's transaction advisory lock,
MySQL's ``GET_LOCK``, SQLite's write lock (DDL is transactional there).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, func, insert, select, text
from sqlalchemy.exc import DBAPIError

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.error_search import ensure_trigram_index
from jobbridge.drivers.database.schema import SCHEMA_VERSION, failed_jobs, metadata, schema_versions
from jobbridge.errors import DriverError

#: the advisory lock key PostgreSQL migrations serialise on ("jobb" in ASCII)
PG_LOCK_KEY = 0x6A6F6262
MYSQL_LOCK_NAME = "jobbridge_migrate"
MYSQL_LOCK_WAIT = 60


def migrate(engine: Engine, now: float) -> None:
    """Bring the schema to `SCHEMA_VERSION`; a no-op when it is there already.

    An up-to-date schema is told by a read, which takes no lock: on SQLite a first push
    inside a caller's open write transaction must not wait for that very transaction.
    """
    if _up_to_date(engine):
        return
    with _serialised(engine) as conn:
        metadata.create_all(conn, checkfirst=True)
        for index in failed_jobs.indexes:  # version 3's, on a failed store created before them
            index.create(conn, checkfirst=True)
        recorded = conn.execute(select(func.max(schema_versions.c.version))).scalar()
        if recorded is not None and recorded > SCHEMA_VERSION:
            raise DriverError(
                f"the database's jobbridge schema is version {recorded}, newer than this "
                f"jobbridge knows ({SCHEMA_VERSION}): upgrade jobbridge"
            )
        if recorded != SCHEMA_VERSION:
            ensure_trigram_index(conn, failed_jobs.name)  # version 6's; PostgreSQL only, where pg_trgm can be had
            conn.execute(insert(schema_versions), {"version": SCHEMA_VERSION, "applied_at": now})


def _up_to_date(engine: Engine) -> bool:
    """Whether the schema is current, by a read; False also when the read could not be made now
    (SQLite refuses a new connection while another switches a fresh file to WAL), which the
    migration under its lock then settles."""
    try:
        return recorded_version(engine) == SCHEMA_VERSION
    except DBAPIError:
        return False


def recorded_version(engine: Engine) -> int | None:
    """The newest schema version the database records, or None before the first migrate."""
    with engine.connect() as conn:
        conn.execution_options(jobbridge_begin="BEGIN")  # SQLite: a deferred BEGIN, which waits on no writer
        if not engine.dialect.has_table(conn, schema_versions.name):
            return None
        version = conn.execute(select(func.max(schema_versions.c.version))).scalar()
        return int(version) if version is not None else None


@contextmanager
def _serialised(engine: Engine) -> Iterator[Connection]:
    dialect = engine.dialect.name
    if dialect == MYSQL:
        # MySQL commits at every DDL statement, so the lock is the session's, not a transaction's.
        with engine.connect() as conn:
            got = conn.execute(text("SELECT GET_LOCK(:name, :wait)"),
                               {"name": MYSQL_LOCK_NAME, "wait": MYSQL_LOCK_WAIT}).scalar()
            conn.commit()
            if got != 1:
                raise DriverError(f"another process held the migration lock for {MYSQL_LOCK_WAIT} s")
            try:
                with conn.begin():
                    yield conn
            finally:
                conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": MYSQL_LOCK_NAME})
                conn.commit()
        return
    with engine.begin() as conn:
        if dialect == POSTGRESQL:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
        yield conn
