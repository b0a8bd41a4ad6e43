"""From a jobbridge URL to a SQLAlchemy engine: the DBAPI each dialect uses, and SQLite's pragmas.

``postgresql://`` runs on psycopg 3 and ``mysql://`` / ``mariadb://`` on
PyMySQL (pure Python, no C build); an explicit ``+driver`` in the URL wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry

from jobbridge.drivers.database import aliases, bounds
from jobbridge.drivers.database.settings import SQLITE_BUSY_TIMEOUT, Timeouts
from jobbridge.errors import ConfigurationError, RefusedSetting
from jobbridge.redaction import mask_url, quoted

#: the dialect names the driver speaks, as SQLAlchemy reports them
SQLITE, POSTGRESQL, MYSQL = "sqlite", "postgresql", "mysql"

_DEFAULT_DBAPI = {
    "sqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
}

__all__ = ["MYSQL", "POSTGRESQL", "SQLITE", "SQLITE_BUSY_TIMEOUT", "build_engine", "describe", "parse_url"]


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL for a jobbridge database URL, with the DBAPI jobbridge uses.

    A URL that names a database configured elsewhere (``django://default``) is resolved first.
    """
    url = aliases.resolve(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigurationError(f"the database url {quoted(url)} is not a URL: {mask_url(str(exc))}") from None
    backend, _, dbapi = parsed.drivername.partition("+")
    if backend not in _DEFAULT_DBAPI:
        raise ConfigurationError(
            f"the database driver does not speak {quoted(backend)} (in {quoted(url)}); "
            "use sqlite:///path, postgresql://... or mysql://..."
        )
    drivername = f"{_DEFAULT_DBAPI[backend].split('+')[0]}+{dbapi}" if dbapi else _DEFAULT_DBAPI[backend]
    parsed = parsed.set(drivername=drivername)
    if backend == "sqlite":
        return _sqlite_file(parsed, url)
    if parsed.get_backend_name() == "mysql" and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed


def _sqlite_file(parsed: URL, url: str) -> URL:
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        raise ConfigurationError(
            f"{quoted(url)} is an in-memory SQLite database, private to one connection; "
            "use a file (sqlite:///path/jobs.sqlite3) or the memory:// driver"
        )
    return parsed.set(database=str(Path(database).expanduser().absolute()))


def describe(url: URL) -> str:
    """``sqlite at /abs/path`` or ``postgresql at postgresql://user@host/db``: never a password, even in the query."""
    backend = url.get_backend_name()
    if backend == SQLITE:
        return f"sqlite at {url.database}"
    public = url.set(drivername=backend)._replace(password=None)
    return f"{backend} at {mask_url(public.render_as_string(hide_password=True))}"


def build_engine(url: URL, timeouts: Timeouts | None = None) -> Engine:
    """An engine for the driver: pre-pinged pools for servers, WAL and explicit BEGINs for SQLite.

    ``timeouts`` are the connection's as written (`jobbridge.drivers.database.settings`);
    unwritten, each is the default, so no engine built here waits for ever (`bounds`).
    """
    timeouts = timeouts or Timeouts()
    backend = url.get_backend_name()
    if backend == SQLITE:
        if timeouts.connect is not None:
            raise RefusedSetting("connect_timeout", "SQLite is a file on this host: there is no connection to "
                                 "wait for", "nothing; remove it", where=f"the database connection to {describe(url)}")
        return _sqlite_engine(url, timeouts.statement_seconds(sqlite=True))
    # hide_parameters: an error quotes the statement, never the values bound to it (a payload)
    options: dict[str, Any] = {"pool_pre_ping": True, "hide_parameters": True,
                               "connect_args": bounds.connect_args(backend, url.query, timeouts)}
    if backend == MYSQL:
        # READ COMMITTED: a locking read takes no gap locks, so a claim never blocks a push
        options.update(isolation_level="READ COMMITTED", pool_recycle=3600)
    engine = create_engine(url, **options)
    bounds.install(engine, backend, describe(url), timeouts, url.query)
    return engine


def _sqlite_engine(url: URL, busy_timeout: float) -> Engine:
    Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout}, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
        # Take BEGIN away from sqlite3 so that the "begin" hook below decides its kind.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit that returned survives a power cut, as may_lose_an_accepted_job=False says
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: a claim that read under a shared
        # lock and then tried to write could fail with SQLITE_BUSY instead of waiting.
        conn.exec_driver_sql(conn.get_execution_options().get("jobbridge_begin", "BEGIN IMMEDIATE"))

    return engine
