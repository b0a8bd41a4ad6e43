"""A step of thousands of due entries: fired in growing batches, each in the store while the next is built.

`jobbridge.scheduling.relay` on its own (batch sizes, order, errors, no thread
left running), then the scheduler with more entries than one batch holds, on
the memory driver with a `FixedClock`: every tick fired once, in batches that
reached the store one at a time, earliest due first, and a store that fails
halfway leaves the rest due for the next look.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire, Firing, schedule_store_of
from jobbridge.scheduling import scheduler as scheduler_module
from jobbridge.scheduling.entries import TICK_HEADER
from jobbridge.scheduling.relay import Relay, batch_sizes, batches
from jobbridge.scheduling.scheduler import Scheduler
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock

MINUTE = 1_800_000_000.0 - 1_800_000_000.0 % 60


class Tick(Job, name="relay.tick"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


class Refused(Exception):
    pass


def firings(count: int, prefix: str = "e") -> list[Firing]:
    return [Firing(f"{prefix}{i}", MINUTE, None) for i in range(count)]


def test_batches_start_small_and_double_up_to_the_largest() -> None:
    sizes = batch_sizes(250, 2000)
    assert [next(sizes) for _ in range(6)] == [250, 500, 1000, 2000, 2000, 2000]
    assert [len(b) for b in batches(list(range(10_000)), 250, 2000)] == [250, 500, 1000, 2000, 2000, 2000, 2000, 250]
    assert [list(b) for b in batches([1, 2, 3], 5, 2)] == [[1, 2], [3]]
    assert list(batches([], 250, 2000)) == []


@pytest.mark.parametrize("threaded", [False, True])
def test_every_batch_reaches_the_store_in_order_one_at_a_time_and_is_heard_in_order(threaded: bool) -> None:
    inside = threading.Semaphore(1)
    sent: list[str] = []
    heard: list[tuple[str, int]] = []

    def fire(batch: list[Firing]) -> list[Fire]:
        assert inside.acquire(blocking=False), "two batches in the store at once"
        try:
            sent.append(batch[0].entry)
            return [Fire.PUSHED] * len(batch)
        finally:
            inside.release()

    with Relay(fire, threaded=threaded) as relay:
        for k in range(5):
            batch = firings(3, f"b{k}-")
            relay.send(batch, lambda outcomes, k=k: heard.append((f"b{k}-0", len(outcomes))))
    assert sent == [f"b{k}-0" for k in range(5)]
    assert heard == [(f"b{k}-0", 3) for k in range(5)]


def test_a_failed_batch_is_raised_and_no_batch_after_it_is_sent() -> None:
    sent: list[str] = []

    def fire(batch: list[Firing]) -> list[Fire]:
        sent.append(batch[0].entry)
        if batch[0].entry == "b1-0":
            raise Refused("the store is down")
        return [Fire.PUSHED] * len(batch)

    heard: list[int] = []
    with pytest.raises(Refused), Relay(fire, threaded=True) as relay:
        for k in range(4):
            relay.send(firings(2, f"b{k}-"), lambda outcomes: heard.append(len(outcomes)))
    assert sent == ["b0-0", "b1-0"]
    assert heard == [2]
    assert not [t for t in threading.enumerate() if t.name.startswith("jobbridge-fire")]


def test_when_the_caller_fails_the_batch_in_flight_still_lands_and_is_heard() -> None:
    release = threading.Event()

    def fire(batch: list[Firing]) -> list[Fire]:
        release.wait(10)
        return [Fire.PUSHED] * len(batch)

    heard: list[int] = []
    with pytest.raises(Refused), Relay(fire, threaded=True) as relay:
        relay.send(firings(2), lambda outcomes: heard.append(len(outcomes)))
        release.set()
        raise Refused("building the next batch failed")
    assert heard == [2]
    assert not [t for t in threading.enumerate() if t.name.startswith("jobbridge-fire")]


def many(count: int, clock: FixedClock) -> JobBridge:
    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Tick], clock=clock)
    for i in range(count):
        bridge.schedule(f"many-{i:05d}", Tick(n=i), every=60)
    return bridge


def pushed(bridge: JobBridge) -> Counter[tuple[int, float]]:
    driver = bridge.driver()
    seen: Counter[tuple[int, float]] = Counter()
    while got := driver.reserve(["default"], 1000):
        seen.update((r.envelope.payload["n"], r.envelope.headers[TICK_HEADER]) for r in got)
        driver.acknowledge(got)
    return seen


def test_a_step_of_more_entries_than_a_batch_fires_each_tick_once_in_growing_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "FIRST_BATCH", 10)
    monkeypatch.setattr(scheduler_module, "FIRE_BATCH", 40)
    clock = FixedClock(MINUTE)
    bridge = many(205, clock)
    store = schedule_store_of(bridge.driver())
    assert store is not None
    sizes: list[int] = []
    fire = store.fire_many

    def counted(batch: Any) -> list[Fire]:
        sizes.append(len(batch))
        return fire(batch)

    monkeypatch.setattr(store, "fire_many", counted)
    scheduler = Scheduler(bridge)
    fired = scheduler.step()
    assert sizes == [10, 20, 40, 40, 40, 40, 15]
    assert Counter(f.outcome for f in fired) == Counter({Fire.PUSHED: 205})
    assert pushed(bridge) == Counter({(i, MINUTE): 1 for i in range(205)})
    assert scheduler.step() == []  # nothing is due until the next minute
    clock.set(MINUTE + 60)
    assert Counter(f.outcome for f in scheduler.step()) == Counter({Fire.PUSHED: 205})
    assert pushed(bridge) == Counter({(i, MINUTE + 60): 1 for i in range(205)})
    bridge.close()


def test_a_store_failing_halfway_through_a_step_leaves_the_rest_due_and_doubles_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "FIRST_BATCH", 10)
    monkeypatch.setattr(scheduler_module, "FIRE_BATCH", 40)
    clock = FixedClock(MINUTE)
    bridge = many(120, clock)
    store = schedule_store_of(bridge.driver())
    assert store is not None
    fire, calls = store.fire_many, []

    def failing_third(batch: Any) -> list[Fire]:
        calls.append(len(batch))
        if len(calls) == 3:
            raise Refused("the store went away")
        return fire(batch)

    monkeypatch.setattr(store, "fire_many", failing_third)
    scheduler = Scheduler(bridge)
    with pytest.raises(Refused):
        scheduler.step()
    assert calls == [10, 20, 40]  # the batch after the failed one was never sent
    assert pushed(bridge) == Counter({(i, MINUTE): 1 for i in range(30)})
    clock.set(MINUTE + 5)
    again = scheduler.step()  # the same scheduler looks again: the 30 recorded ones are not even offered
    assert Counter(f.outcome for f in again) == Counter({Fire.PUSHED: 90})
    assert pushed(bridge) == Counter({(i, MINUTE): 1 for i in range(30, 120)})
    bridge.close()


def test_the_entries_due_earliest_fire_first() -> None:
    clock = FixedClock(MINUTE + 30)
    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Tick], clock=clock)
    bridge.schedule("every-minute", Tick(n=1), every=60)
    bridge.schedule("every-ten", Tick(n=2), every=10)
    scheduler = Scheduler(bridge)
    scheduler.step()  # both fire their current tick; next due: every-ten at +40, every-minute at +60
    clock.set(MINUTE + 61)
    assert [f.entry for f in scheduler.step()] == ["every-ten", "every-minute"]
    bridge.close()
