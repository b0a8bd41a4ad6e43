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
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from jobbridge.drivers.database import aliases, bounds, liveness
from jobbridge.drivers.database.failures import COMMITTED
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

__all__ = ["MYSQL", "POSTGRESQL", "SQLITE", "SQLITE_BUSY_TIMEOUT", "build_engine", "describe", "hot_engine",
           "parse_url"]


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


def build_engine(url: URL, timeouts: Timeouts | None = None, *, durable: bool = True) -> Engine:
    """An engine for the driver: dropped server connections replaced at checkout (`liveness`); WAL for SQLite.

    ``timeouts`` are the connection's as written (`jobbridge.drivers.database.settings`);
    unwritten, each is the default, so no engine built here waits for ever (`bounds`).
    ``durable=False`` is for the worker's claims and acknowledgements only (`hot_engine`).
    """
    timeouts = timeouts or Timeouts()
    backend = url.get_backend_name()
    if backend == SQLITE:
        if timeouts.connect is not None:
            raise RefusedSetting("connect_timeout", "SQLite is a file on this host: there is no connection to "
                                 "wait for", "nothing; remove it", where=f"the database connection to {describe(url)}")
        return _sqlite_engine(url, timeouts.statement_seconds(sqlite=True), "FULL" if durable else "NORMAL")
    # hide_parameters: an error quotes the statement, never the values bound to it (a payload)
    options: dict[str, Any] = {"hide_parameters": True,
                               "connect_args": bounds.connect_args(backend, url.query, timeouts)}
    if backend == MYSQL:
        # READ COMMITTED: a locking read takes no gap locks, so a claim never blocks a push;
        # the pool's ROLLBACK at check-in only after anything but a commit (`reset_unless_committed`)
        options.update(isolation_level="READ COMMITTED", pool_recycle=3600, pool_reset_on_return=None)
    engine = create_engine(url, **options)
    if backend == MYSQL:
        event.listen(engine, "reset", reset_unless_committed)
    liveness.install(engine)  # a dropped connection is replaced at checkout, as pool_pre_ping would
    if backend == POSTGRESQL and not durable:
        event.listen(engine, "connect", _commit_without_waiting)
    bounds.install(engine, backend, describe(url), timeouts, url.query)
    return engine


def hot_engine(url: URL, timeouts: Timeouts | None, engine: Engine) -> Engine:
    """The engine a worker's claims and acknowledgements run on, beside ``engine`` (everything else's).

    Losing one of those commits to a power cut or an OS crash loses no job: an
    acknowledgement undone runs its job again, as after a worker killed before
    it acknowledged, and a claim undone leaves its jobs to be claimed again. So
    their commit does not wait for the disk: SQLite with ``synchronous=NORMAL``,
    PostgreSQL with ``synchronous_commit = off``, each statement in autocommit
    (`claims.claim_postgres`). A later durable commit (a dispatch: ``FULL``, or
    PostgreSQL's default) flushes the log with everything written before it, so
    nothing a dispatch committed is ever behind one of these. MariaDB's flush
    is the server's setting alone: there the engine is ``engine`` itself.
    """
    backend = url.get_backend_name()
    if backend == SQLITE:
        return build_engine(url, timeouts, durable=False)
    if backend == POSTGRESQL:
        return build_engine(url, timeouts, durable=False).execution_options(isolation_level="AUTOCOMMIT")
    return engine


def reset_unless_committed(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry,
                           state: PoolResetState) -> None:
    """A MariaDB connection back in the pool: roll back, unless its last act was a commit or a rollback.

    The pool's own reset rolls back at every check-in, and PyMySQL sends that
    ``ROLLBACK`` to the server even when no transaction is open: a round trip
    after every committed write, a fifth of a worker's per-batch round trips.
    `failures.write_transaction` marks a connection whose transaction it
    committed; SQLAlchemy says when its own close rolled back. Any other
    connection (a failed commit, a raw one) is rolled back as before.
    """
    committed = record.info.pop(COMMITTED, False)
    if not (committed or state.transaction_was_reset):
        dbapi_connection.rollback()


def _commit_without_waiting(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("SET synchronous_commit = off")
    cursor.close()
    dbapi_connection.commit()  # a SET in a transaction rolled back would be undone with it


def _sqlite_engine(url: URL, busy_timeout: float, synchronous: str) -> Engine:
    Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout}, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
        # Take BEGIN away from sqlite3 so that the "begin" hook below decides its kind.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit that returned survives a power cut, as may_lose_an_accepted_job=False says
        # (NORMAL only on `hot_engine`'s connections)
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: a claim that read under a shared
        # lock and then tried to write could fail with SQLITE_BUSY instead of waiting.
        conn.exec_driver_sql(conn.get_execution_options().get("jobbridge_begin", "BEGIN IMMEDIATE"))

    return engine
