"""A database connection's settings: the keys it accepts and the ones it refuses.

`SCHEMA` is the one declaration of them, read by the boot-time checks
(`jobbridge.settings`) and by `jobbridge.drivers.database.open`. This module
imports neither SQLAlchemy nor a database client, so a configuration is checked
without loading either.

``url`` is a SQLAlchemy-style URL (``sqlite:///...``, ``postgresql://...``,
``mysql://...`` or ``mariadb://...``); unset, the settings layer gives the
embedded SQLite file, and a relative SQLite path is made absolute there, so
every process agrees on one file. ``reservation`` is the lease in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobbridge.errors import ConfigurationError
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, within

_TABLES = "jobbridge_jobs, jobbridge_failed_jobs, jobbridge_locks and jobbridge_schema"

SCHEMA = DriverSchema(
    fields={
        "url": Field("url", schemes=("sqlite", "postgresql", "postgres", "mysql", "mariadb")),
        "reservation": RESERVATION,
    },
    refused={
        "table": Refusal(
            f"the database driver's tables are fixed: {_TABLES}",
            "nothing; create them with `jobbridge migrate` (or include jobbridge's metadata in Alembic)",
        ),
        "failed_table": Refusal(f"the failed store is always jobbridge_failed_jobs (tables: {_TABLES})",
                                "nothing; `jobbridge migrate` creates it"),
        "retry_after": Refusal(
            "a reservation is a lease the worker renews by heartbeat, so a long job is never run twice",
            "reservation = <seconds the lease lasts between heartbeats, 60 by default>",
        ),
        "visibility_timeout": Refusal("the database driver's lease is called reservation", "reservation = <seconds>"),
        "after_commit": Refusal(
            "the database driver joins your transaction instead of waiting for it to commit",
            "bridge.dispatch(job, transaction=conn) with your SQLAlchemy Connection or Session",
        ),
        "connection": Refusal(
            "the driver connects by URL; connection names belong to the [connections] section",
            "url = 'postgresql://user@host/db'",
        ),
        "dsn": Refusal("the database driver takes a SQLAlchemy-style URL", "url = 'postgresql://user@host/db'"),
        "queue": Refusal(
            "the default queue is a job option, not a connection setting",
            "queue= on the job (or the worker's --queue list)",
        ),
        "block_for": Refusal(
            "PostgreSQL wakes idle workers by LISTEN/NOTIFY; SQLite and MariaDB are polled",
            "the worker's sleep setting (--sleep)",
        ),
    },
    store_keys=("url",),
    lock_store=True,
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused


def parse_settings(settings: Mapping[str, Any]) -> tuple[str, float]:
    """The URL and the reservation of a connection's settings; a missing URL is a boot failure naming it."""
    url = settings.get("url")
    if not url:
        raise ConfigurationError("the database driver needs a url: set JOBBRIDGE_DATABASE_URL or url = '...'")
    reservation = float(settings.get("reservation", SCHEMA.default("reservation")))
    if not within(SCHEMA.fields["reservation"], reservation):
        raise ConfigurationError(f"reservation must be a positive number of seconds, not {reservation}")
    return str(url), reservation
