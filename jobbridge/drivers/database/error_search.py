"""Searching failed jobs by error text: the test each dialect runs, and PostgreSQL's trigram index for it.

"The error contains this, ignoring case" cannot use an ordinary index: a
substring may start anywhere. Unhelped, the search reads every row the other
filters leave, and on PostgreSQL that is slow (``ILIKE`` over 100,000
tracebacks takes over a second). So:

- **PostgreSQL**: `ensure_trigram_index` (schema version 6, run by
  ``migrate``) creates the ``pg_trgm`` extension when it is missing and a GIN
  trigram index on the error column, which ``ILIKE '%...%'`` uses for any
  text of three characters or more. ``CREATE EXTENSION`` needs the CREATE
  privilege on the database (``pg_trgm`` is a trusted extension) and the
  contrib modules installed; without them migrate logs a warning and goes
  on: the search stays exact, reading every row, as before.
- **SQLite**: ``LIKE``, which already ignores the case of ASCII letters (as
  SQLite's ``lower()`` does): a plain scan, without lowering every row first.
- **MariaDB/MySQL**: ``LIKE`` under ``utf8mb4_general_ci``, a case-insensitive
  collation, whatever collation the column was given.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, text
from sqlalchemy.exc import DBAPIError

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL, SQLITE

log = logging.getLogger("jobbridge.drivers.database")

EXTENSION = "pg_trgm"
#: the character that escapes ``%``, ``_`` and itself in a pattern
ESCAPE = "/"


def index_name(table: str) -> str:
    """The trigram index of ``table``'s error column."""
    return f"{table}_error_trgm"


def error_contains(column: ColumnElement[str], needle: str, dialect: str) -> ColumnElement[bool]:
    """``column`` contains ``needle``, ignoring case (``%`` and ``_`` in it are literal)."""
    escaped = needle.replace(ESCAPE, ESCAPE * 2).replace("%", ESCAPE + "%").replace("_", ESCAPE + "_")
    pattern = f"%{escaped}%"
    if dialect == POSTGRESQL:
        return column.ilike(pattern, escape=ESCAPE)
    if dialect == SQLITE:
        return column.like(pattern, escape=ESCAPE)
    if dialect in (MYSQL, "mariadb"):
        return column.collate("utf8mb4_general_ci").like(pattern, escape=ESCAPE)
    return column.icontains(needle, autoescape=True)


def index_where_installed(table: Table, connection: Connection, **kw: Any) -> None:
    """A table's ``after_create`` listener: its trigram index, where ``pg_trgm`` is installed already.

    The operator class is named with the extension's schema, which need not be on the search path.
    """
    if connection.dialect.name == POSTGRESQL and (schema := trigram_schema(connection)) is not None:
        _create_index(connection, table.name, schema)


def trigram_schema(conn: Connection) -> str | None:
    """The schema ``pg_trgm`` is installed in, or None when it is not installed in this database."""
    found = conn.execute(text("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                              "WHERE e.extname = :name"), {"name": EXTENSION}).scalar()
    return None if found is None else str(found)


def _in_public(conn: Connection) -> str:
    """`` SCHEMA public`` where that schema exists: the extension then outlives any schema of the app's own."""
    found = conn.execute(text("SELECT 1 FROM pg_namespace WHERE nspname = 'public'")).scalar()
    return " SCHEMA public" if found else ""


def ensure_trigram_index(conn: Connection, table: str) -> bool:
    """On PostgreSQL, the trigram index of ``table``'s error column; whether it exists now.

    Inside the caller's transaction: a refused ``CREATE EXTENSION`` is rolled
    back to a savepoint, so the rest of the migration stands.
    """
    if conn.dialect.name != POSTGRESQL:
        return False
    schema = trigram_schema(conn)
    if schema is None:
        try:
            with conn.begin_nested():
                conn.execute(text(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}{_in_public(conn)}"))
        except DBAPIError as error:
            reason = str(error.orig).strip().splitlines()[0] if error.orig is not None else type(error).__name__
            log.warning("searching failed jobs by error text reads every row: the %s extension could not be "
                        "created (%s). Ask an administrator to run CREATE EXTENSION %s; in this database, then "
                        "create the index as docs/migrations.md shows", EXTENSION, reason, EXTENSION)
            return False
        schema = trigram_schema(conn) or "public"
    _create_index(conn, table, schema)
    return True


def _create_index(conn: Connection, table: str, schema: str) -> None:
    quoted = conn.dialect.identifier_preparer.quote
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS {quoted(index_name(table))} ON {quoted(table)} "
                      f"USING gin (error {quoted(schema)}.gin_trgm_ops)"))
