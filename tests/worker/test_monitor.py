"""The monitor thread's view of a worker: outcomes counted by queue where the loop lets go, running-now from the pool.

Nothing of the monitor runs in an attempt's path (no attempt hook): the
counts come from `Worker.counts`, which the loop adds to as it lets go of each
attempt, and the running attempts from the pool's own slots, read once a
second (and at each beat, and at stop).
"""

from __future__ import annotations

from jobbridge import telemetry_hooks
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.worker_monitor import WorkerMonitor
from tests.worker import jobs
from tests.worker.conftest import Harness, wait_until


def test_outcomes_are_counted_by_queue_and_running_jobs_read_from_the_threads(harness: Harness) -> None:
    bridge = harness.bridge()
    driver = bridge.driver()
    assert isinstance(driver, MemoryDriver)
    bridge.dispatch(jobs.Noop(n=1), queue="a")
    bridge.dispatch(jobs.Noop(n=2), queue="a")
    bridge.dispatch(jobs.Fails(), queue="b", tries=1)  # fails for good
    bridge.dispatch(jobs.Fails(), queue="b")  # released, tries left
    bridge.dispatch(jobs.Block(), queue="a")
    worker = harness.worker(bridge, queues=("a", "b"), stop_when_empty=True)
    monitor = WorkerMonitor(worker, driver.workers, throughput=driver.throughput)
    hooked = list(telemetry_hooks.ATTEMPT_HOOKS)
    monitor.start()
    assert hooked == telemetry_hooks.ATTEMPT_HOOKS  # the monitor wraps no attempt
    running = harness.start(worker)
    wait_until(lambda: jobs.STARTED.is_set() and worker.stats.processed == 4, "four attempts and the blocked one")
    assert worker.running == 1
    assert monitor.record().running == 1
    jobs.GO.set()
    running.join()
    monitor.stop()
    assert worker.running == 0
    summed: dict[str, list[int]] = {}
    for count in driver.throughput.read(0):
        found = summed.setdefault(count.queue, [0, 0, 0])
        found[0] += count.processed
        found[1] += count.failed
        found[2] += count.released
    assert summed == {"a": [3, 0, 0], "b": [2, 1, 1]}
    assert driver.workers.list() == []  # a clean stop forgets the record
