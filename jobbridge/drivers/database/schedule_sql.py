"""The statements of the schedule store (`jobbridge.drivers.database.schedules`), per dialect.

Each one acts on a whole batch of entries, so that firing 10,000 entries due
at the same instant costs a few statements per batch rather than a few per
entry: on PostgreSQL the batch travels as one parameter however long (an array of
names, or a JSON document of rows); on MariaDB and SQLite as ``IN (...)`` lists and
multi-row statements.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, select, text, update
from sqlalchemy.dialects import mysql, sqlite

from jobbridge.drivers.database.engine import MYSQL, POSTGRESQL
from jobbridge.drivers.database.schema import schedules

#: the tick of a row inserted for an entry that never fired, until the same transaction records the real
#: one (every tick is later); the most negative DOUBLE, as MariaDB stores no infinity
NEVER = -sys.float_info.max
#: entry names per ``IN (...)`` list (MariaDB, SQLite)
IN_BATCH = 500

_COLUMNS = (schedules.c.name, schedules.c.last_tick, schedules.c.job_id, schedules.c.fired_at)
_TABLE = schedules.name


class ScheduleSql(Protocol):
    """The batch statements the schedule store runs, on one dialect."""

    def read(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """``(name, last_tick, job_id, fired_at)`` of each of ``names`` that has a row."""
        ...

    def lock(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[str, float]]:
        """``(name, last_tick)`` of each of ``names`` that has a row, locked by ``conn`` in name order.

        ``names`` are sorted: the order rows are locked in, the same in every scheduler.
        """
        ...

    def insert_missing(self, conn: Connection, names: Sequence[str], now: float) -> None:
        """A row at `NEVER` for each of ``names`` (sorted) unless one exists (another scheduler's stays)."""
        ...

    def record(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Write ``last_tick``, ``job_id`` and ``fired_at`` of rows that exist and ``conn`` has locked."""
        ...


class PostgresSql:
    """PostgreSQL: one statement per step, the batch passed as one parameter."""

    _READ = text(f"SELECT name, last_tick, job_id, fired_at FROM {_TABLE} WHERE name = ANY(CAST(:names AS text[]))")
    _LOCK = text(f"SELECT name, last_tick FROM {_TABLE} WHERE name = ANY(CAST(:names AS text[])) "
                 "ORDER BY name FOR UPDATE")
    _INSERT = text(f"INSERT INTO {_TABLE} (name, last_tick, job_id, fired_at) "
                   "SELECT n, :never, NULL, :now FROM unnest(CAST(:names AS text[])) AS n ORDER BY n "
                   "ON CONFLICT (name) DO NOTHING")
    # the rows as one JSON document: the client encodes it in C, where arrays of floats are dumped
    # element by element (and parsed as text by the server), several times slower for a large batch
    _RECORD = text(f"UPDATE {_TABLE} AS s SET last_tick = v.last_tick, job_id = v.job_id, fired_at = v.fired_at "
                   "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS v(name text, last_tick float8, job_id text, "
                   "fired_at float8) WHERE s.name = v.name")

    def read(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        yield from (tuple(row) for row in conn.execute(self._READ, {"names": list(names)}))

    def lock(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[str, float]]:
        yield from ((name, float(tick)) for name, tick in conn.execute(self._LOCK, {"names": list(names)}))

    def insert_missing(self, conn: Connection, names: Sequence[str], now: float) -> None:
        conn.execute(self._INSERT, {"names": list(names), "never": NEVER, "now": now})

    def record(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        conn.execute(self._RECORD, {"rows": json.dumps(rows)})


class ListSql:
    """MariaDB and SQLite: ``IN`` lists of at most `IN_BATCH` names; multi-row inserts."""

    _READ = select(*_COLUMNS).where(schedules.c.name.in_(bindparam("names", expanding=True)))
    # SQLite renders no FOR UPDATE: its BEGIN IMMEDIATE already holds the whole database
    _LOCK = (select(schedules.c.name, schedules.c.last_tick)
             .where(schedules.c.name.in_(bindparam("names", expanding=True)))
             .order_by(schedules.c.name).with_for_update())
    _UPDATE = (update(schedules).where(schedules.c.name == bindparam("b_name"))
               .values(last_tick=bindparam("b_tick"), job_id=bindparam("b_job"), fired_at=bindparam("b_fired")))

    def __init__(self, dialect: str) -> None:
        self._mysql = dialect == MYSQL
        insert: Any = mysql.insert(schedules).prefix_with("IGNORE") if self._mysql \
            else sqlite.insert(schedules).on_conflict_do_nothing(index_elements=[schedules.c.name])
        self._insert = insert
        upsert = mysql.insert(schedules)
        # every row exists and is locked by this transaction, so the upsert only updates: the one
        # multi-row UPDATE MariaDB takes (its client sends an executemany INSERT as one statement)
        self._upsert = upsert.on_duplicate_key_update(last_tick=upsert.inserted.last_tick,
                                                      job_id=upsert.inserted.job_id,
                                                      fired_at=upsert.inserted.fired_at)

    def read(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        for start in range(0, len(names), IN_BATCH):
            yield from (tuple(row) for row in conn.execute(self._READ, {"names": names[start:start + IN_BATCH]}))

    def lock(self, conn: Connection, names: Sequence[str]) -> Iterator[tuple[str, float]]:
        for start in range(0, len(names), IN_BATCH):  # names are sorted: the chunks keep the order
            chunk = list(names[start:start + IN_BATCH])
            yield from ((name, float(tick)) for name, tick in conn.execute(self._LOCK, {"names": chunk}))

    def insert_missing(self, conn: Connection, names: Sequence[str], now: float) -> None:
        conn.execute(self._insert, [{"name": n, "last_tick": NEVER, "job_id": None, "fired_at": now} for n in names])

    def record(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        if self._mysql:
            conn.execute(self._upsert, rows)
            return
        conn.execute(self._UPDATE, [{"b_name": r["name"], "b_tick": r["last_tick"], "b_job": r["job_id"],
                                     "b_fired": r["fired_at"]} for r in rows])


def for_dialect(dialect: str) -> ScheduleSql:
    """The statements for ``dialect`` (as the engine names it)."""
    return PostgresSql() if dialect == POSTGRESQL else ListSql(dialect)
