"""Each store's own limit under its table: a bare client claiming, reading and acknowledging jobs, in the same run.

Issue 19 sets jobbridge's processing targets as a share of what the store
itself allows, so the store's figure has to come from the same machine at the
same moment: a slower machine, or a busier one, moves both together, and only
the share says what jobbridge costs. Here a client with no job library at all
drains ``--jobs`` queued bodies of a no-op job's size (about 250 bytes of JSON),
on one connection in one thread, 100 at a time: it claims a batch, parses each
body with orjson (a worker must read each job), and acknowledges the batch.

- Redis (redis-py, with hiredis when installed, as jobbridge): ``XREADGROUP
  COUNT 100``, then one ``XACK`` of those ids; a stream of its own on DB 15.
- PostgreSQL (psycopg): ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP
  LOCKED) RETURNING``, then ``DELETE … WHERE id = ANY(…)``, each statement its
  own transaction, with ``synchronous_commit = off`` as jobbridge's claims run.
- MariaDB (PyMySQL): ``SELECT … FOR UPDATE SKIP LOCKED`` and ``UPDATE`` in one
  transaction (no ``UPDATE … RETURNING``), then the ``DELETE`` in another, at
  READ COMMITTED as jobbridge's driver.
- SQLite (sqlite3, WAL, ``synchronous=NORMAL`` as jobbridge's claims): the
  ``UPDATE … RETURNING`` claim under ``BEGIN IMMEDIATE``, then the ``DELETE``
  in a transaction of its own.

Each store's jobs are written before the clock starts, to a table, a stream or
a file of the floor's own, dropped at the end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from benchmarks.common import Options
from benchmarks.report import Row
from benchmarks.stores import BENCH_DB, SQLITE_FILE, ensure_mysql_database, ensure_pg_database, mysql_url, pg_url

BATCH = 100
QUEUE = "default"
TABLE = "jb_floor_jobs"
#: the Redis DB index of the floor's stream: only that stream is deleted (benchmarks.dashboard and
#: benchmarks.schedules flush this index when they run)
REDIS_DB = 15
STREAM, GROUP = "jb-floor", "jb-floor"
SQLITE_FLOOR = SQLITE_FILE.with_name("floor.sqlite3")
SCENARIO = "process: claim 100, parse, acknowledge"
NOTE = "a bare client's batch claim and acknowledge, one connection: the store's limit"

#: what the client reads per job and how it acknowledges a batch
Claim = Callable[[], Sequence[tuple[Any, Any]]]
Acknowledge = Callable[[list[Any]], None]


@dataclass
class Drained:
    """What one drain did: the jobs claimed, parsed and acknowledged, in how many seconds and CPU-seconds."""

    jobs: int
    seconds: float
    cpu: float


def body(number: int) -> bytes:
    """A no-op job's body as jobbridge stores it (its size is what matters), with an id of its own."""
    return orjson.dumps({
        "v": 1, "id": f"01a23208-35d0-7576-9bd7-{number:012d}", "name": "bench.noop", "queue": QUEUE,
        "payload": {}, "tries": 3, "timeout": 600.0, "available_at": 1796135814.6993937,
        "created_at": 1796135814.6993937, "attempts": 0, "unique_key": None, "unique_for": None, "headers": {},
    })


def drain(claim: Claim, acknowledge: Acknowledge, count: int, limit: float) -> Drained:
    """The timed part, the same for every store: claim a batch, parse each body, acknowledge the batch."""
    drained = 0
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + limit
    while drained < count:
        batch = claim()
        if not batch:
            break
        ids = []
        for job_id, data in batch:
            orjson.loads(data)["name"]
            ids.append(job_id)
        acknowledge(ids)
        drained += len(ids)
        if time.perf_counter() > deadline:
            break
    return Drained(drained, time.perf_counter() - start, time.process_time() - cpu)


# -- Redis -------------------------------------------------------------------------------------------


def drain_redis(url: str, count: int, *, stream: str = STREAM, limit: float = 30.0) -> Drained:
    """``count`` entries XADDed to ``stream`` on ``url``'s DB, read 100 at a time by one consumer and XACKed."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        client.delete(stream)
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
        for start in range(0, count, 1000):
            pipe = client.pipeline(transaction=False)
            for number in range(start, min(count, start + 1000)):
                pipe.xadd(stream, {"body": body(number)})
            pipe.execute()

        def claim() -> list[tuple[Any, Any]]:
            reply: Any = client.xreadgroup(GROUP, "floor", {stream: ">"}, count=BATCH)
            return [(entry_id, fields[b"body"]) for entry_id, fields in reply[0][1]] if reply else []

        def acknowledge(ids: list[Any]) -> None:
            client.xack(stream, GROUP, *ids)

        return drain(claim, acknowledge, count, limit)
    finally:
        with contextlib.suppress(Exception):
            client.delete(stream)
        client.close()


# -- PostgreSQL --------------------------------------------------------------------------------------


def drain_postgres(url: str, count: int, *, table: str = TABLE, limit: float = 30.0) -> Drained:
    """``count`` rows in ``table``, claimed 100 at a time with SKIP LOCKED and deleted, in autocommit."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        try:
            conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, queue text NOT NULL, body bytea NOT NULL, "
                         "status text NOT NULL DEFAULT 'ready', locked_until double precision)")
            with conn.cursor() as cur, cur.copy(f"COPY {table} (queue, body) FROM STDIN") as copy:
                for number in range(count):
                    copy.write_row((QUEUE, body(number)))
            conn.execute(f"VACUUM ANALYZE {table}")
            pick = (f"SELECT id FROM {table} WHERE queue = %s AND status = 'ready' ORDER BY id LIMIT {BATCH} "
                    "FOR UPDATE SKIP LOCKED")
            claim_sql = (f"UPDATE {table} SET status = 'reserved', locked_until = %s WHERE id IN ({pick}) "
                         "RETURNING id, body")
            delete_sql = f"DELETE FROM {table} WHERE id = ANY(%s)"

            def claim() -> list[tuple[Any, Any]]:
                return conn.execute(claim_sql, (time.time() + 600, QUEUE)).fetchall()

            def acknowledge(ids: list[Any]) -> None:
                conn.execute(delete_sql, (ids,))

            return drain(claim, acknowledge, count, limit)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


# -- MariaDB -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _mysql(url: str) -> Iterator[Any]:
    import pymysql

    parts = urlsplit(url)
    conn = pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                           user=parts.username or "root", password=parts.password or "",
                           database=parts.path.lstrip("/") or None, connect_timeout=5, autocommit=False)
    try:
        yield conn
    finally:
        conn.close()


def drain_mysql(url: str, count: int, *, table: str = TABLE, limit: float = 30.0) -> Drained:
    """``count`` rows in ``table``: locked and marked 100 at a time in one transaction, deleted in the next."""
    with _mysql(url) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        try:
            cur.execute(f"CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY, queue varchar(191) NOT NULL, "
                        "body blob NOT NULL, status varchar(16) NOT NULL DEFAULT 'ready', locked_until double) "
                        "ENGINE=InnoDB")
            for start in range(0, count, 1000):
                cur.executemany(f"INSERT INTO {table} (queue, body) VALUES (%s, %s)",
                                [(QUEUE, body(n)) for n in range(start, min(count, start + 1000))])
            conn.commit()
            pick = (f"SELECT id, body FROM {table} WHERE queue = %s AND status = 'ready' ORDER BY id "
                    f"LIMIT {BATCH} FOR UPDATE SKIP LOCKED")

            def claim() -> Sequence[tuple[Any, Any]]:
                cur.execute(pick, (QUEUE,))
                rows: Sequence[tuple[Any, Any]] = cur.fetchall()
                if rows:
                    marks = ", ".join(["%s"] * len(rows))
                    cur.execute(f"UPDATE {table} SET status = 'reserved', locked_until = %s WHERE id IN ({marks})",
                                (time.time() + 600, *(row[0] for row in rows)))
                conn.commit()
                return rows

            def acknowledge(ids: list[Any]) -> None:
                cur.execute(f"DELETE FROM {table} WHERE id IN ({', '.join(['%s'] * len(ids))})", ids)
                conn.commit()

            return drain(claim, acknowledge, count, limit)
        finally:
            conn.rollback()
            cur.execute(f"DROP TABLE IF EXISTS {table}")


# -- SQLite ------------------------------------------------------------------------------------------


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def drain_sqlite(path: Path, count: int, *, limit: float = 30.0) -> Drained:
    """``count`` rows in a new WAL file at ``path``: claimed under BEGIN IMMEDIATE, deleted in the next; removed."""
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_sqlite(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, body BLOB NOT NULL, "
                     "status TEXT NOT NULL DEFAULT 'ready', locked_until REAL)")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO {TABLE} (queue, body) VALUES (?, ?)",
                         ((QUEUE, body(n)) for n in range(count)))
        conn.execute("COMMIT")
        claim_sql = (f"UPDATE {TABLE} SET status = 'reserved', locked_until = ? WHERE id IN (SELECT id FROM {TABLE} "
                     f"WHERE queue = ? AND status = 'ready' ORDER BY id LIMIT {BATCH}) RETURNING id, body")

        def claim() -> list[tuple[Any, Any]]:
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(claim_sql, (time.time() + 600, QUEUE)).fetchall()
            conn.execute("COMMIT")
            return rows

        def acknowledge(ids: list[Any]) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join('?' * len(ids))})", ids)
            conn.execute("COMMIT")

        return drain(claim, acknowledge, count, limit)
    finally:
        conn.close()
        _remove_sqlite(path)


# -- the rows under each table -----------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """One store's bare client: its label (the first word is what ``--only`` selects), how it drains, the key of
    jobbridge's row it is set beside, and what the note adds."""

    library: str
    key: str
    run: Callable[[int, float], Drained]
    detail: str


FLOORS = {
    "redis": Floor("redis-py (bare)", "process-default",
                   lambda n, limit: drain_redis(f"{_redis_server()}/{REDIS_DB}", n, limit=limit),
                   "XREADGROUP COUNT 100, XACK"),
    "postgres": Floor("psycopg (bare)", "process-1p", lambda n, limit: _postgres(n, limit),
                      "UPDATE … SKIP LOCKED RETURNING, DELETE; autocommit, synchronous_commit off"),
    "mysql": Floor("pymysql (bare)", "process-1p", lambda n, limit: _mysql_floor(n, limit),
                   "SELECT … FOR UPDATE SKIP LOCKED + UPDATE, commit; DELETE, commit"),
    "sqlite": Floor("sqlite3 (bare)", "process-1p", lambda n, limit: drain_sqlite(SQLITE_FLOOR, n, limit=limit),
                    "UPDATE … RETURNING, DELETE; each under BEGIN IMMEDIATE; WAL, synchronous=NORMAL"),
}


def _redis_server() -> str:
    from benchmarks.apps import REDIS

    return REDIS


def _postgres(count: int, limit: float) -> Drained:
    ensure_pg_database(BENCH_DB)
    return drain_postgres(pg_url(BENCH_DB), count, limit=limit)


def _mysql_floor(count: int, limit: float) -> Drained:
    ensure_mysql_database(BENCH_DB)
    return drain_mysql(mysql_url(BENCH_DB), count, limit=limit)


def word(store: str) -> str:
    """What ``--only`` names this store's bare client by: the first word of its label."""
    return FLOORS[store].library.split()[0]


def run(store: str, opts: Options) -> list[Row]:
    """The store's bare-client row, or a row saying why there is none."""
    floor = FLOORS[store]
    try:
        done = floor.run(opts.jobs, opts.time_limit)
    except Exception as exc:
        return [Row(floor.library, floor.key, SCENARIO, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])]
    row = Row(floor.library, floor.key, SCENARIO, done.jobs, done.seconds, note=f"{NOTE} ({floor.detail})")
    if done.cpu > 0:
        row.per_cpu = done.jobs / done.cpu
    if done.jobs < opts.jobs:
        row.note += f"; stopped at the {opts.time_limit:g}s limit: {done.jobs} of {opts.jobs} done"
    return [row]
