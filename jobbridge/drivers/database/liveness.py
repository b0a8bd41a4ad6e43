"""Whether a pooled server connection is still alive when it is taken from the pool, without a round trip each time.

A connection the server dropped (a restart, ``pg_terminate_backend``, ``KILL``,
an idle timeout) must be replaced before a call uses it, so that after a
database restart the next call reconnects instead of failing. SQLAlchemy's
``pool_pre_ping`` does that with a ``SELECT 1`` at every checkout: a round trip
before every reserve, acknowledgement and cancellation lookup, a fifth of a
busy worker's loop on PostgreSQL. Instead, `install` looks first:

- a server that closed the connection, or said something on it unasked (the
  "terminating connection" notice), has left the socket readable while no
  statement is running: a `poll` of it with no wait, a system call, tells;
- a connection idle for `PING_AFTER_IDLE` seconds or more is pinged as before,
  since something between the two (a proxy, a firewall) may have dropped it
  without a word.

Either way the connection is pinged, and one that does not answer is replaced
with the rest of the pool (``InvalidatePoolError``, what the pre-ping raises),
so the pool reconnects as it did with ``pool_pre_ping``. A connection the pool
just opened is used as it is.
"""

from __future__ import annotations

import select
import time
from typing import Any

from sqlalchemy import Engine, event, exc
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

#: seconds a pooled connection may sit unused and still be taken without a ping
PING_AFTER_IDLE = 2.0
_RETURNED_AT = "jobbridge_returned_at"
_NOTICED = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


def install(engine: Engine) -> None:
    """Check ``engine``'s connections at checkout as described above (instead of ``pool_pre_ping``)."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: DBAPIConnection | None, record: ConnectionPoolEntry) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _taken(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry,
               proxy: PoolProxiedConnection) -> None:
        returned = record.info.pop(_RETURNED_AT, None)
        if returned is None:
            return  # opened for this checkout (or its last user never gave it back): nothing to doubt yet
        if time.monotonic() - returned < PING_AFTER_IDLE and not _spoken_to(dbapi_connection):
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                raise exc.InvalidatePoolError() from error
            raise


def _spoken_to(dbapi_connection: Any) -> bool:
    """Whether the idle connection's socket has something to read (the server closed it, or said why)."""
    fileno = _fileno(dbapi_connection)
    if fileno is None:
        return True  # no socket to look at (closed, or a client that hides it): ping, as the pre-ping did
    poller = select.poll()
    poller.register(fileno, _NOTICED)
    return bool(poller.poll(0))


def _fileno(dbapi_connection: Any) -> int | None:
    """The socket's descriptor: psycopg's ``fileno()``; PyMySQL keeps its socket as ``_sock``."""
    try:
        if getattr(dbapi_connection, "closed", False) or getattr(dbapi_connection, "broken", False):
            return None
        if hasattr(dbapi_connection, "fileno"):
            fileno = int(dbapi_connection.fileno())
        else:
            sock = getattr(dbapi_connection, "_sock", None)
            fileno = -1 if sock is None else int(sock.fileno())
    except Exception:  # any client's "this connection is closed": a ping tells the pool what to do
        return None
    return fileno if fileno >= 0 else None
