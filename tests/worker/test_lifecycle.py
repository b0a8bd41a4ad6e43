"""The worker's life cycle: the legal moves, the first reason kept, the budget and the drain as exit conditions."""

from __future__ import annotations

from jobbridge.worker_lifecycle import REPLACE_EXIT_CODE, STOPPED_AT_ONCE_EXIT_CODE, Lifecycle, Phase
from tests.worker import jobs
from tests.worker.conftest import Harness


class Woken:
    def __init__(self) -> None:
        self.times = 0

    def __call__(self) -> None:
        self.times += 1


def test_a_drain_then_a_halt_exits_0() -> None:
    wake = Woken()
    life = Lifecycle(wake=wake)
    assert life.running and life.announcement() is None, "nothing to announce while running"
    life.drain("asked to stop")
    assert life.draining and wake.times == 1
    assert life.announcement() == "asked to stop"
    assert life.announcement() is None, "announced once"
    life.halt()
    assert life.history == [Phase.RUNNING, Phase.DRAINING, Phase.HALTED]
    assert (life.stopped_at_once, life.exit_code) == (False, 0)


def test_the_first_reason_is_kept_and_no_move_goes_back() -> None:
    life = Lifecycle(wake=Woken())
    life.drain("received SIGTERM")
    life.drain("reached --max-jobs 4")
    life.stop_now("asked to stop")
    life.drain("the queues are empty")
    assert life.stopping and life.reason == "received SIGTERM"
    life.halt()
    life.drain("asked to stop")
    life.stop_now("asked to stop")
    assert life.phase is Phase.HALTED
    assert life.history == [Phase.RUNNING, Phase.DRAINING, Phase.STOPPING, Phase.HALTED]
    assert life.exit_code == STOPPED_AT_ONCE_EXIT_CODE


def test_a_second_signal_stops_at_once_unless_a_supervisor_escalates() -> None:
    life = Lifecycle(wake=Woken())
    assert life.signalled("SIGTERM") is False and life.draining
    assert life.signalled("SIGINT") is True and life.stopping
    assert life.reason == "received SIGTERM" and life.stopped_at_once

    supervised = Lifecycle(wake=Woken())
    supervised.ignore_second_signal = True
    assert not supervised.signalled("SIGTERM") and not supervised.signalled("SIGTERM")
    assert supervised.draining and not supervised.stopped_at_once


def test_a_stuck_attempt_drains_and_asks_for_a_new_process() -> None:
    life = Lifecycle(wake=Woken())
    life.drain("received SIGTERM")
    life.stuck("j1")
    assert life.replace_process and life.reason == "received SIGTERM"
    life.halt()
    assert life.exit_code == REPLACE_EXIT_CODE


def test_the_budget_caps_the_room_and_drains_once_spent() -> None:
    life = Lifecycle(wake=Woken(), max_jobs=3)
    assert life.room(8) == 3 and not life.drains
    life.took(2, held=2)
    assert life.running and life.room(8) == 1
    life.took(1, held=3)
    assert life.draining and life.reason == "reached --max-jobs 3" and life.room(8) == 0


def test_once_is_a_budget_of_one_and_a_drain() -> None:
    life = Lifecycle(wake=Woken(), once=True, max_jobs=50)
    assert life.room(8) == 1 and life.drains
    life.took(1, held=1)
    assert life.draining and life.reason == "--once"
    empty = Lifecycle(wake=Woken(), once=True)
    empty.took(0, held=0)
    assert empty.draining and empty.reason == "the queues are empty"


def test_the_drain_ends_the_run_only_when_nothing_came_and_nothing_is_held() -> None:
    life = Lifecycle(wake=Woken(), stop_when_empty=True)
    assert life.drains and life.budget is None
    life.took(0, held=2)
    assert life.running, "held jobs are still to finish"
    life.took(0, held=0)
    assert life.draining and life.reason == "the queues are empty"
    plain = Lifecycle(wake=Woken())
    plain.took(0, held=0)
    assert plain.running, "without the drain, empty queues are waited on"


def test_a_worker_stopped_before_it_ran_halts_at_once(harness: Harness) -> None:
    bridge = harness.bridge()
    bridge.dispatch(jobs.Noop(n=1))
    worker = harness.worker(bridge)
    worker.stop()
    assert worker.run().processed == 0 and worker.exit_code == 0
    assert worker.lifecycle.history == [Phase.RUNNING, Phase.DRAINING, Phase.HALTED]
