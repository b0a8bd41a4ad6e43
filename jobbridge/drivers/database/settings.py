"""A database connection's settings: the keys it accepts and the ones it refuses.

`SCHEMA` is the one declaration of them, read by the boot-time checks
(`jobbridge.settings`) and by `jobbridge.drivers.database.open`. This module
imports neither SQLAlchemy nor a database client, so a configuration is checked
without loading either.

``url`` is a SQLAlchemy-style URL (``sqlite:///...``, ``postgresql://...``,
``mysql://...`` or ``mariadb://...``); unset, the settings layer gives the
embedded SQLite file, and a relative SQLite path is made absolute there, so
every process agrees on one file. ``reservation`` is the lease in seconds.

Nothing waits forever (docs/configuration.md, "Nothing waits forever"): on
PostgreSQL and MariaDB ``connect_timeout`` (whole seconds, 5 by default) bounds
opening a connection, and ``statement_timeout`` (seconds, 10 by default) one
statement: PostgreSQL enforces it on the server, MariaDB's client waits that
long for an answer (its greeting included). On SQLite, a file on this host,
there is no connection to wait for, so ``connect_timeout`` is refused there,
and ``statement_timeout`` is how long a statement waits for another writer's
lock (30 s unless written). A URL that sets one in its query string
(``?connect_timeout=3``) keeps it; writing it both ways is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jobbridge.errors import ConfigurationError, RefusedSetting
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, within

#: seconds a server connection may take to open, and one statement to be answered, unless written
DEFAULT_CONNECT_TIMEOUT = 5
DEFAULT_STATEMENT_TIMEOUT = 10.0
#: seconds a SQLite statement waits for another writer's lock before "database is locked", unless written
SQLITE_BUSY_TIMEOUT = 30.0
_NO_CONNECTION = Refusal(
    "SQLite is a file on this host: there is no connection to wait for (a statement's wait for "
    "another writer's lock is statement_timeout)", "nothing; remove it")

_TABLES = "jobbridge_jobs, jobbridge_failed_jobs, jobbridge_locks, jobbridge_schedules and jobbridge_schema"


def _on_sqlite(options: Mapping[str, Any]) -> tuple[str, Refusal] | None:
    """``connect_timeout`` on a SQLite URL: a setting nothing would read."""
    on_sqlite = str(options.get("url") or "").lower().startswith("sqlite")
    return ("connect_timeout", _NO_CONNECTION) if on_sqlite and "connect_timeout" in options else None


SCHEMA = DriverSchema(
    fields={
        "url": Field("url", schemes=("sqlite", "postgresql", "postgres", "mysql", "mariadb", "django")),
        "reservation": RESERVATION,
        "connect_timeout": Field("int", least=1, default=DEFAULT_CONNECT_TIMEOUT),
        # None: DEFAULT_STATEMENT_TIMEOUT on a server, SQLITE_BUSY_TIMEOUT on SQLite
        "statement_timeout": Field("float", above=0),
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
    combination=_on_sqlite,
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


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long a connection waits, as written (None: the default for the kind of database).

    Kept apart from the defaults so that SQLite, which has no connection, can
    refuse a written ``connect_timeout`` and still take the server default unwritten.
    """

    connect: int | None = None
    statement: float | None = None

    def connect_seconds(self) -> int:
        return DEFAULT_CONNECT_TIMEOUT if self.connect is None else self.connect

    def statement_seconds(self, sqlite: bool = False) -> float:
        if self.statement is not None:
            return self.statement
        return SQLITE_BUSY_TIMEOUT if sqlite else DEFAULT_STATEMENT_TIMEOUT


def parse_timeouts(settings: Mapping[str, Any]) -> Timeouts:
    """The timeouts a connection's settings write; one written in the URL's query string as well is refused."""
    url = str(settings.get("url") or "")
    query = parse_qs(urlsplit(url).query) if "?" in url else {}
    # PostgreSQL takes a statement timeout as ``options=-c statement_timeout=...``, PyMySQL as read_timeout
    in_url = {"connect_timeout": "connect_timeout" in query,
              "statement_timeout": "read_timeout" in query
              or any("statement_timeout" in v for v in query.get("options", []))}
    for key, twice in in_url.items():
        if twice and settings.get(key) is not None:
            raise RefusedSetting(key, "the URL's query string sets it too, and one of the two would be ignored",
                                 "one of them: the setting, or the URL's parameter", where="a database connection")
    if url.lower().startswith("sqlite") and settings.get("connect_timeout") is not None:
        raise RefusedSetting("connect_timeout", _NO_CONNECTION.why, _NO_CONNECTION.instead,
                             where="a sqlite database connection")
    connect, statement = settings.get("connect_timeout"), settings.get("statement_timeout")
    return Timeouts(None if connect is None else int(connect), None if statement is None else float(statement))

