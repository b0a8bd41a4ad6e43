"""Worker tests: a `JobBridge` on the memory driver and a fixed clock, workers run in threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobbridge import JobBridge
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.outcome import WorkStats
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.worker import Worker, WorkerOptions
from tests.worker import jobs


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    jobs.reset()
    yield
    jobs.GO.set()  # never leave a job thread waiting
    jobs.reset()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


class Harness:
    """Builds bridges and workers, and runs workers in a thread."""

    def __init__(self, clock: FixedClock) -> None:
        self.clock = clock
        self.bridges: list[JobBridge] = []

    def bridge(self, reservation: float = 60, driver: Any = None, **settings: Any) -> JobBridge:
        conf = Settings.from_mapping({"driver": "memory", "reservation": reservation, **settings})
        store = driver if driver is not None else MemoryDriver(reservation=reservation, clock=self.clock)
        bridge = JobBridge(conf, clock=self.clock, drivers={conf.default_connection: store}, jobs=jobs.ALL)
        self.bridges.append(bridge)
        return bridge

    def worker(self, bridge: JobBridge, **options: Any) -> Worker:
        options.setdefault("sleep", 0.02)
        return Worker(bridge, WorkerOptions(**options))

    def start(self, worker: Worker) -> Running:
        return Running(worker)

    def close(self) -> None:
        for bridge in self.bridges:
            bridge.close()


class Running:
    """A worker running in a thread of its own."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stats: WorkStats | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.stats = self.worker.run()
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 30) -> WorkStats:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the worker did not stop"
        if self.error is not None:
            raise self.error
        assert self.stats is not None
        return self.stats


def drain_noops(harness: Harness, driver: Any, count: int) -> None:
    """Dispatch ``count`` `jobs.Noop` to ``driver`` and run a worker until the queue is empty: each ran once."""
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(count))
    stats = harness.worker(bridge, concurrency=4, stop_when_empty=True, sleep=0.01).run()
    assert stats.succeeded == count
    assert sorted(n for kind, n in jobs.RAN if kind == "noop") == list(range(count)), "each job ran once"
    assert driver.counts() == [], "every job acknowledged"


def wait_until(check: Callable[[], object], what: str, timeout: float = 30) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after a generous deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def harness(clock: FixedClock) -> Iterator[Harness]:
    made = Harness(clock)
    yield made
    made.close()
