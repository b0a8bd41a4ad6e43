"""The Kafka driver's tables in a database lock store (beside, never inside, the database driver's own).

Every row carries ``scope`` (the kafka connection's group and topic prefix),
so two kafka connections can share one lock store. Times are epoch seconds
in DOUBLE columns, on the store's clock: the server's, sampled by each worker
and carried by its monotonic clock (`jobbridge.clock.StoreClock`), so that
every worker writes and compares deadlines on one clock.

- ``jobbridge_kafka_leases``: one row per message read, keyed by scope, topic,
  partition and offset; ``state`` 1 = leased (``token``, ``lease_until``,
  ``body`` set), 2 = done. Done rows below the committed offset are deleted.
- ``jobbridge_kafka_delayed``: jobs not yet due (delayed pushes, releases,
  lapsed leases on their way back); ``token`` is set while a promoter holds one.
- ``jobbridge_kafka_failed``: the failed store.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
)

from jobbridge.drivers.database.types import BODY, MYSQL_TABLE, TIME
from jobbridge.drivers.shared.sql_failed import failed_table

metadata = MetaData()

LEASED, DONE = 1, 2


leases = Table(
    "jobbridge_kafka_leases",
    metadata,
    Column("scope", String(191), primary_key=True),
    Column("topic", String(249), primary_key=True),
    Column("part", Integer, primary_key=True, autoincrement=False),
    Column("kafka_offset", BigInteger, primary_key=True, autoincrement=False),
    Column("queue", String(191), nullable=False),
    Column("state", SmallInteger, nullable=False),
    Column("token", String(36), nullable=True),
    Column("lease_until", TIME, nullable=True),
    Column("job_id", String(191), nullable=True),
    Column("body", BODY, nullable=True),
    # reclaim: leased rows by deadline
    Index("jobbridge_kafka_leases_lapse", "scope", "state", "lease_until"),
    # counts: leased rows by queue
    Index("jobbridge_kafka_leases_queue", "scope", "queue", "state"),
    **MYSQL_TABLE,
)

delayed = Table(
    "jobbridge_kafka_delayed",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("scope", String(191), nullable=False),
    Column("queue", String(191), nullable=False),
    Column("due", TIME, nullable=False),
    Column("token", String(36), nullable=True),
    Column("job_id", String(191), nullable=False),
    Column("body", BODY, nullable=False),
    Index("jobbridge_kafka_delayed_due", "scope", "due"),
    Index("jobbridge_kafka_delayed_queue", "scope", "queue", "due"),
    **MYSQL_TABLE,
)

failed = failed_table(metadata, "jobbridge_kafka_failed")
