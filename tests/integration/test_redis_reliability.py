"""The Redis driver with real `jobbridge worker` processes (issue 4).

- a worker killed with SIGKILL mid-job: its jobs run again once their reservation lapses;
- Redis restarted (an instance of the test's own, with AOF) while the workers are idle in a
  blocking read and again mid-drain: the same workers go on consuming new jobs
  (celery/celery#8030, #10302: workers that stop consuming after a reconnect);
- a job longer than the reservation, with its worker alive and a second one idle, runs once.

Jobs record their runs in a file (see reliability_app); the kill and long-job tests use the
shared server under a prefix of their own, the restart test its own server.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from jobbridge import JobBridge
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.drivers.redis_helpers import drop_keys
from tests.drivers.redis_server import own_redis
from tests.integration import reliability_app as app
from tests.integration.reliability_support import FileRunsReader, Workers, duplicates, times_run, wait_for
from tests.services import ensure_redis

pytestmark = pytest.mark.slow

LEASE = 3.0
LONG = 2 * LEASE  # the long job: two whole reservations, with its worker alive throughout
OWN_REDIS_PORT = 6394


class RedisStore:
    """A prefix on a Redis server, a bridge dispatching to it, and workers taking from it."""

    def __init__(self, url: str, prefix: str, tmp: Path, reservation: float, reconnect: bool = False) -> None:
        self.url, self.prefix = url, prefix
        self.runs = FileRunsReader(tmp / "runs.txt")
        self.bridge = JobBridge(Settings.from_mapping({
            "driver": "redis", "redis_url": url, "redis_prefix": prefix, "reservation": reservation,
            "redis_reconnect": reconnect}), jobs=app.ALL)
        self.driver = self.bridge.driver()
        variables = {"JOBBRIDGE_DRIVER": "redis", "JOBBRIDGE_REDIS_URL": url, "JOBBRIDGE_REDIS_PREFIX": prefix,
                     "JOBBRIDGE_RESERVATION": str(reservation), **self.runs.variable}
        if reconnect:
            variables["JOBBRIDGE_REDIS_RECONNECT"] = "true"
        self.workers = Workers(tmp, variables)

    def worker(self, *args: str) -> subprocess.Popen[bytes]:
        proc = self.workers.start(*args)
        wait_for(lambda: "reservation" in self.workers.output(proc), "the worker to start")
        return proc

    def done(self, ids: list[str | None]) -> bool:
        return set(ids) <= self.runs.ids_done()

    def assert_empty(self) -> None:
        assert pending(self.driver, "default") == 0
        assert self.driver.counts() == [], "nothing left ready, delayed or reserved"
        assert self.driver.failed.count() == 0, [f.error for f in self.driver.failed.list(5)]

    def close(self) -> None:
        self.workers.close()
        self.bridge.close()


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Callable[..., RedisStore]]:
    """Stores on the shared server, each under a prefix of its own, deleted afterwards."""
    url = ensure_redis()
    made: list[RedisStore] = []

    def make(**options: object) -> RedisStore:
        store = RedisStore(url, f"jbrel:{uuid.uuid4().hex[:12]}:", tmp_path, **options)  # type: ignore[arg-type]
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
        drop_keys(url, store.prefix)


def test_a_worker_killed_mid_job_has_its_jobs_run_again_after_the_reservation(
    shared: Callable[..., RedisStore],
) -> None:
    store = shared(reservation=LEASE)
    slow = store.bridge.dispatch_many(app.Slow(tag=f"slow{i}", seconds=3) for i in range(4))
    first = store.workers.start("--concurrency", "4", "--sleep", "0.05")
    wait_for(lambda: len(store.runs.all()) == 4, "the first worker to start all four")
    quick = store.bridge.dispatch_many(app.Tick(n=i) for i in range(200))  # pushed while it is busy
    store.workers.kill(first)
    killed_at = time.monotonic()
    assert store.runs.ids_done() == set(), "killed mid-job: nothing finished"
    (counts,) = store.driver.counts()
    assert counts.reserved == 4, "the dead worker's four are still reserved"

    second = store.workers.start("--concurrency", "4", "--sleep", "0.05")
    wait_for(lambda: store.done(slow + quick), "every job to run on the second worker")
    came_back = time.monotonic() - killed_at
    wait_for(lambda: pending(store.driver, "default") == 0, "the acknowledgements")
    assert store.workers.stop([second]) == {second.pid: 0}
    store.assert_empty()

    runs = store.runs.all()
    for job_id in slow:
        cut, again = [run for run in runs if run.job_id == job_id]
        assert (cut.pid, cut.attempt, cut.finished_at) == (first.pid, 1, None)
        assert (again.pid, again.attempt) == (second.pid, 2) and again.finished_at is not None
    ran = times_run(runs)
    assert all(ran[str(job_id)] == 1 for job_id in quick), "the jobs pushed meanwhile ran once each"
    print(f"\n[redis kill -9] 4 jobs cut off mid-run and 200 pushed meanwhile: {len(runs)} runs; each cut-off "
          f"job ran again as attempt 2, done {came_back:.1f}s after the kill (lease {LEASE:g}s, job 3s); "
          "nothing pending or failed")


def blocked_clients(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("clients")["blocked_clients"])
    finally:
        client.close()


def test_workers_go_on_consuming_after_redis_restarts(tmp_path: Path) -> None:
    with own_redis(OWN_REDIS_PORT, tmp_path, "--appendonly", "yes") as server:
        store = RedisStore(server.url, "jbrel:", tmp_path, reservation=5, reconnect=True)
        try:
            # a long --sleep: an idle worker sits in XREADGROUP BLOCK, where Celery's consumers went deaf
            procs = [store.worker("--concurrency", "4", "--sleep", "5") for _ in range(2)]
            first = store.bridge.dispatch_many(app.Tick(n=i) for i in range(300))
            wait_for(lambda: store.done(first), "the first batch")

            wait_for(lambda: blocked_clients(server.url) >= 2, "both workers to block in XREADGROUP")
            server.restart()  # SIGKILL and start again on the same port at once; the AOF is replayed
            second = store.bridge.dispatch_many(app.Work(n=i, ms=2) for i in range(2000))
            wait_for(lambda: len(store.runs.all()) >= len(first) + 300, "the second batch to be draining")

            server.kill()  # mid-drain, and down until every worker's reconnect attempts have run out
            ran_at_restart = len(store.runs.all())
            wait_for(lambda: all("store call" in store.workers.output(p) for p in procs),
                     "each worker to give up reconnecting and log a failed store call")
            server.start()
            wait_for(lambda: store.done(second), "the second batch, after a restart mid-drain")
            third = store.bridge.dispatch_many(app.Tick(n=i) for i in range(300))
            wait_for(lambda: store.done(third), "jobs dispatched after the restarts, to the same workers")
            wait_for(lambda: pending(store.driver, "default") == 0, "every job to be acknowledged")
            wait_for(lambda: blocked_clients(server.url) >= 2, "both workers to block again, on the new server")
            assert all(proc.poll() is None for proc in procs), "no worker died or was restarted"
            runs = store.runs.all()
            assert {run.pid for run in runs if run.job_id in set(third)} <= {proc.pid for proc in procs}
            codes = store.workers.stop(procs)
            assert set(codes.values()) == {0}, codes
            store.assert_empty()
            failures = sum(store.workers.output(p).count("store call") for p in procs)
            print(f"\n[redis restart] 2 workers x 4 threads, reconnect on; restarted while both were blocked in "
                  f"XREADGROUP, then killed mid-drain ({ran_at_restart - len(first)} of {len(second)} run) and "
                  f"kept down until each worker logged a failed store call ({failures} in all); "
                  f"{len(first)} + {len(second)} + {len(third)} jobs all ran ({len(runs)} runs, "
                  f"{duplicates(runs)} duplicates); the same two workers ran the batch dispatched after")
            assert ran_at_restart < len(first) + len(second), "the second restart came mid-drain"
        finally:
            store.close()


def test_a_job_longer_than_its_reservation_runs_once_with_its_worker_alive(
    shared: Callable[..., RedisStore],
) -> None:
    store = shared(reservation=LEASE)
    workers = [store.worker("--concurrency", "2", "--sleep", "0.05") for _ in range(2)]
    job_id = store.bridge.dispatch(app.Slow(tag="long", seconds=LONG))
    wait_for(lambda: store.done([job_id]), "the long job", timeout=60)
    wait_for(lambda: pending(store.driver, "default") == 0, "its acknowledgement")
    assert all(proc.poll() is None for proc in workers)
    codes = store.workers.stop(workers)
    assert set(codes.values()) == {0}, codes
    store.assert_empty()

    (run,) = store.runs.all()
    assert run.attempt == 1 and run.finished_at is not None
    took = run.finished_at - run.started_at
    assert took >= LONG
    print(f"\n[redis long job] one run of {took:.1f}s with a {LEASE:g}s reservation ({took / LEASE:.1f} "
          f"reservations), attempt 1, beside a second worker that reclaims every {LEASE / 2:g}s")
