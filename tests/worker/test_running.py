"""A worker on the memory driver runs jobs: priority order, concurrency, retries, timeouts, bad messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jobbridge import signals
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.envelope import Envelope, Reservation, new_id, undecodable
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending
from tests.worker import jobs
from tests.worker.conftest import Harness


def test_queues_are_emptied_in_priority_order(harness: Harness) -> None:
    bridge = harness.bridge()
    for i in range(3):
        bridge.dispatch(jobs.OnQueue(tag=f"low{i}"), queue="low")
    for i in range(3):
        bridge.dispatch(jobs.OnQueue(tag=f"high{i}"), queue="high")
    stats = harness.worker(bridge, queues=("high", "low"), concurrency=1, stop_when_empty=True).run()
    assert stats.succeeded == 6
    assert [tag for _, tag in jobs.RAN] == ["high0", "high1", "high2", "low0", "low1", "low2"]


def test_only_the_given_queues_are_worked(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.OnQueue(tag="other"), queue="other")
    stats = harness.worker(bridge, queues=("default",), stop_when_empty=True).run()
    assert stats.processed == 0
    assert pending(bridge.driver(), "other") == 1


def test_concurrency_runs_jobs_at_once_on_threads(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Together() for _ in range(4))
    stats = harness.worker(bridge, concurrency=4, stop_when_empty=True).run()
    assert (stats.succeeded, stats.failed, stats.released) == (4, 0, 0)


def test_many_jobs_each_run_once_and_are_acknowledged(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(500))
    stats = harness.worker(bridge, concurrency=8, stop_when_empty=True).run()
    assert stats.succeeded == 500
    assert sorted(n for _, n in jobs.RAN) == list(range(500))
    assert pending(bridge.driver(), "default") == 0


def test_async_jobs_run_on_the_event_loop(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch_many(jobs.Async(n=i) for i in range(5))
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert stats.succeeded == 5
    assert sorted(n for _, n in jobs.RAN) == list(range(5))


def test_retries_with_backoff_then_failed_once_then_the_failed_store(harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Fails())
    for attempt in (1, 2):
        stats = harness.worker(bridge, stop_when_empty=True).run()
        assert (stats.processed, stats.released) == (1, 1), f"attempt {attempt} is released"
        again = harness.worker(bridge, stop_when_empty=True).run()
        assert again.processed == 0, "the backoff (30 s) keeps the job back"
        clock.advance(30)
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert (stats.processed, stats.failed) == (1, 1)
    assert [r for r in jobs.RAN if r[0] == "fails"] == [("fails", 1), ("fails", 2), ("fails", 3)]
    assert [r[0] for r in jobs.RAN].count("fails.failed") == 1
    (failed,) = bridge.driver().failed.list()
    assert (failed.name, failed.attempts) == ("worker.fails", 3)
    assert failed.error.startswith("ConnectionError: attempt 3 failed")
    assert pending(bridge.driver(), "default") == 0


def test_a_pure_python_loop_is_stopped_at_its_timeout_and_the_worker_goes_on(harness: Harness) -> None:
    bridge = harness.bridge()
    spin_id = bridge.dispatch(jobs.Spin())
    bridge.dispatch(jobs.Noop(n=1))
    released: list[str] = []

    def on_released(sender: object, **kw: object) -> None:
        released.append(str(kw["error"]))

    signals.job_released.connect(on_released)
    try:
        worker = harness.worker(bridge, concurrency=1, stop_when_empty=True)
        stats = worker.run()
    finally:
        signals.job_released.disconnect(on_released)
    assert (stats.released, stats.succeeded) == (1, 1)
    assert ("noop", 1) in jobs.RAN, "the thread that ran the looping job ran the next one"
    assert released and released[0].startswith("JobTimeout")
    assert not worker.replace_process
    counts = {c.queue: c for c in bridge.driver().counts()}
    assert counts["default"].delayed == 1 and counts["default"].reserved == 0, f"{spin_id} waits for its retry"


def test_unknown_job_names_and_undecodable_payloads_fail_at_once_with_the_reason(
        harness: Harness, clock: FixedClock) -> None:
    bridge = harness.bridge()
    now = clock.now()

    def envelope(name: str, payload: dict[str, object]) -> Envelope:
        return Envelope(id=new_id(), name=name, queue="default", payload=payload, tries=5, timeout=60,
                        available_at=now, created_at=now)

    bridge.driver().push([envelope("nobody.registered.this", {}), envelope("worker.on-queue", {"tag": [1, 2]})])
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert (stats.processed, stats.failed, stats.released) == (2, 2, 0)
    failed = {f.name: f for f in bridge.driver().failed.list()}
    assert failed["nobody.registered.this"].attempts == 1
    assert "UnknownJob" in failed["nobody.registered.this"].error
    assert failed["worker.on-queue"].attempts == 1
    assert "PayloadDecodeError" in failed["worker.on-queue"].error
    assert jobs.RAN == []


@pytest.mark.parametrize("concurrency", [1, 3])
def test_worker_signals_are_sent_with_the_worker_as_sender(harness: Harness, concurrency: int) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Noop())
    seen: list[tuple[str, object]] = []

    def started(sender: object, **kw: object) -> None:
        seen.append(("started", sender))

    def stopping(sender: object, **kw: object) -> None:
        seen.append(("stopping", sender))
        assert kw["stats"] is sender.stats  # type: ignore[attr-defined]

    signals.worker_started.connect(started)
    signals.worker_stopping.connect(stopping)
    try:
        worker = harness.worker(bridge, concurrency=concurrency, stop_when_empty=True)
        worker.run()
    finally:
        signals.worker_started.disconnect(started)
        signals.worker_stopping.disconnect(stopping)
    assert seen == [("started", worker), ("stopping", worker)]


class Counting(MemoryDriver):
    """Records the size of every reserve and acknowledge."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.reserved: list[int] = []
        self.acknowledged: list[int] = []

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        got = super().reserve(queues, limit, wait=wait)
        self.reserved.append(len(got))
        return got

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self.acknowledged.append(len(reservations))
        super().acknowledge(reservations)


def test_jobs_are_reserved_and_acknowledged_in_batches(harness: Harness, clock: FixedClock) -> None:
    driver = Counting(clock=clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(500))
    stats = harness.worker(bridge, concurrency=8, stop_when_empty=True).run()
    assert stats.succeeded == 500 and sum(driver.acknowledged) == 500
    assert len(driver.reserved) < 500 / 5, f"reserve calls: {driver.reserved}"
    assert max(driver.reserved) > 8, "short jobs are reserved ahead of the threads"
    assert max(driver.acknowledged) > 1 and len(driver.acknowledged) < 500


class Garbled(MemoryDriver):
    """Hands out its stored jobs as bodies it could not decode, as a driver reading bytes would."""

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        return [Reservation(undecodable(id=r.id, queue=r.envelope.queue, attempts=r.attempt, now=0.0),
                            r.receipt, r.lease_until, body=b"\x00garbage", decode_error="stored message is not JSON")
                for r in super().reserve(queues, limit, wait=wait)]


def test_an_undecodable_message_is_failed_at_once_with_its_body(harness: Harness, clock: FixedClock) -> None:
    driver = Garbled(clock=clock)
    bridge = harness.bridge(driver=driver)
    bridge.dispatch(jobs.Noop(n=1))
    stats = harness.worker(bridge, stop_when_empty=True).run()
    assert (stats.processed, stats.failed) == (1, 1)
    (failed,) = driver.failed.list()
    assert failed.error == "undecodable message: stored message is not JSON"
    assert failed.body == b"\x00garbage" and jobs.RAN == []
