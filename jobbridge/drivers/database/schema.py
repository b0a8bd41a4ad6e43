"""The database driver's tables, as one SQLAlchemy `MetaData` an app's Alembic can include.

Times are float epoch seconds from the driver's clock (the server's, sampled
by `server_clock`, or a test's injected one), stored as DOUBLE so that tests
cross leases by moving the clock; no statement calls ``NOW()`` itself.
A row of ``jobbridge_jobs`` is *reserved* while ``token`` is set; its
``reserved_until`` is then the lease deadline, and both are NULL otherwise.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    text,
)
from sqlalchemy.engine import Dialect

from jobbridge.drivers.database.types import BODY, ERROR_TEXT, MYSQL_TABLE, TIME

#: the version `migrate()` records in ``jobbridge_schema``; bumped by every schema change:
#: 1 the jobs, failed jobs, locks and schema tables; 2 adds ``jobbridge_schedules``; 3 adds the
#: failed store's per-queue and per-name indexes (``jobbridge failed --queue/--job``); 4 adds
#: ``jobbridge_rate_buckets`` (shared rate limits) and ``jobbridge_workers`` (live workers' heartbeats);
#: 5 adds ``jobbridge_throughput`` (the dashboard's per-minute counters); 6 adds, on PostgreSQL, a trigram
#: index on the failed store's error text (``failed --error``, the dashboard's error filter), where ``pg_trgm``
#: can be had (`error_search`)
SCHEMA_VERSION = 6

metadata = MetaData()


def _not_postgresql(ddl: Any, target: Any, bind: Any, tables: Any = None, state: Any = None, *,
                    dialect: Dialect, compiler: Any = None, checkfirst: bool = False) -> bool:
    return dialect.name != "postgresql"



jobs = Table(
    "jobbridge_jobs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("queue", String(191), nullable=False),
    Column("name", String(191), nullable=False),
    Column("body", BODY, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("available_at", TIME, nullable=False),
    Column("created_at", TIME, nullable=False),
    Column("token", String(36), nullable=True),
    Column("reserved_until", TIME, nullable=True),
    # reserve: MariaDB and SQLite treat IS NULL on reserved_until as an equality, so the
    # index hands rows over in claim order; PostgreSQL does not, and would sort every ready
    # row of the queue, so it gets a partial index holding only the unreserved rows.
    Index("jobbridge_jobs_ready", "queue", "reserved_until", "available_at", "id").ddl_if(
        callable_=_not_postgresql),
    Index("jobbridge_jobs_unreserved", "queue", "available_at", "id",
          postgresql_where=text("reserved_until IS NULL")).ddl_if(dialect="postgresql"),
    # reclaim_expired: only reserved rows have a lease to lapse (partial where the dialect can)
    Index("jobbridge_jobs_lease", "reserved_until", postgresql_where=text("reserved_until IS NOT NULL"),
          sqlite_where=text("reserved_until IS NOT NULL")),
    **MYSQL_TABLE,
)

failed_jobs = Table(
    "jobbridge_failed_jobs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("queue", String(191), nullable=False),
    Column("name", String(191), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("error", ERROR_TEXT, nullable=False),
    Column("failed_at", TIME, nullable=False),
    Column("body", BODY, nullable=False),
    Index("jobbridge_failed_jobs_failed_at", "failed_at"),
    # a listing filtered by queue or by job name reads the newest matches off one of these, in order
    Index("jobbridge_failed_jobs_queue", "queue", "failed_at"),
    Index("jobbridge_failed_jobs_name", "name", "failed_at"),
    **MYSQL_TABLE,
)

locks = Table(
    "jobbridge_locks",
    metadata,
    Column("key", String(191), primary_key=True),
    Column("owner", String(191), nullable=False),
    Column("expires_at", TIME, nullable=False),
    **MYSQL_TABLE,
)

# each schedule entry's last fired tick, advanced in the transaction that inserts the tick's job
# (jobbridge.drivers.database.schedules); job_id is NULL for a tick recorded without a job
schedules = Table(
    "jobbridge_schedules",
    metadata,
    Column("name", String(191), primary_key=True),
    Column("last_tick", TIME, nullable=False),
    Column("job_id", String(36), nullable=True),
    Column("fired_at", TIME, nullable=False),
    **MYSQL_TABLE,
)

# a shared rate limit's bucket: its theoretical arrival time, in the server's clock
# (jobbridge.drivers.database.rate_buckets)
rate_buckets = Table(
    "jobbridge_rate_buckets",
    metadata,
    Column("key", String(191), primary_key=True),
    Column("tat", TIME, nullable=False),
    **MYSQL_TABLE,
)

# one row per live (or lately live) worker process, replaced by each of its heartbeats
# (jobbridge.drivers.database.workers); body is the record as JSON
workers = Table(
    "jobbridge_workers",
    metadata,
    Column("id", String(191), primary_key=True),
    Column("last_beat", TIME, nullable=False),
    Column("body", ERROR_TEXT, nullable=False),
    Index("jobbridge_workers_last_beat", "last_beat"),
    **MYSQL_TABLE,
)

# ended attempts per queue and minute (jobbridge.drivers.database.throughput), added to by each worker's
# heartbeat; the key leads with the minute, so a chart's range and the prune read one index range
throughput = Table(
    "jobbridge_throughput",
    metadata,
    Column("minute", Integer, primary_key=True, autoincrement=False),
    Column("queue", String(191), primary_key=True),
    Column("processed", Integer, nullable=False, default=0),
    Column("failed", Integer, nullable=False, default=0),
    Column("released", Integer, nullable=False, default=0),
    **MYSQL_TABLE,
)

schema_versions = Table(
    "jobbridge_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", TIME, nullable=False),
    **MYSQL_TABLE,
)
