"""The database result store: results, cancellations and counters in SQL, through SQLAlchemy 2 Core.

URL forms are the database driver's: ``sqlite:///path/results.sqlite3`` (WAL,
writes under ``BEGIN IMMEDIATE``), ``postgresql://...`` (psycopg 3),
``mysql://...`` / ``mariadb://...`` (PyMySQL, READ COMMITTED); the engine is
built by `jobbridge.drivers.database.engine`, so both share their dialect rules.

Storage: ``jobbridge_results``, ``jobbridge_cancelled`` and ``jobbridge_counters``
in `metadata` (their own, for an app's Alembic beside the driver's). Times are
the store clock's epoch seconds.

Waiting: on PostgreSQL a store of a ready record sends ``NOTIFY
jobbridge_results, '<id>'`` in its transaction and one LISTEN connection per
store wakes the waiters (with a safety re-read every `PG_SAFETY_POLL` seconds).
SQLite and MariaDB have no such signal, so ``wait`` re-reads the record after
`FIRST_POLL` seconds, then at intervals growing by `POLL_GROWTH` up to
`MAX_POLL`. A store in the same process wakes its waiters at once on every dialect.

Settings: ``migrate`` (default true: create missing tables when opened), and the database
connection's ``connect_timeout`` and ``statement_timeout``: the store's engine is bounded as the
driver's is (`jobbridge.drivers.database.bounds`), so a silent server fails a call, never holds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Row, bindparam, delete, select, text, update

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.database.after_fork import reset_after_fork
from jobbridge.drivers.database.engine import POSTGRESQL, build_engine, describe, parse_url
from jobbridge.drivers.database.failures import translated
from jobbridge.drivers.database.settings import Timeouts, parse_timeouts
from jobbridge.errors import ConfigurationError, DriverError, DriverUnavailable
from jobbridge.results.base import (
    ResultRecord,
    UnknownCounter,
    check_key,
    check_record,
    decode_json,
    encode_json,
)
from jobbridge.results.listen import CHANNEL, Wakeups
from jobbridge.results.tables import (
    cancelled,
    counters,
    insert_unless_present,
    metadata,
    results,
    store_cancel,
    store_counter,
    store_result,
)

__all__ = ["DatabaseResultStore", "metadata", "open_database_store"]

FIRST_POLL = 0.02
POLL_GROWTH = 1.5
MAX_POLL = 0.5
#: on PostgreSQL, how often a waiter re-reads even without a notification
PG_SAFETY_POLL = 5.0
#: ids per ``IN (...)``: one round trip for any ordinary batch, far below every dialect's bind limit
CHUNK = 500


if TYPE_CHECKING:
    from jobbridge.drivers.database.listen import ListenThread

log = logging.getLogger("jobbridge.results")

_LIVE = results.c.expires_at > bindparam("now")
_GET = select(results).where(results.c.id == bindparam("rid"), _LIVE)
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', :rid)")
_COUNTER = (
    select(counters.c.remaining, counters.c.expires_at)
    .where(counters.c.key == bindparam("ckey"), counters.c.member == "", counters.c.expires_at > bindparam("now"))
    .with_for_update()  # held to commit: concurrent decrements of one key queue here (SQLite: BEGIN IMMEDIATE)
)
_TAKE_ONE = (
    update(counters)
    .where(counters.c.key == bindparam("ckey"), counters.c.member == "")
    .values(remaining=counters.c.remaining - 1)
)
_FORGET_MEMBERS = delete(counters).where(counters.c.key == bindparam("ckey"), counters.c.member != "")


# The lookup a worker's heartbeat makes for its held jobs, as the client's own SQL: no SQLAlchemy
# construct (cache key, compiled form) per call. PostgreSQL: one array parameter, the same text for any
# batch (so the server's plan and psycopg's parse are reused); parameters: the ids, the store's now.
_CANCELLED_ANY = f"SELECT id FROM {cancelled.name} WHERE id = ANY(%s::text[]) AND expires_at > %s"


@cache
def _cancelled_in(mark: str, count: int) -> str:
    """SQLite and MariaDB: which of ``count`` ids are cancelled (parameters: the store's now, then the ids)."""
    return f"SELECT id FROM {cancelled.name} WHERE expires_at > {mark} AND id IN ({', '.join([mark] * count)})"


#: the database connection settings a result store takes besides migrate
_TIMEOUTS = ("connect_timeout", "statement_timeout")

class DatabaseResultStore:
    """Rows keyed by job id, read only while ``expires_at`` is after the clock's now."""

    def __init__(self, url: str, *, clock: Clock = SYSTEM_CLOCK, timeouts: Timeouts | None = None) -> None:
        self.url = parse_url(url)
        self.clock = clock
        self.engine = build_engine(self.url, timeouts)
        self.dialect: str = self.engine.dialect.name
        self._store_result = store_result(self.dialect)
        self._store_cancel = store_cancel(self.dialect)
        self._store_counter = store_counter(self.dialect)
        self._add_member = insert_unless_present(self.dialect, counters)
        self._wakeups = Wakeups()
        self._listener: ListenThread | None = None
        self._listener_lock = threading.Lock()
        reset_after_fork(self, _forget_listener)

    def __repr__(self) -> str:
        return f"<DatabaseResultStore {self.describe()}>"

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        with translated(action), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        # SQLite: a deferred BEGIN, so a reader never queues behind a writer's lock
        with translated(action), self.engine.connect() as conn:
            yield conn.execution_options(jobbridge_begin="BEGIN")

    # -- results -----------------------------------------------------------------------------

    def store(self, record: ResultRecord, ttl: float) -> None:
        check_record(record)
        now = self.clock.now()
        row = {
            "id": record.id, "state": record.state, "name": record.name,
            "result": None if record.result is None else encode_json(record.result, "result", record.id),
            "meta": None if record.meta is None else encode_json(record.meta, "meta", record.id),
            "error": record.error, "traceback": record.traceback, "exception_type": record.exception_type,
            "created_at": record.created_at or now, "updated_at": now, "expires_at": now + ttl,
        }
        with self._write("store a result") as conn:
            conn.execute(self._store_result, row)
            if record.ready and self.dialect == POSTGRESQL:
                conn.execute(_NOTIFY, {"rid": record.id})  # sent by PostgreSQL at commit, not before
        if record.ready:
            self._wakeups.wake(record.id)

    def get(self, id: str) -> ResultRecord | None:
        with self._read("read a result") as conn:
            row = conn.execute(_GET, {"rid": id, "now": self.clock.now()}).first()
        return None if row is None else _record(row)

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        found: dict[str, ResultRecord] = {}
        now = self.clock.now()
        with self._read("read results") as conn:
            for chunk in _chunks(ids):
                query = select(results).where(results.c.id.in_(chunk), results.c.expires_at > now)
                found.update((row.id, _record(row)) for row in conn.execute(query))
        return found

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        deadline = time.monotonic() + timeout
        listening = self._listen()
        interval = FIRST_POLL
        failure: DriverUnavailable | None = None
        record: ResultRecord | None = None
        with self._wakeups.watching(id):
            while True:
                since = self._wakeups.mark()  # before the read: a store after it is never slept through
                try:
                    record, failure = self.get(id), None
                except DriverUnavailable as error:
                    failure = error  # a restart or a dropped connection: try again until the deadline
                left = deadline - time.monotonic()
                if (record is not None and record.ready and failure is None) or left <= 0:
                    break
                pause = PG_SAFETY_POLL if listening and failure is None else interval
                self._wakeups.wait(id, since, min(left, pause))
                interval = min(interval * POLL_GROWTH, MAX_POLL)
        if failure is not None:
            raise failure
        return record

    def _listen(self) -> bool:
        """Start the LISTEN thread on PostgreSQL; False (poll instead) elsewhere or when it cannot connect."""
        if self.dialect != POSTGRESQL:
            return False
        with self._listener_lock:
            if self._listener is None:
                # imported here: psycopg is needed only by PostgreSQL users
                from jobbridge.drivers.database.listen import ListenThread, connect_like

                engine = self.engine
                self._listener = ListenThread(lambda: connect_like(engine), CHANNEL, self._wakeups.wake,
                                              self._wakeups.wake_everyone, "jobbridge-results-listen")
            listener = self._listener
        try:
            listener.start()
        except Exception as error:
            log.warning("cannot LISTEN for results (%s); waiting by polling", error)
            return False
        return True

    def forget(self, id: str) -> None:
        with self._write("forget a result") as conn:
            conn.execute(delete(results).where(results.c.id == id))

    def prune(self) -> int:
        now = self.clock.now()
        with self._write("prune expired results") as conn:
            removed = conn.execute(delete(results).where(results.c.expires_at <= now)).rowcount
            removed += conn.execute(delete(cancelled).where(cancelled.c.expires_at <= now)).rowcount
            conn.execute(delete(counters).where(counters.c.expires_at <= now, counters.c.member != ""))
            removed += conn.execute(delete(counters).where(counters.c.expires_at <= now)).rowcount
        return int(removed)

    # -- cancellation ------------------------------------------------------------------------

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        for id in ids:
            check_key(id, "a cancelled id")
        if not ids:
            return
        now = self.clock.now()
        rows = [{"id": id, "cancelled_at": now, "expires_at": now + ttl} for id in dict.fromkeys(ids)]
        with self._write("cancel jobs") as conn:
            conn.execute(self._store_cancel, rows)

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        if not ids:
            return found
        now = self.clock.now()
        if self.dialect == POSTGRESQL:
            # in autocommit: one round trip instead of BEGIN, SELECT, ROLLBACK
            with translated("read cancellations"), self.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                return {row[0] for row in conn.exec_driver_sql(_CANCELLED_ANY, (list(ids), now))}
        mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        with self._read("read cancellations") as conn:
            for chunk in _chunks(ids):
                found.update(row[0] for row in conn.exec_driver_sql(_cancelled_in(mark, len(chunk)), (now, *chunk)))
        return found

    # -- counters ----------------------------------------------------------------------------

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        check_key(key, "a counter key")
        row = {"key": key, "member": "", "remaining": count, "expires_at": self.clock.now() + ttl}
        with self._write("set a counter") as conn:
            conn.execute(_FORGET_MEMBERS, {"ckey": key})
            conn.execute(self._store_counter, row)

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        if member is not None:
            check_key(member, "a counter member")
        with self._write("decrement a counter") as conn:
            found = conn.execute(_COUNTER, {"ckey": key, "now": self.clock.now()}).first()
            if found is None:
                raise UnknownCounter(f"there is no counter {key!r} (never set, expired or pruned)")
            remaining, expires_at = int(found.remaining), float(found.expires_at)
            if member is not None:
                added = conn.execute(self._add_member, {"key": key, "member": member, "expires_at": expires_at})
                if added.rowcount != 1:
                    return remaining  # this member counted already: a rerun after a reclaim
            # the counter row is locked by the SELECT above, so remaining - 1 is what the UPDATE writes
            conn.execute(_TAKE_ONE, {"ckey": key})
        return remaining - 1

    # -- schema and life cycle ---------------------------------------------------------------

    def migrate(self) -> None:
        """Create the tables that are missing (an app with Alembic includes `metadata` instead)."""
        tries = len(metadata.tables) + 1
        for attempt in range(1, tries + 1):
            try:
                with translated("create the result tables"):
                    metadata.create_all(self.engine, checkfirst=True)
                return
            except DriverError:
                # Another process created a table between our check and our CREATE. Each such
                # race means one more table exists, so one try per table always ends it.
                if attempt == tries:
                    raise

    def describe(self) -> str:
        return describe(self.url)

    def close(self) -> None:
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self.engine.dispose()


def _record(row: Row[Any]) -> ResultRecord:
    return ResultRecord(
        id=row.id, state=row.state, name=row.name, result=decode_json(row.result), meta=decode_json(row.meta),
        error=row.error, traceback=row.traceback, exception_type=row.exception_type,
        created_at=float(row.created_at), updated_at=float(row.updated_at), expires_at=float(row.expires_at),
    )


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), CHUNK):
        yield unique[start:start + CHUNK]


def _forget_listener(store: DatabaseResultStore) -> None:
    """In a forked child: no listener thread, and no lock or waiters the parent's threads held."""
    store._listener = None
    store._listener_lock = threading.Lock()
    store._wakeups = Wakeups()


def open_database_store(url: str, *, clock: Clock, migrate: bool = True, **options: Any) -> DatabaseResultStore:
    """A database result store on ``url``, its tables created unless ``migrate`` is false.

    ``options`` are the database connection's timeouts (``connect_timeout``, ``statement_timeout``),
    given when the store is a database connection's own; unwritten, each is the driver's default.
    """
    unknown = sorted(set(options) - set(_TIMEOUTS))
    if unknown:
        raise ConfigurationError(f"unknown setting(s) {', '.join(unknown)} for a database result store; it "
                                 f"accepts migrate, {', '.join(_TIMEOUTS)}")
    timeouts = parse_timeouts({"url": url, **options})
    store = DatabaseResultStore(url, clock=clock, timeouts=timeouts)
    if migrate:
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
    return store
