"""How long a database server connection waits, and the error that names the store that did not answer.

A server that accepts a connection and never answers (a port that belongs to
something else, a hung server, a proxy in front of a dead one) must fail a call
with `DriverUnavailable` within a bound, never hold a web request, ``jobbridge
status`` or a worker: left alone, psycopg waits 130 s to connect and PyMySQL
waits for an answer for ever. So every server engine is given

- on PostgreSQL, libpq's ``connect_timeout``, and ``SET statement_timeout`` on each
  new connection (a statement, not the ``options`` startup parameter, which
  PgBouncer refuses): the server cancels a statement that runs longer;
- on MariaDB, PyMySQL's ``connect_timeout`` and its ``read_timeout`` and
  ``write_timeout`` (the statement timeout): the client gives up on an answer that
  does not come. PyMySQL reads the server's greeting under ``read_timeout`` too, so
  a silent MariaDB port is noticed after the statement timeout;

unless the URL's query string sets them itself. A ``handle_error`` hook then
turns a failure to connect, and a statement that ran out of time, into
`DriverUnavailable` naming the store (its URL with the password masked) and the
setting to raise. Other errors are left to `jobbridge.drivers.database.failures`,
which names the action that failed.

A connection attempt that timed out is remembered for `FAIL_FAST_SECONDS`: one
more attempt meanwhile fails at once with the same error. A call may open two
(the server's clock is sampled first, `jobbridge.clock.StoreClock`, then the
statement runs), and the bound is one wait, not two.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine.interfaces import DBAPIConnection, ExceptionContext
from sqlalchemy.pool import ConnectionPoolEntry

from jobbridge.drivers.database.settings import Timeouts
from jobbridge.errors import DriverUnavailable
from jobbridge.redaction import mask_url

_POSTGRESQL, _MYSQL = "postgresql", "mysql"
_KIND = {_POSTGRESQL: "PostgreSQL", _MYSQL: "MariaDB or MySQL"}
#: PostgreSQL's query_canceled, which a statement_timeout raises; MySQL's "lost connection during query"
_PG_CANCELED = "57014"
_MYSQL_LOST = 2013
#: how long after a connection attempt timed out another one fails at once, with the same error
FAIL_FAST_SECONDS = 1.0


def connect_args(backend: str, query: Mapping[str, Any], timeouts: Timeouts) -> dict[str, Any]:
    """What the DBAPI's ``connect()`` is given besides the URL: each timeout the URL does not set itself."""
    wanted: dict[str, Any] = {}
    if backend == _POSTGRESQL:
        wanted = {"connect_timeout": timeouts.connect_seconds()}
    elif backend == _MYSQL:
        statement = timeouts.statement_seconds()
        wanted = {"connect_timeout": timeouts.connect_seconds(), "read_timeout": statement,
                  "write_timeout": statement}
    return {key: value for key, value in wanted.items() if key not in query}


def install(engine: Engine, backend: str, store: str, timeouts: Timeouts, query: Mapping[str, Any]) -> None:
    """Give ``engine`` its statement timeout (PostgreSQL) and the errors that name ``store``."""
    options = query.get("options", "")
    if backend == _POSTGRESQL and "statement_timeout" not in str(options):
        millis = max(1, math.ceil(timeouts.statement_seconds() * 1000))

        @event.listens_for(engine, "connect")
        def _statement_timeout(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"SET statement_timeout = {millis}")
            cursor.close()
            dbapi_connection.commit()  # a SET in a transaction rolled back would be undone with it

    unanswered = Unanswered(backend, store, _as_in_effect(timeouts, backend, query))
    event.listen(engine, "handle_error", unanswered)
    event.listen(engine, "do_connect", unanswered.before_connecting)


def _as_in_effect(timeouts: Timeouts, backend: str, query: Mapping[str, Any]) -> Timeouts:
    """The timeouts the client works with: a URL's own ``connect_timeout`` (MariaDB: ``read_timeout``) wins."""
    def number(key: str) -> float | None:
        try:
            return float(query[key]) if key in query else None
        except (TypeError, ValueError):
            return None  # the client refuses it when it connects

    connect, statement = number("connect_timeout"), number("read_timeout") if backend == _MYSQL else None
    return Timeouts(timeouts.connect if connect is None else math.ceil(connect),
                    timeouts.statement if statement is None else statement)


class Unanswered:
    """The ``handle_error`` hook: a connection that failed, or a statement out of time, as `DriverUnavailable`."""

    def __init__(self, backend: str, store: str, timeouts: Timeouts) -> None:
        self.backend, self.store, self.timeouts = backend, store, timeouts
        self._timed_out: tuple[float, str] | None = None  # (monotonic time, message) of the last timeout
        self._lock = threading.Lock()

    def __call__(self, context: ExceptionContext) -> None:
        if context.is_pre_ping:
            return  # the pool opens a fresh connection by itself; its failure comes here again
        original = context.original_exception
        if context.connection is None:
            raise DriverUnavailable(self.not_connected(original))
        if self.ran_out(original):
            raise DriverUnavailable(self.statement_out_of_time(original))

    def before_connecting(self, *_: Any) -> None:
        """The ``do_connect`` hook: fail at once while an attempt that just timed out says the store is silent."""
        with self._lock:
            last = self._timed_out
        if last is not None and time.monotonic() - last[0] < FAIL_FAST_SECONDS:
            raise DriverUnavailable(last[1])

    def ran_out(self, error: BaseException) -> bool:
        """Whether a statement failed because its timeout passed (not for any other reason)."""
        if self.backend == _POSTGRESQL:
            return getattr(error, "sqlstate", None) == _PG_CANCELED and "statement timeout" in str(error)
        args: tuple[Any, ...] = getattr(error, "args", ())
        return bool(args) and args[0] == _MYSQL_LOST and "timed out" in str(error)

    def not_connected(self, error: BaseException) -> str:
        detail = _detail(error)
        if "timed out" not in detail and "timeout expired" not in detail:
            return f"{self.store} cannot be reached: {detail}"
        bound = f"connect_timeout = {self.timeouts.connect_seconds()} s"
        raise_ = "connect_timeout (JOBBRIDGE_DATABASE_CONNECT_TIMEOUT)"
        if self.backend == _MYSQL:  # PyMySQL reads the greeting under its read timeout
            bound += f" (and statement_timeout = {self.timeouts.statement_seconds():g} s for the server's greeting)"
            raise_ += " or statement_timeout (JOBBRIDGE_DATABASE_STATEMENT_TIMEOUT)"
        message = (f"{self.store} did not answer within {bound}: if the server is only slow, raise {raise_}; if it "
                   f"should answer at once, check that the URL's host and port are a "
                   f"{_KIND.get(self.backend, self.backend)} server's ({detail})")
        with self._lock:
            self._timed_out = (time.monotonic(), message)
        return message

    def statement_out_of_time(self, error: BaseException) -> str:
        statement = self.timeouts.statement_seconds()
        return (f"{self.store} did not finish a statement within statement_timeout = {statement:g} s: if it is "
                "only slow (a large table, a lock held elsewhere), raise statement_timeout "
                f"(JOBBRIDGE_DATABASE_STATEMENT_TIMEOUT) ({_detail(error)})")


def _detail(error: BaseException) -> str:
    """The client's own words, on one line, with any credential masked."""
    return mask_url(" ".join(str(error).split())) or type(error).__name__
