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
schema version). `metadata` holds them for an app's Alembic. Times are epoch
seconds in DOUBLE columns, read off the server's clock on PostgreSQL and MariaDB
(`server_clock`: every worker on one database agrees on a lease) and off the
host's on SQLite, unless a test injected a clock. An encoded job is at most
`limits.max_message_bytes` (6 MiB on MariaDB, 64 MiB elsewhere).

Settings: `jobbridge.drivers.database.settings` declares them (``SCHEMA``: each
key's type and bounds, and the keys refused with what to write instead). `open`
imports the URL's client library first (psycopg, PyMySQL: a missing one names
the extra to install), creates missing tables (`DatabaseDriver.migrate`), so a
fresh SQLite file works with no setup step, and runs the start-up check
(`DatabaseDriver.check`: on MariaDB, the size limit the server's packet allows)
before the first push. Opened for a command that only reads or repairs a store
(``Resources.create`` false), it creates nothing and refuses a store that is
not there (`opening`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers import lazy_exports
from jobbridge.drivers.database.settings import REFUSED, SETTINGS, parse_settings, parse_timeouts

if TYPE_CHECKING:
    from jobbridge.drivers import Resources
    from jobbridge.drivers.database.driver import DatabaseDriver
    from jobbridge.drivers.database.schema import SCHEMA_VERSION, metadata

__all__ = ["REFUSED", "SCHEMA_VERSION", "SETTINGS", "DatabaseDriver", "metadata", "open"]

# the driver (and SQLAlchemy with it) is imported on first use: the settings above load without it
__getattr__ = lazy_exports(__name__, {"DatabaseDriver": "driver", "SCHEMA_VERSION": "schema", "metadata": "schema"})


def open(settings: Mapping[str, Any], resources: Resources) -> DatabaseDriver:
    """Build the driver from validated settings and create its tables if they are missing.

    With ``resources.create`` false it creates nothing, and a store that is not
    there (no SQLite file, no tables) is an error naming it (`opening`).
    """
    from jobbridge.drivers.database import driver, opening
    from jobbridge.drivers.database.engine import parse_url

    url, reservation = parse_settings(settings)
    parsed = parse_url(url)
    opening.require_client(parsed)
    if not resources.create:
        opening.require_file(parsed)
    opened = driver.DatabaseDriver(url, reservation=reservation, clock=resources.clock,
                                   timeouts=parse_timeouts(settings))
    try:
        if resources.create:
            opened.migrate()
        else:
            opening.require_tables(opened.engine, opened.url)
        opened.check()
    except BaseException:
        opened.close()
        raise
    return opened
