"""The clock leases are judged by: the database server's, which every worker on one database shares.

A lease is a deadline one worker writes and every other compares (a reclaim
frees a row whose ``reserved_until`` has passed). Read off each worker's own
wall clock, a worker a minute ahead would free every other worker's running
jobs and run them again. So on PostgreSQL and MariaDB the driver's clock is
the server's (`jobbridge.clock.StoreClock`: sampled with the statements below,
carried between samples by this process's monotonic clock), and a pushed job's
``available_at``, computed by the dispatching process, is moved onto it.

SQLite is a file on one host, whose processes all read one clock: there the
injected clock (the system's) is kept, as it is whenever a test injects one.
"""

from __future__ import annotations

from sqlalchemy import Engine, TextClause, text

from jobbridge.clock import Clock, store_clock
from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL

#: the server's epoch seconds, to the microsecond. clock_timestamp() is the time now, not the
#: transaction's start; on MariaDB UTC_TIMESTAMP needs no time zone, where UNIX_TIMESTAMP(NOW())
#: would be an hour out in the hour a daylight-saving change repeats.
SERVER_TIME: dict[str, TextClause] = {
    POSTGRESQL: text("SELECT EXTRACT(EPOCH FROM clock_timestamp())"),
    MYSQL: text("SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6"),
}


def server_clock(engine: Engine, dialect: str, clock: Clock) -> Clock:
    """The clock a driver on ``engine`` reads: the server's, unless SQLite or a test's injected clock."""
    statement = SERVER_TIME.get(dialect)
    if statement is None:
        return clock

    def read() -> float:
        with engine.connect() as conn:
            return float(conn.execute(statement).scalar_one())

    return store_clock(clock, read)
