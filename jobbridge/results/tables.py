"""The database result store's tables, in their own `MetaData`, and the upserts each dialect needs.

Times are float epoch seconds from the store's clock (never the server's
``NOW()``), so a test expires a result by moving the clock. A row whose
``expires_at`` is at or before now is gone for every reader, pruned or not.

``jobbridge_counters`` holds a chord's join: the counter itself is the row
whose ``member`` is ``''`` and carries ``remaining``; each header job that has
counted adds a row under its own id, so a rerun cannot count twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    Index,
    Insert,
    Integer,
    MetaData,
    String,
    Table,
    case,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from jobbridge.drivers.database.types import LONG_TEXT, MYSQL_TABLE, TIME
from jobbridge.results.base import MAX_ID, MAX_STATE

metadata = MetaData()


results = Table(
    "jobbridge_results",
    metadata,
    Column("id", String(MAX_ID), primary_key=True),
    Column("state", String(MAX_STATE), nullable=False),
    Column("name", String(MAX_ID), nullable=True),
    Column("result", LONG_TEXT, nullable=True),  # JSON text; NULL for None
    Column("meta", LONG_TEXT, nullable=True),  # JSON text
    Column("error", LONG_TEXT, nullable=True),
    Column("traceback", LONG_TEXT, nullable=True),
    Column("exception_type", String(255), nullable=True),
    Column("created_at", TIME, nullable=False),
    Column("updated_at", TIME, nullable=False),
    Column("expires_at", TIME, nullable=False),
    Index("jobbridge_results_expires_at", "expires_at"),
    **MYSQL_TABLE,
)

cancelled = Table(
    "jobbridge_cancelled",
    metadata,
    Column("id", String(MAX_ID), primary_key=True),
    Column("cancelled_at", TIME, nullable=False),
    Column("expires_at", TIME, nullable=False),
    Index("jobbridge_cancelled_expires_at", "expires_at"),
    **MYSQL_TABLE,
)

counters = Table(
    "jobbridge_counters",
    metadata,
    Column("key", String(MAX_ID), primary_key=True),
    Column("member", String(MAX_ID), primary_key=True, default=""),
    Column("remaining", Integer, nullable=True),  # set on the counter row only
    Column("expires_at", TIME, nullable=False),
    Index("jobbridge_counters_expires_at", "expires_at"),
    **MYSQL_TABLE,
)

Assignments = Callable[[Any], Sequence[tuple[str, ColumnElement[Any]]]]


def upsert(dialect: str, table: Table, assignments: Assignments) -> Insert:
    """INSERT, or on a duplicate primary key UPDATE with ``assignments(new_row)``.

    ``new_row`` is the dialect's name for the row that was refused (``excluded``,
    or MySQL's ``VALUES()``). MySQL runs the assignments left to right, each
    seeing the ones before it, so an assignment that reads an old value must
    come before the one that overwrites it; PostgreSQL and SQLite read old values throughout.
    """
    keys = [c.name for c in table.primary_key.columns]
    if dialect == "mysql":
        mine = mysql.insert(table)
        return mine.on_duplicate_key_update(list(assignments(mine.inserted)))
    if dialect == "postgresql":
        pg = postgresql.insert(table)
        return pg.on_conflict_do_update(index_elements=keys, set_=dict(assignments(pg.excluded)))
    lite = sqlite.insert(table)
    return lite.on_conflict_do_update(index_elements=keys, set_=dict(assignments(lite.excluded)))


def insert_unless_present(dialect: str, table: Table) -> Insert:
    """INSERT that does nothing on a duplicate primary key; its rowcount says which happened."""
    statement: Insert
    if dialect == "mysql":
        statement = mysql.insert(table).prefix_with("IGNORE")
    elif dialect == "postgresql":
        statement = postgresql.insert(table).on_conflict_do_nothing()
    else:
        statement = sqlite.insert(table).on_conflict_do_nothing()
    # SQLAlchemy keeps an INSERT's rowcount only when asked
    return statement.execution_options(preserve_rowcount=True)


def store_result(dialect: str) -> Insert:
    """Upsert a result: every field replaced; ``created_at`` kept unless the old row had expired."""

    def assign(new: Any) -> list[tuple[str, ColumnElement[Any]]]:
        # new.updated_at is the store's now: an old row expired by then starts a new life
        created = case((results.c.expires_at <= new.updated_at, new.created_at), else_=results.c.created_at)
        rest = [(c.name, new[c.name]) for c in results.columns if c.name not in {"id", "created_at"}]
        return [("created_at", created), *rest]

    return upsert(dialect, results, assign)


def store_cancel(dialect: str) -> Insert:
    """Upsert a cancellation: a later cancel may lengthen its life, never shorten it."""

    def assign(new: Any) -> list[tuple[str, ColumnElement[Any]]]:
        lapsed = cancelled.c.expires_at <= new.cancelled_at
        return [
            ("cancelled_at", case((lapsed, new.cancelled_at), else_=cancelled.c.cancelled_at)),
            ("expires_at", case((new.expires_at > cancelled.c.expires_at, new.expires_at),
                                else_=cancelled.c.expires_at)),
        ]

    return upsert(dialect, cancelled, assign)


def store_counter(dialect: str) -> Insert:
    """Upsert a counter row (``member = ''``) with a new count and expiry."""

    def assign(new: Any) -> list[tuple[str, ColumnElement[Any]]]:
        return [("remaining", new.remaining), ("expires_at", new.expires_at)]

    return upsert(dialect, counters, assign)
