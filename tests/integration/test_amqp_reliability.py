"""The amqp driver with real `jobbridge worker` processes.

- 10,000 jobs, 3 workers, one SIGKILLed every ~2 s and replaced: none lost, none stuck, and the
  duplicates bounded by what the killed workers held (their deliveries come back the moment their
  connection drops, as a new attempt);
- a RabbitMQ node of the test's own restarted mid-drain: the workers resume unaided, every id a
  dispatch returned runs, and a dispatch during the outage fails within its timeout;
- a 2-hour countdown on 1,000 jobs (delays shortened by ``delay_scale``) on a node whose
  ``consumer_timeout`` is 5 s: no worker holds them while they wait, and none runs twice.

Jobs record their runs in a file (tests/integration/reliability_app.py). The shared node (a vhost of
this module's own) serves the first test; the others start nodes of their own.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.errors import DriverUnavailable
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from jobbridge.worker_window import MAX_AHEAD
from tests.drivers.amqp_servers import OwnNode, fresh_vhost, url_for
from tests.drivers.redis_helpers import drop_keys
from tests.integration import amqp_app
from tests.integration import reliability_app as app
from tests.integration.reliability_support import FileRunsReader, Workers, duplicates, times_run, wait_for
from tests.services import ensure_redis

pytestmark = pytest.mark.slow

CONCURRENCY = 4


class AmqpStore:
    """A prefix on a RabbitMQ vhost (Redis its shared store), a bridge dispatching to it, and workers."""

    def __init__(self, url: str, tmp: Path, **extra: str) -> None:
        self.redis_url, self.redis_prefix = ensure_redis(), f"jbamqprel:{uuid.uuid4().hex[:10]}:"
        self.runs = FileRunsReader(tmp / "runs.txt")
        self.env = {"JB_AMQP_URL": url, "JB_AMQP_PREFIX": f"jbrel{uuid.uuid4().hex[:8]}.",
                    "JB_AMQP_REDIS_URL": self.redis_url, "JB_AMQP_REDIS_PREFIX": self.redis_prefix, **extra}
        self.bridge = JobBridge(Settings.from_mapping(amqp_app.settings_mapping(self.env)), jobs=app.ALL)
        self.driver = self.bridge.driver()
        self.workers = Workers(tmp, {**self.env, **self.runs.variable})

    def worker(self) -> subprocess.Popen[bytes]:
        return self.workers.start("--concurrency", str(CONCURRENCY), "--sleep", "0.05",
                                  app="tests.integration.amqp_app:make_bridge")

    def close(self) -> None:
        self.workers.close()
        self.bridge.close()
        drop_keys(self.redis_url, self.redis_prefix)


@pytest.fixture
def shared_node(tmp_path: Path) -> Iterator[AmqpStore]:
    with fresh_vhost() as vhost:
        store = AmqpStore(url_for(vhost), tmp_path)
        yield store
        store.close()


def test_workers_killed_every_two_seconds_lose_nothing(shared_node: AmqpStore) -> None:
    store = shared_node
    ids = store.bridge.dispatch_many(app.Tick(n=i) for i in range(10_000))
    workers = [store.worker() for _ in range(3)]
    kills = 0
    # the first kill as soon as jobs are running (a fast machine drains the lot within two
    # seconds), then one every two seconds while any remain
    wait_for(lambda: store.runs.ids_done(), "the first job to run")
    deadline = time.monotonic() + 120
    while not set(ids) <= store.runs.ids_done() and time.monotonic() < deadline:
        victim = workers.pop(0)
        store.workers.kill(victim)
        kills += 1
        workers.append(store.worker())
        time.sleep(2)
    wait_for(lambda: set(ids) <= store.runs.ids_done(), "every job to run")
    wait_for(lambda: pending(store.driver, "default") == 0, "nothing left waiting")
    assert store.workers.stop(workers) == {w.pid: 0 for w in workers}
    assert store.driver.failed.count() == 0
    runs = store.runs.all()
    ran = times_run(runs)
    assert set(ran) == {str(i) for i in ids}, "no job lost"
    # a killed worker held at most what it could start: its threads and the batch ahead of them
    bound = kills * CONCURRENCY * (1 + MAX_AHEAD)
    extra = duplicates(runs)
    assert kills >= 1 and extra <= bound, (kills, extra, bound)
    print(f"\n[amqp kill -9] 10,000 jobs, 3 workers, {kills} killed: every job ran, {extra} duplicate run(s) "
          f"(bound {bound}), nothing pending or failed")


@pytest.fixture
def own_node(tmp_path: Path) -> Iterator[OwnNode]:
    node = OwnNode(5690, consumer_timeout_ms=5000)
    node.start()
    yield node
    node.remove()


def test_a_broker_restart_mid_drain_is_survived_unaided(own_node: OwnNode, tmp_path: Path) -> None:
    store = AmqpStore(own_node.url, tmp_path, JB_AMQP_REQUEST_TIMEOUT="3")
    try:
        first = store.bridge.dispatch_many(app.Tick(n=i) for i in range(3000))
        workers = [store.worker() for _ in range(2)]
        wait_for(lambda: len(store.runs.ids_done()) > 300, "the workers to start draining")
        own_node.stop()
        started = time.monotonic()
        with pytest.raises(DriverUnavailable):
            store.bridge.dispatch(app.Tick(n=-1))
        assert time.monotonic() - started < 60, "a dispatch during the outage fails within its timeouts"
        own_node.start()
        second = store.bridge.dispatch_many(app.Tick(n=i) for i in range(500))
        wait_for(lambda: set(first + second) <= store.runs.ids_done(), "every dispatched job to run", timeout=180)
        assert store.workers.stop(workers) == {w.pid: 0 for w in workers}
        assert store.driver.failed.count() == 0
        print(f"\n[amqp restart] 3,500 jobs across a broker restart mid-drain: every one ran, "
              f"{duplicates(store.runs.all())} duplicate run(s)")
    finally:
        store.close()


def test_a_two_hour_countdown_is_held_by_the_broker(own_node: OwnNode, tmp_path: Path) -> None:
    # 2 h shortened to 7.2 s, on a node that cuts a delivery held longer than 5 s. The connection's
    # consumer_timeout is 0 (unchecked) because the jobs' own 600 s timeout would be refused against 5 s;
    # each runs in milliseconds, and the point is that none is held while it waits
    store = AmqpStore(own_node.url, tmp_path, JB_AMQP_DELAY_SCALE="0.001", JB_AMQP_CONSUMER_TIMEOUT="0")
    try:
        worker = store.worker()
        wait_for(lambda: "reservation" in store.workers.output(worker), "the worker to start")
        ids = store.bridge.dispatch_many((app.Tick(n=i) for i in range(1000)), delay=7200)
        time.sleep(6)  # longer than the node's consumer_timeout: a worker holding them would be cut off
        assert store.runs.ids_done() == set(), "nothing ran before its time"
        counts = {c.queue: c for c in store.driver.counts()}["default"]
        # the stages are counted one after another while jobs move between them: a snapshot, not a sum
        assert counts.delayed > 0 and (counts.ready, counts.reserved) == (0, 0), "the broker holds them, no worker does"
        wait_for(lambda: set(ids) <= store.runs.ids_done(), "every job to run when due", timeout=60)
        assert store.workers.stop([worker]) == {worker.pid: 0}
        runs = store.runs.all()
        assert duplicates(runs) == 0 and {r.attempt for r in runs} == {1}, "none redelivered"
    finally:
        store.close()
