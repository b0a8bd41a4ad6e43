"""The database driver with real `jobbridge worker` processes on PostgreSQL and MariaDB (issue 3).

- exactly once without faults: 8 processes x 4 threads drain 20,000 jobs;
- at least once under faults: one worker SIGKILLed and replaced every 1,000 finished runs (every
  second or two here) while 10,000 jobs drain, with a 3 s reservation (nine kills, as many as over
  20,000 jobs at 2,000 apart: the kills are the point, not the jobs between them); every duplicate is
  accounted for by a job in flight in a killed worker: started by it and not yet acknowledged when
  it died, whether cut off mid-run or finished with its acknowledgement still waiting for the
  worker's next batch (the larger share: see the counts the test prints);
- a PostgreSQL restart (a server of the test's own) mid-drain, with dispatches across it.

Each job records its own runs in ``jb_runs`` on the same server (see reliability_app), with no
unique constraint, so a job that ran twice is two rows. Every wait polls against a deadline.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import text

from jobbridge import JobBridge
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.errors import DriverUnavailable
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.drivers.database_servers import fresh_mariadb, fresh_postgres
from tests.integration import reliability_app as app
from tests.integration.pg_server import own_postgres
from tests.integration.reliability_support import SqlRunsReader, Workers, duplicates, times_run, wait_for

pytestmark = pytest.mark.slow

JOBS = 20_000
FAULT_JOBS = 10_000  # the fault test's: nine kills need no more
PROCESSES = 8
THREADS = 4
LEASE = 3.0  # seconds: short, so a killed worker's jobs come back within the test
WORK_MS = 5.0  # each job of the fault test sleeps this long between its start and finish records
KILL_EVERY = 1_000  # finished runs between two kills
KILLS = FAULT_JOBS // KILL_EVERY - 1  # the last one still mid-drain
OWN_PG_PORT = 5440


class Store:
    """A fresh schema (PostgreSQL) or database (MariaDB) with its runs table, a bridge and the workers."""

    def __init__(self, url: str, tmp: Path, reservation: float, runs_url: str | None = None) -> None:
        self.url = url
        self.runs = SqlRunsReader(runs_url or url)
        self.bridge = JobBridge(Settings.from_mapping({"database_url": url, "reservation": reservation}),
                                jobs=app.ALL)
        driver = self.bridge.driver()  # opening it creates the tables
        assert isinstance(driver, DatabaseDriver)
        self.driver = driver
        self.workers = Workers(tmp, {"JOBBRIDGE_DATABASE_URL": url, "JOBBRIDGE_RESERVATION": str(reservation),
                                     **self.runs.variable})

    def reserved_ids(self) -> set[str]:
        with self.driver.engine.connect() as conn:
            return set(conn.execute(text("SELECT id FROM jobbridge_jobs WHERE token IS NOT NULL")).scalars())

    def assert_empty(self) -> None:
        assert self.driver.counts() == [], "nothing left ready, delayed or reserved"
        assert self.driver.failed.count() == 0, [f.error for f in self.driver.failed.list(5)]

    def close(self) -> None:
        self.workers.close()
        self.bridge.close()
        self.runs.close()


@pytest.fixture(params=["postgresql", "mariadb"])
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def open_store(dialect: str, tmp: Path, reservation: float) -> Iterator[Store]:
    fresh = fresh_postgres if dialect == "postgresql" else fresh_mariadb
    with fresh() as url:
        store = Store(url, tmp, reservation)
        try:
            yield store
        finally:
            store.close()


# ---------------------------------------------------------------- 1. exactly once without faults


def test_eight_processes_drain_20000_jobs_each_exactly_once(dialect: str, tmp_path: Path) -> None:
    with open_store(dialect, tmp_path, reservation=60) as store:  # nothing may lapse: no faults here
        ids = store.bridge.dispatch_many(app.Tick(n=i) for i in range(JOBS))
        began = time.monotonic()
        procs = [store.workers.start("--concurrency", str(THREADS), "--sleep", "0.05", "--stop-when-empty",
                                     "-l", "warning") for _ in range(PROCESSES)]
        for proc in procs:
            assert store.workers.exited(proc, 240) == 0, store.workers.output(proc)[-3000:]
        took = time.monotonic() - began

        ran = times_run(store.runs.all())
        assert set(ran) == set(ids) and len(ran) == JOBS, "every job ran"
        assert [job for job, times in ran.items() if times != 1] == [], "and each exactly once"
        store.assert_empty()
        per_process = [store.workers.processed(p) for p in procs]
        assert sum(per_process) == JOBS
        print(f"\n[{dialect}] exactly once: {JOBS} jobs, {PROCESSES} processes x {THREADS} threads, "
              f"{sum(ran.values())} runs, 0 duplicates, per process {per_process}, drained in {took:.1f}s")


# ---------------------------------------------------------------- 2. at least once under SIGKILL


@dataclass
class Kill:
    """One SIGKILL: the victim, and the jobs reserved in the store the moment after it died."""

    pid: int
    at: float
    reserved: set[str] = field(default_factory=set)


def next_victim(store: Store, slots: list[subprocess.Popen[bytes]], turn: int) -> int | None:
    """The next worker, in turn, that is in the middle of a job right now."""
    with store.runs.engine.connect() as conn:
        busy = set(conn.execute(text("SELECT DISTINCT pid FROM jb_runs WHERE finished_at IS NULL")).scalars())
    for step in range(len(slots)):
        index = (turn + step) % len(slots)
        if slots[index].pid in busy:
            return index
    return None


def test_a_worker_sigkilled_every_few_seconds_loses_nothing(dialect: str, tmp_path: Path) -> None:
    with open_store(dialect, tmp_path, reservation=LEASE) as store:
        ids = store.bridge.dispatch_many(app.Work(n=i, ms=WORK_MS) for i in range(FAULT_JOBS))
        args = ("--concurrency", str(THREADS), "--sleep", "0.05", "-l", "warning")
        slots = [store.workers.start(*args) for _ in range(PROCESSES)]
        began = time.monotonic()
        kills: list[Kill] = []
        turn = 0
        deadline = began + 240
        while pending(store.driver, "default"):  # until every job is acknowledged
            assert time.monotonic() < deadline, "timed out waiting for every job to be acknowledged"
            due = len(kills) < KILLS and store.runs.finished() >= KILL_EVERY * (len(kills) + 1)
            index = next_victim(store, slots, turn) if due else None
            if index is not None:
                victim = slots[index]
                store.workers.kill(victim)
                kills.append(Kill(victim.pid, time.monotonic() - began, store.reserved_ids()))
                slots[index] = store.workers.start(*args)  # the replacement
                turn = index + 1
            time.sleep(0.01 if due else 0.1)  # the polling interval: closer while a kill is due
        took = time.monotonic() - began
        codes = store.workers.stop(store.workers.live())
        assert set(codes.values()) == {0}, codes
        store.assert_empty()

        runs = store.runs.all()
        ran = times_run(runs)
        assert set(ran) == set(ids), f"every job ran at least once ({len(set(ids) - set(ran))} never ran)"
        killed = {k.pid for k in kills}
        assert len(kills) >= 5 and all(run.finished_at is not None for run in runs if run.pid not in killed), \
            "only a killed worker leaves a run unfinished"

        # In flight in a killed worker: a job it had started and whose acknowledgement it had not stored
        # when it died. Started-but-unfinished ones, and finished ones still in the store's reserved rows
        # (the outcome waits for the next batched acknowledgement), both run again.
        unfinished = finished_unacked = 0
        in_flight: Counter[str] = Counter()
        for kill in kills:
            mine = [run for run in runs if run.pid == kill.pid]
            cut = {run.job_id for run in mine if run.finished_at is None}
            unacked = {run.job_id for run in mine if run.finished_at is not None} & kill.reserved
            unfinished += len(cut)
            finished_unacked += len(unacked)
            in_flight.update(cut | unacked)
        extra = duplicates(runs)
        unexplained = {job: times - 1 for job, times in ran.items() if times - 1 > in_flight[job]}
        print(f"\n[{dialect}] at least once under SIGKILL: {FAULT_JOBS} jobs ({WORK_MS:g} ms each), "
              f"{PROCESSES} workers x {THREADS} threads, lease {LEASE:g}s, {len(kills)} kills at "
              f"{', '.join(f'{k.at:.1f}' for k in kills)}s; {len(runs)} runs, {extra} duplicates; in flight in "
              f"killed workers: {unfinished + finished_unacked} ({unfinished} started and unfinished, "
              f"{finished_unacked} finished, not yet acknowledged); drained in {took:.1f}s")
        assert unfinished > 0, "the kills cut jobs off mid-run"
        assert extra <= sum(in_flight.values()), "duplicates are at most the jobs in flight in killed workers"
        assert unexplained == {}, "every job that ran again was in flight in a killed worker"


# ---------------------------------------------------------------- 3. a PostgreSQL restart mid-drain


class Dispatcher(threading.Thread):
    """Dispatches jobs one at a time until stopped, retrying through DriverUnavailable; keeps every id."""

    def __init__(self, bridge: JobBridge) -> None:
        super().__init__(name="dispatcher", daemon=True)
        self.bridge = bridge
        self.ids: list[str] = []
        self.refused = 0
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        try:
            while not self.halt.is_set():
                try:
                    job_id = self.bridge.dispatch(app.Tick(n=n))
                except DriverUnavailable:
                    self.refused += 1
                    self.halt.wait(0.02)  # the pace of retries, not a wait for anything
                    continue
                assert job_id is not None
                self.ids.append(job_id)
                n += 1
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_a_postgresql_restart_mid_drain_loses_no_dispatched_job(tmp_path: Path) -> None:
    with own_postgres(OWN_PG_PORT) as server, fresh_postgres() as runs_url:
        store = Store(server.url, tmp_path, reservation=5, runs_url=runs_url)  # runs on the shared server
        dispatcher = Dispatcher(store.bridge)
        try:
            backlog = store.bridge.dispatch_many(app.Work(n=i, ms=WORK_MS) for i in range(4000))
            procs = [store.workers.start("--concurrency", str(THREADS), "--sleep", "0.05") for _ in range(2)]
            wait_for(lambda: store.runs.count() >= 400, "the workers to be draining")
            dispatcher.start()
            wait_for(lambda: len(dispatcher.ids) >= 50, "dispatches before the restart")

            server.stop("immediate")  # a crash: connections cut, recovery from the WAL on start
            wait_for(lambda: dispatcher.refused > 0, "a dispatch to meet the stopped server")
            wait_for(lambda: all("store call" in store.workers.output(p) for p in procs),
                     "each worker to meet the stopped server")
            ran_at_restart = store.runs.count()
            before = len(dispatcher.ids)
            server.start()
            wait_for(lambda: len(dispatcher.ids) >= before + 300, "dispatches after the restart")
            dispatcher.halt.set()
            dispatcher.join(30)
            assert dispatcher.error is None, repr(dispatcher.error)

            wanted = set(backlog) | set(dispatcher.ids)
            wait_for(lambda: wanted <= store.runs.ids_run(), "every returned id to run, without new workers")
            wait_for(lambda: pending(store.driver, "default") == 0, "every job to be acknowledged")
            assert all(proc.poll() is None for proc in procs), "the workers rode the restart out"
            codes = store.workers.stop(procs)
            assert set(codes.values()) == {0}, codes
            store.assert_empty()

            runs = store.runs.all()
            lost = wanted - {run.job_id for run in runs}
            assert lost == set(), f"{len(lost)} dispatched ids never ran"
            failures = sum(store.workers.output(p).count("store call") for p in procs)
            print(f"\n[postgresql restart] {len(backlog)} queued + {len(dispatcher.ids)} dispatched one at a time "
                  f"({before} before, {len(dispatcher.ids) - before} after the restart; {dispatcher.refused} "
                  f"refused while it was down); {ran_at_restart} runs when it stopped; {len(runs)} runs, "
                  f"{duplicates(runs)} duplicates; the workers logged {failures} failed store calls")
            assert ran_at_restart < len(backlog), "the restart came mid-drain"
        finally:
            dispatcher.halt.set()
            store.close()
