"""The app `jobbridge worker -A tests.integration.reliability_app:make_bridge` runs in the reliability tests.

Settings come from each process's environment (``JOBBRIDGE_*``). Every job
records each run it makes in the store named by ``JB_REL_RUNS``:

- ``postgresql://...`` or ``mysql://...``: a row of ``jb_runs`` (``run_id, job_id, pid, attempt,
  started_at, finished_at``), with no unique constraint, so a job run twice is two rows;
- ``file:///abs/path``: one line per event, appended with ``O_APPEND``:
  ``start|done <run key> <job id> <pid> <attempt> <epoch seconds> <tag>``.

A run is written when the job starts; its ``finished_at`` (or ``done`` line)
when its work is over, just before ``handle`` returns, so "started but not
finished" is exactly a run cut off in the middle.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import make_url

from jobbridge import Backoff, Job, JobBridge, JobContext
from jobbridge.settings import Settings

RUNS_VARIABLE = "JB_REL_RUNS"
#: connections one process keeps to a SQL runs store: few, the shared servers' slots are limited
POOL = 2
#: enough that a job reserved (and counted as an attempt) by several killed workers still runs
TRIES = 25

RUNS_TABLE = {
    "postgresql": (
        "CREATE UNLOGGED TABLE jb_runs (run_id BIGSERIAL PRIMARY KEY, job_id VARCHAR(36) NOT NULL, "
        "pid INTEGER NOT NULL, attempt INTEGER NOT NULL, started_at DOUBLE PRECISION NOT NULL, "
        "finished_at DOUBLE PRECISION)"
    ),
    # MEMORY: no fsync per run on a server whose commits all wait for one (the server is never restarted)
    "mysql": (
        "CREATE TABLE jb_runs (run_id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id VARCHAR(36) NOT NULL, "
        "pid INT NOT NULL, attempt INT NOT NULL, started_at DOUBLE NOT NULL, finished_at DOUBLE NULL) "
        "ENGINE=MEMORY"
    ),
}


class SqlRuns:
    """Runs as rows, written through a small per-process pool of autocommit DBAPI connections."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.parsed = make_url(url)
        self.kind = self.parsed.get_backend_name()
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        if self.kind == "postgresql":
            import psycopg

            return psycopg.connect(self.url, autocommit=True)
        import pymysql

        p = self.parsed
        return pymysql.connect(host=p.host or "127.0.0.1", port=p.port or 3306, user=p.username or "root",
                               password=p.password or "", database=p.database, autocommit=True)

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        with self._lock:
            grow = self._idle.empty() and self._made < POOL
            if grow:
                self._made += 1
        try:
            conn = self._connect() if grow else self._idle.get()
        except BaseException:
            with self._lock:
                self._made -= 1
            raise
        try:
            yield conn
        except BaseException:
            conn.close()  # a broken connection is not handed to the next job
            with self._lock:
                self._made -= 1
            raise
        self._idle.put(conn)

    def start(self, ctx: JobContext, finished: bool = False) -> int:
        now = time.time()
        row = (ctx.id, os.getpid(), ctx.attempt, now, now if finished else None)
        with self._conn() as conn:
            if self.kind == "postgresql":
                found = conn.execute(
                    "INSERT INTO jb_runs (job_id, pid, attempt, started_at, finished_at) "
                    "VALUES (%s, %s, %s, %s, %s) RETURNING run_id", row).fetchone()
                return int(found[0])
            with conn.cursor() as cur:
                cur.execute("INSERT INTO jb_runs (job_id, pid, attempt, started_at, finished_at) "
                            "VALUES (%s, %s, %s, %s, %s)", row)
                return int(cur.lastrowid)

    def finish(self, run: int) -> None:
        with self._conn() as conn:
            if self.kind == "postgresql":
                conn.execute("UPDATE jb_runs SET finished_at = %s WHERE run_id = %s", (time.time(), run))
                return
            with conn.cursor() as cur:
                cur.execute("UPDATE jb_runs SET finished_at = %s WHERE run_id = %s", (time.time(), run))


class FileRuns:
    """Runs as lines of a file, each one ``write`` with ``O_APPEND``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _write(self, *fields: object) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (" ".join(map(str, fields)) + "\n").encode())
        finally:
            os.close(fd)

    def start(self, ctx: JobContext, tag: str = "-") -> str:
        run = uuid.uuid4().hex
        self._write("start", run, ctx.id, os.getpid(), ctx.attempt, repr(time.time()), tag)
        return run

    def finish(self, run: str, ctx: JobContext, tag: str = "-") -> None:
        self._write("done", run, ctx.id, os.getpid(), ctx.attempt, repr(time.time()), tag)


_runs: dict[int, SqlRuns | FileRuns] = {}
_runs_lock = threading.Lock()


def runs() -> SqlRuns | FileRuns:
    """This process's runs store (one per pid, so nothing opened before a fork is shared)."""
    with _runs_lock:
        found = _runs.get(os.getpid())
        if found is None:
            target = os.environ[RUNS_VARIABLE]
            found = FileRuns(target.removeprefix("file://")) if target.startswith("file://") else SqlRuns(target)
            _runs[os.getpid()] = found
        return found


class Tick(Job, name="rel.tick", tries=TRIES, backoff=Backoff.fixed(0)):
    """Trivial: one write, the run started and finished at once."""

    n: int

    def handle(self, ctx: JobContext) -> None:
        store = runs()
        if isinstance(store, SqlRuns):
            store.start(ctx, finished=True)
        else:
            store.finish(store.start(ctx), ctx)


class Work(Job, name="rel.work", tries=TRIES, backoff=Backoff.fixed(0)):
    """A few milliseconds of work between a start and a finish record: work in flight to cut off."""

    n: int
    ms: float

    def handle(self, ctx: JobContext) -> None:
        store = runs()
        if isinstance(store, SqlRuns):
            run = store.start(ctx)
            time.sleep(self.ms / 1000)
            store.finish(run)
        else:
            key = store.start(ctx)
            time.sleep(self.ms / 1000)
            store.finish(key, ctx)


class Slow(Job, name="rel.slow", timeout=120, tries=TRIES, backoff=Backoff.fixed(0)):
    """Seconds of work, tagged, for the kill and long-job tests."""

    tag: str
    seconds: float

    def handle(self, ctx: JobContext) -> None:
        store = runs()
        assert isinstance(store, FileRuns), "Slow records to a file"
        key = store.start(ctx, self.tag)
        time.sleep(self.seconds)
        store.finish(key, ctx, self.tag)


ALL = [Tick, Work, Slow]


def make_bridge() -> JobBridge:
    return JobBridge(Settings.load(), jobs=ALL)
