"""Task results in Celery's database backend tables, so Celery and jobbridge read each other's.

URL: ``celery+db+postgresql://user@host/db`` (``celery+db+sqlite:///path``, ``celery+db+mysql://...``),
the ``result_backend`` a Celery fleet already uses (``db+...``) behind ``celery+``. The facade
selects it by itself when it speaks Celery's wire (``jobbridge_wire = "celery"``) with a
database result backend (docs/celery-wire.md).

Layout, Celery's own (its SQLAlchemy models, created here when missing, with every column
Celery 5.7 defines, so either side may create them first)::

    celery_taskmeta      id (sequence task_id_sequence), task_id (unique), status, result,
                         date_done, traceback, children, and the extended columns name, args,
                         kwargs, worker, retries, queue, stamps
    celery_tasksetmeta   id (sequence taskset_id_sequence), taskset_id, result, date_done

``result`` holds the meta's result as JSON bytes (the value, a progress meta, or Celery's
JSON exception), as Celery 5.7 and later write it with ``result_serializer = "json"``.
**A pickle is never read:** Celery 5.6 and earlier store this column with a pickle whatever
``result_serializer`` says, and a pickle can run code when it is loaded, so a row that is
not JSON is refused with `UnreadableResult`, naming why and what to change, rather than
unpickled. A result that is SUCCESS is never overwritten, as in Celery. Expiry is Celery's:
rows are kept until a cleanup (``prune`` here, ``celery.backend_cleanup`` there) deletes those
done longer than ``result_expires`` ago.

A saved group (``GroupResult.save()``) is a row of ``celery_tasksetmeta`` holding Celery's
result tuple as JSON, so either side restores the other's. What has no place in Celery's
tables (the facade's cancellations, chord counters, a call kept for ``result_extended``)
stays in the jobbridge database result store on the same database
(`jobbridge.results.database`). Settings: those of a database result store (``migrate``,
``connect_timeout``, ``statement_timeout``), and ``schema``, ``task_table``, ``group_table``
(Celery's ``database_table_schemas`` / ``database_table_names``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    Row,
    String,
    Table,
    Text,
    delete,
    exc,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy import Sequence as DbSequence

from jobbridge.clock import Clock
from jobbridge.drivers.database.failures import translated
from jobbridge.errors import ConfigurationError, DriverError, DriverUnavailable, JobBridgeError
from jobbridge.results.base import DEFAULT_TTL, SUCCESS, ResultRecord, check_record, encode_json
from jobbridge.results.celery_meta import meta_of, record_from_meta
from jobbridge.results.database import DatabaseResultStore, open_database_store

#: ids of what the facade keeps for itself (a call kept for result_extended): jobbridge's tables
OWN_IDS = ("celery-task-meta-extended:",)
#: the facade's saved groups (``GroupResult.save()``): rows of Celery's celery_tasksetmeta
GROUP_IDS = "celery-group-meta:"
TASK_TABLE, GROUP_TABLE = "celery_taskmeta", "celery_tasksetmeta"
FIRST_POLL, POLL_GROWTH, MAX_POLL = 0.02, 1.5, 0.5
CHUNK = 500
_PICKLE = b"\x80"
_OWN_OPTIONS = ("schema", "task_table", "group_table")


class UnreadableResult(JobBridgeError):
    """A row in Celery's table that jobbridge will not decode (a pickle) or cannot (not JSON)."""


def celery_tables(schema: str | None = None, task: str = TASK_TABLE,
                  group: str = GROUP_TABLE) -> tuple[MetaData, Table, Table]:
    """Celery's two result tables, column for column (Celery 5.7's models, extended columns included)."""
    metadata = MetaData()
    key = Integer().with_variant(BigInteger, "mssql")
    tasks = Table(
        task, metadata,
        Column("id", key, DbSequence("task_id_sequence", schema=schema), primary_key=True, autoincrement=True),
        Column("task_id", String(155), unique=True), Column("status", String(50)),
        Column("result", LargeBinary), Column("date_done", DateTime, index=True), Column("traceback", Text),
        Column("children", LargeBinary), Column("name", String(155)), Column("args", LargeBinary),
        Column("kwargs", LargeBinary), Column("worker", String(155)), Column("retries", Integer),
        Column("queue", String(155)), Column("stamps", LargeBinary),
        schema=schema, sqlite_autoincrement=True,
    )
    groups = Table(
        group, metadata,
        Column("id", key, DbSequence("taskset_id_sequence", schema=schema), primary_key=True, autoincrement=True),
        Column("taskset_id", String(155), unique=True), Column("result", LargeBinary),
        Column("date_done", DateTime, index=True),
        schema=schema, sqlite_autoincrement=True,
    )
    return metadata, tasks, groups


class CeleryDatabaseResultStore:
    """Task meta in Celery's rows; cancellations, counters and the facade's own records in jobbridge's tables."""

    def __init__(self, inner: DatabaseResultStore, *, schema: str | None = None, task_table: str = TASK_TABLE,
                 group_table: str = GROUP_TABLE) -> None:
        self.inner, self.clock = inner, inner.clock
        self.metadata, self.tasks, self.groups = celery_tables(schema, task_table, group_table)
        self.columns = {c.name for c in self.tasks.columns}
        self._ttl = DEFAULT_TTL

    def __repr__(self) -> str:
        return f"<CeleryDatabaseResultStore {self.describe()}>"

    def describe(self) -> str:
        return f"Celery's result tables ({self.tasks.fullname}, {self.groups.fullname}) on {self.inner.describe()}"

    # -- schema ------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Create Celery's tables if missing, then read which columns the table has (an older Celery's may lack
        some)."""
        self.inner.migrate()
        for attempt in (1, 2, 3):
            try:
                with translated("create Celery's result tables"):
                    self.metadata.create_all(self.inner.engine, checkfirst=True)
                break
            except DriverError:  # a Celery process created one between the check and the CREATE: check again
                if attempt == 3:
                    raise
        self.read_columns()

    def read_columns(self) -> None:
        try:
            found = inspect(self.inner.engine).get_columns(self.tasks.name, schema=self.tasks.schema)
        except exc.NoSuchTableError:
            return
        except exc.SQLAlchemyError as error:
            raise DriverUnavailable(f"cannot read the columns of {self.tasks.fullname}: {error}") from error
        self.columns = {str(c["name"]) for c in found}

    # -- results -----------------------------------------------------------------------------

    def store(self, record: ResultRecord, ttl: float) -> None:
        if record.id.startswith(OWN_IDS):
            self.inner.store(record, ttl)
            return
        check_record(record)
        self._ttl = ttl
        if record.id.startswith(GROUP_IDS):
            self._save_group(record.id[len(GROUP_IDS):], [str(i) for i in record.result or []])
            return
        now = self.clock.now()
        meta = meta_of(record, now)
        row: dict[str, Any] = {
            "status": record.state, "traceback": record.traceback,
            "result": encode_json(meta["result"], "result", record.id).encode(),
            "date_done": datetime.fromtimestamp(now, UTC).replace(tzinfo=None) if meta["date_done"] else None,
        }
        if "name" in self.columns:
            row["name"] = record.name
        for attempt in (1, 2):
            try:
                with self.inner._write("store a Celery result") as conn:
                    self._upsert(conn, record.id, row)
                return
            except DriverError as error:  # two first writes of one id at once: the second updates
                if attempt == 2 or not isinstance(error.__cause__, exc.IntegrityError):
                    raise

    def _save_group(self, group_id: str, ids: list[str]) -> None:
        """A saved group as Celery saves one: its result tuple, ``[[id, None], [[[member, None], None], ...]]``."""
        value = encode_json([[group_id, None], [[[i, None], None] for i in ids]], "result", group_id).encode()
        done = datetime.fromtimestamp(self.clock.now(), UTC).replace(tzinfo=None)
        with self.inner._write("save a group in Celery's table") as conn:
            conn.execute(delete(self.groups).where(self.groups.c.taskset_id == group_id))
            conn.execute(insert(self.groups).values(taskset_id=group_id, result=value, date_done=done))

    def _restore_group(self, id: str) -> ResultRecord | None:
        group_id = id[len(GROUP_IDS):]
        with self.inner._read("read a group from Celery's table") as conn:
            row = conn.execute(select(self.groups.c.result, self.groups.c.date_done)
                               .where(self.groups.c.taskset_id == group_id)).first()
        if row is None:
            return None
        found = self._decoded(group_id, row.result)
        try:
            members = [str(node[0][0]) for node in found[1]]
        except (TypeError, IndexError, KeyError):
            raise UnreadableResult(f"the saved group {group_id!r} in {self.groups.fullname} is not Celery's "
                                   "result tuple") from None
        return ResultRecord(id=id, state="GROUP", result=members)

    def _upsert(self, conn: Connection, id: str, row: dict[str, Any]) -> None:
        found = conn.execute(select(self.tasks.c.status).where(self.tasks.c.task_id == id).with_for_update()).first()
        if found is None:
            conn.execute(insert(self.tasks).values(task_id=id, **row))
        elif found.status != SUCCESS:  # a late state from a second run never turns a SUCCESS back
            conn.execute(update(self.tasks).where(self.tasks.c.task_id == id).values(**row))

    def _select(self) -> Any:
        t = self.tasks
        wanted = [t.c.task_id, t.c.status, t.c.result, t.c.traceback, t.c.date_done]
        return select(*wanted, t.c.name) if "name" in self.columns else select(*wanted)

    def get(self, id: str) -> ResultRecord | None:
        if id.startswith(OWN_IDS):
            return self.inner.get(id)
        if id.startswith(GROUP_IDS):
            return self._restore_group(id)
        with self.inner._read("read a Celery result") as conn:
            row = conn.execute(self._select().where(self.tasks.c.task_id == id)).first()
        return None if row is None else self._record(row)

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        own = [i for i in ids if i.startswith(OWN_IDS)]
        found = self.inner.get_many(own) if own else {}
        for id in (i for i in ids if i.startswith(GROUP_IDS)):
            group = self._restore_group(id)
            if group is not None:
                found[id] = group
        theirs = list(dict.fromkeys(i for i in ids if not i.startswith((*OWN_IDS, GROUP_IDS))))
        with self.inner._read("read Celery results") as conn:
            for start in range(0, len(theirs), CHUNK):
                query = self._select().where(self.tasks.c.task_id.in_(theirs[start:start + CHUNK]))
                for row in conn.execute(query):
                    record = self._record(row)
                    if record is not None:
                        found[record.id] = record
        return found

    def _record(self, row: Row[Any]) -> ResultRecord | None:
        meta = {"status": row.status, "result": self._decoded(row.task_id, row.result), "traceback": row.traceback,
                "date_done": row.date_done, "name": getattr(row, "name", None)}
        return record_from_meta(row.task_id, meta, self.clock.now())

    def _decoded(self, id: str, raw: bytes | None) -> Any:
        """The ``result`` column as JSON; a pickle is refused unread (loading one can run code)."""
        if raw is None:
            return None
        raw = bytes(raw)
        if raw[:1] == _PICKLE:
            raise UnreadableResult(
                f"the result of task {id!r} in {self.tasks.fullname} is a pickle, which jobbridge never loads (a "
                "pickle can run code when it is read). Celery 5.6 and earlier pickle this column whatever "
                "result_serializer says: run Celery 5.7 or later with result_serializer = 'json' on the Celery "
                "side, or use a Redis result backend (result_backend = redis://...)")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise UnreadableResult(
                f"the result of task {id!r} in {self.tasks.fullname} is not JSON: set result_serializer = 'json' "
                "on the Celery side (jobbridge reads and writes JSON only)") from None

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        """Read the row until it is ready or ``timeout`` passes (Celery's database backend polls too)."""
        if id.startswith(OWN_IDS):
            return self.inner.wait(id, timeout)
        if id.startswith(GROUP_IDS):
            return self._restore_group(id)
        deadline, interval = time.monotonic() + max(0.0, timeout), FIRST_POLL
        record: ResultRecord | None = None
        while True:
            try:
                record, failure = self.get(id), None
            except DriverUnavailable as error:
                failure = error
            left = deadline - time.monotonic()
            if (record is not None and record.ready and failure is None) or left <= 0:
                if failure is not None:
                    raise failure
                return record
            time.sleep(min(left, interval))
            interval = min(interval * POLL_GROWTH, MAX_POLL)

    def forget(self, id: str) -> None:
        if id.startswith(OWN_IDS):
            self.inner.forget(id)
            return
        table, column = (self.groups, self.groups.c.taskset_id) if id.startswith(GROUP_IDS) else (
            self.tasks, self.tasks.c.task_id)
        with self.inner._write("forget a Celery result") as conn:
            conn.execute(delete(table).where(column == id.removeprefix(GROUP_IDS)))

    def prune(self) -> int:
        """Celery's cleanup (rows done longer ago than the result ttl), and jobbridge's own expired records."""
        cutoff = datetime.fromtimestamp(self.clock.now() - self._ttl, UTC).replace(tzinfo=None)
        with self.inner._write("delete expired Celery results") as conn:
            removed = conn.execute(delete(self.tasks).where(self.tasks.c.date_done < cutoff)).rowcount
            removed += conn.execute(delete(self.groups).where(self.groups.c.date_done < cutoff)).rowcount
        return int(removed) + self.inner.prune()

    # -- what Celery's tables have no place for ----------------------------------------------------

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        self.inner.cancel(ids, ttl)

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        return self.inner.cancelled(ids)

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        self.inner.counter_init(key, count, ttl)

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        return self.inner.counter_decrement(key, member)

    def close(self) -> None:
        self.inner.close()


def open_celery_database_store(url: str, *, clock: Clock, migrate: bool = True,
                               **options: Any) -> CeleryDatabaseResultStore:
    """The store for ``celery+db+<database URL>``: Celery's tables, and jobbridge's beside them."""
    own = {k: options.pop(k) for k in _OWN_OPTIONS if k in options}
    for key, value in own.items():
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigurationError(f"the Celery result store's {key} must be a name, not {value!r}")
    inner = open_database_store(url, clock=clock, migrate=False, **options)
    store = CeleryDatabaseResultStore(inner, **own)
    try:
        if migrate:
            store.migrate()
        else:
            store.read_columns()
    except BaseException:
        store.close()
        raise
    return store


__all__ = ["GROUP_TABLE", "TASK_TABLE", "CeleryDatabaseResultStore", "UnreadableResult", "celery_tables",
           "open_celery_database_store"]
