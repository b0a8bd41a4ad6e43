"""The database driver: jobs in your SQL database, through SQLAlchemy 2 Core.

URL forms:

- ``sqlite:///relative/jobs.sqlite3`` or ``sqlite:////abs/jobs.sqlite3`` — the
  embedded default; WAL mode, a 30 s busy timeout, claims under ``BEGIN IMMEDIATE``;
- ``postgresql://user:pass@host:5432/db`` (also ``postgres://``) — psycopg 3;
  ``FOR UPDATE SKIP LOCKED`` claims; idle workers woken by LISTEN/NOTIFY;
- ``mysql://user:pass@host:3306/db`` or ``mariadb://...`` — PyMySQL; MariaDB
  10.6+ or MySQL 8 (``SKIP LOCKED``); READ COMMITTED sessions.

An explicit ``+driver`` (``postgresql+psycopg2://``) is kept as written.

Storage: ``jobbridge_jobs`` (one row per pushed job, deleted on acknowledge;
``token``/``reserved_until`` set while reserved), ``jobbridge_failed_jobs``,
``jobbridge_locks`` (unique-job locks) and ``jobbridge_schema`` (the recorded
schema version). `metadata` holds them for an app's Alembic. Times are the
driver clock's epoch seconds in DOUBLE columns, never the server's ``NOW()``.

Settings: ``url`` (required; ``JOBBRIDGE_DATABASE_URL``) and ``reservation``
(the lease in seconds, 60 by default). `open` creates missing tables
(`DatabaseDriver.migrate`), so a fresh SQLite file works with no setup step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers.database.driver import DatabaseDriver
from jobbridge.drivers.database.schema import SCHEMA_VERSION, metadata
from jobbridge.errors import ConfigurationError

if TYPE_CHECKING:
    from jobbridge.drivers import Resources

__all__ = ["REFUSED", "SCHEMA_VERSION", "SETTINGS", "DatabaseDriver", "metadata", "open"]

SETTINGS = frozenset({"url", "reservation"})

_TABLES = "jobbridge_jobs, jobbridge_failed_jobs, jobbridge_locks and jobbridge_schema"

REFUSED: Mapping[str, tuple[str, str]] = {
    "table": (
        f"the database driver's tables are fixed: {_TABLES}",
        "nothing; create them with `jobbridge migrate` (or include jobbridge's metadata in Alembic)",
    ),
    "failed_table": (f"the failed store is always jobbridge_failed_jobs (tables: {_TABLES})",
                     "nothing; `jobbridge migrate` creates it"),
    "retry_after": (
        "a reservation is a lease the worker renews by heartbeat, so a long job is never run twice",
        "reservation = <seconds the lease lasts between heartbeats, 60 by default>",
    ),
    "visibility_timeout": ("the database driver's lease is called reservation", "reservation = <seconds>"),
    "after_commit": (
        "the database driver joins your transaction instead of waiting for it to commit",
        "bridge.dispatch(job, transaction=conn) with your SQLAlchemy Connection or Session",
    ),
    "connection": (
        "the driver connects by URL; connection names belong to the [connections] section",
        "url = 'postgresql://user@host/db'",
    ),
    "dsn": ("the database driver takes a SQLAlchemy-style URL", "url = 'postgresql://user@host/db'"),
    "queue": (
        "the default queue is a job option, not a connection setting",
        "queue= on the job (or the worker's --queue list)",
    ),
    "block_for": (
        "PostgreSQL wakes idle workers by LISTEN/NOTIFY; SQLite and MariaDB are polled",
        "the worker's sleep setting (--sleep)",
    ),
}


def open(settings: Mapping[str, Any], resources: Resources) -> DatabaseDriver:
    """Build the driver from validated settings and create its tables if they are missing."""
    url = settings.get("url")
    if not url:
        raise ConfigurationError("the database driver needs a url: set JOBBRIDGE_DATABASE_URL or url = '...'")
    reservation = float(settings.get("reservation", 60))
    if reservation <= 0:
        raise ConfigurationError(f"reservation must be a positive number of seconds, not {reservation}")
    driver = DatabaseDriver(str(url), reservation=reservation, clock=resources.clock)
    try:
        driver.migrate()
    except BaseException:
        driver.close()
        raise
    return driver
