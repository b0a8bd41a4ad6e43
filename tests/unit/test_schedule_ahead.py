"""Jobs built ahead of their ticks, and ticks planned from what the store was seen to hold.

In-process, on the memory driver, with a `FixedClock`: no test sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire, schedule_store_of
from jobbridge.envelope import Envelope
from jobbridge.scheduling.entries import Tick
from jobbridge.scheduling.scheduler import Scheduler
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock

NOON = datetime(2024, 6, 5, 12, 0, tzinfo=UTC).timestamp()


class Ping(Job, name="ahead.ping"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


def bridge_with(clock: FixedClock, built: list[float], **options: Any) -> JobBridge:
    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Ping], clock=clock)

    def factory(tick: Tick) -> Envelope:
        built.append(clock.now())
        return bridge.envelope(Ping(n=1), expires=90)

    bridge.schedule("m", envelope=factory, every=60, **options)
    return bridge


def test_a_job_built_ahead_is_the_job_built_at_its_tick() -> None:
    clock, built = FixedClock(NOON), []
    bridge = bridge_with(clock, built)
    scheduler = Scheduler(bridge)
    scheduler.step()
    bridge.driver().reserve(["default"], 10)  # the first tick's job out of the way
    clock.advance(30)
    scheduler.prepare()
    calls = len(built)
    clock.advance(30)
    assert [f.outcome for f in scheduler.step()] == [Fire.PUSHED]
    assert len(built) == calls and built[-1] == NOON + 30  # built while waiting, not again at the tick
    (job,) = [r.envelope for r in bridge.driver().reserve(["default"], 10)]
    assert (job.created_at, job.available_at, job.expires_at) == (NOON + 60, NOON + 60, NOON + 150)


def test_a_tick_another_scheduler_fired_meanwhile_is_taken_and_its_job_built_ahead_is_not_pushed() -> None:
    clock, built = FixedClock(NOON), []
    bridge = bridge_with(clock, built)
    first, second = Scheduler(bridge), Scheduler(bridge)
    first.step()
    second.step()
    clock.advance(30)
    first.prepare()
    clock.advance(30)
    assert [f.outcome for f in second.step()] == [Fire.PUSHED]
    assert [f.outcome for f in first.step()] == [Fire.TAKEN]
    assert len(bridge.driver().reserve(["default"], 10)) == 2  # one job per tick: NOON and NOON + 60


def test_the_store_is_read_once_then_planned_from_what_it_was_seen_to_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, built = FixedClock(NOON), []
    bridge = bridge_with(clock, built, catch_up="all")
    store = schedule_store_of(bridge.driver())
    assert store is not None
    reads: list[list[str]] = []
    read = store.last
    monkeypatch.setattr(store, "last", lambda names: reads.append(list(names)) or read(names))
    scheduler = Scheduler(bridge)
    scheduler.step()
    clock.advance(180)  # two ticks missed: caught up from the tick the store was seen to hold
    assert [(f.tick - NOON, f.outcome) for f in scheduler.step()] == [(60.0, Fire.PUSHED), (120.0, Fire.PUSHED),
                                                                       (180.0, Fire.PUSHED)]
    assert reads == [["m"]]
