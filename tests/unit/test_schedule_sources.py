"""Entry sources: entries read again when a source changes, bad ones never stopping a scheduler; bounded triggers.

In-process, on the memory driver with a `FixedClock`: no test sleeps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.entries import Entry, Tick
from jobbridge.scheduling.scheduler import MAX_WAIT, SOURCE_POLL, Fired, Scheduler
from jobbridge.scheduling.sources import job_message, task_message, use_task_messages
from jobbridge.scheduling.triggers import Every
from jobbridge.scheduling.windows import Once, Window
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock

NOON = datetime(2024, 6, 5, 12, 0, tzinfo=UTC).timestamp()


class Ping(Job, name="sources.ping", queue="pings"):
    label: str

    def handle(self, ctx: JobContext) -> None:
        pass


class Table:
    """A source over a dict the test edits, as an admin edits a table: name -> seconds between ticks."""

    name = "table"

    def __init__(self, bridge: JobBridge, rows: dict[str, float]) -> None:
        self.bridge = bridge
        self.rows = dict(rows)
        self.changes = 0
        self.reads = 0
        self.heard: list[Fired] = []
        self.broken: Exception | None = None
        self.connection: str | None = None

    def edit(self, **rows: float | None) -> None:
        for name, seconds in rows.items():
            if seconds is None:
                self.rows.pop(name, None)
            else:
                self.rows[name] = seconds
        self.changes += 1

    def version(self) -> object:
        if self.broken is not None:
            raise self.broken
        return self.changes

    def entries(self) -> list[Entry]:
        self.reads += 1
        build = task_message(self.bridge)
        return [Entry(name, Every(seconds), _builder(build, name), "sources.ping", connection=self.connection)
                for name, seconds in self.rows.items()]

    def fired(self, fired: Sequence[Fired]) -> None:
        self.heard += fired


def _builder(build: Any, label: str) -> Any:
    return lambda tick: build("sources.ping", [], {"label": label}, {})


def bridge_at(clock: FixedClock) -> JobBridge:
    return JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Ping], clock=clock)


def pushed(fired: Sequence[Fired]) -> list[str]:
    return sorted(f.entry for f in fired if f.outcome is Fire.PUSHED)


def test_entries_added_removed_and_changed_in_a_source_are_picked_up_at_the_next_poll() -> None:
    clock = FixedClock(NOON)
    bridge = bridge_at(clock)
    table = Table(bridge, {"a": 60, "b": 60})
    bridge.schedules.add_source(table)
    bridge.schedules.add_source(table)  # once is enough
    bridge.schedule("declared", Ping(label="d"), every=60)
    scheduler = Scheduler(bridge)
    assert sorted(e.name for e in scheduler.entries) == ["a", "b", "declared"]
    assert pushed(scheduler.step()) == ["a", "b", "declared"]
    table.edit(b=None, c=60, a=120)
    clock.advance(SOURCE_POLL - 1)
    assert scheduler.step() == [] and sorted(e.name for e in scheduler.entries) == ["a", "b", "declared"]
    clock.set(NOON + 60)  # polled again: a now every 120 s (its 12:00 tick fired already), b gone, c new
    assert pushed(scheduler.step()) == ["c", "declared"]
    assert sorted(e.name for e in scheduler.entries) == ["a", "c", "declared"]
    clock.set(NOON + 120)
    assert pushed(scheduler.step()) == ["a", "c", "declared"]
    assert table.reads == 2  # entries read at start and after the one change, never at a poll that saw none
    assert {f.entry for f in table.heard} == {"a", "b", "c"}  # each source hears of its own entries only


def test_several_schedulers_over_one_store_fire_each_source_tick_once() -> None:
    clock = FixedClock(NOON)
    bridge = bridge_at(clock)
    tables = []
    schedulers = []
    for _ in range(3):
        table = Table(bridge, {"a": 60})
        tables.append(table)
        schedulers.append(Scheduler(bridge, [], sources=[table]))
    fired: list[tuple[str, float]] = []
    for _ in range(10):
        for scheduler in schedulers:
            fired += [(f.entry, f.tick) for f in scheduler.step() if f.outcome is Fire.PUSHED]
        clock.advance(30)
    assert fired == [("a", NOON + 60 * i) for i in range(5)]
    assert sum(len(t.heard) for t in tables) == 5  # only the pushing scheduler records a tick


def test_a_source_that_fails_keeps_its_entries_and_the_scheduler_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = FixedClock(NOON)
    bridge = bridge_at(clock)
    table = Table(bridge, {"a": 60})
    scheduler = Scheduler(bridge, [], sources=[table])
    assert pushed(scheduler.step()) == ["a"]
    table.broken = OSError("database is down")
    clock.advance(60)
    with caplog.at_level(logging.WARNING, "jobbridge.schedule"):
        assert pushed(scheduler.step()) == ["a"]
    assert "schedule source table could not be read (OSError: database is down)" in caplog.text


def test_a_source_entry_named_like_a_declared_one_is_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock = FixedClock(NOON)
    bridge = bridge_at(clock)
    bridge.schedule("a", Ping(label="declared"), every=3600)
    with caplog.at_level(logging.WARNING, "jobbridge.schedule"):
        scheduler = Scheduler(bridge, sources=[Table(bridge, {"a": 60, "b": 60})])
    assert [(e.name, e.trigger) for e in scheduler.entries] == [("a", Every(3600)), ("b", Every(60))]
    assert "schedule a from table: an entry of that name is declared already" in caplog.text


def test_source_entries_on_a_driver_without_a_schedule_store_are_logged_not_fatal(
        caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_mapping({"connections": {
        "default": "bulk",
        "bulk": {"driver": "sqs", "queue_url": "sqs://000000000000/jobs", "endpoint": "http://127.0.0.1:9",
                 "region": "us-east-1"}}})
    bridge = JobBridge(settings, jobs=[Ping], clock=FixedClock(NOON))
    with caplog.at_level(logging.ERROR, "jobbridge.schedule"):
        scheduler = Scheduler(bridge, [], sources=[Table(bridge, {"a": 60})])
    assert scheduler.entries == [] and scheduler.step() == []
    assert "'a': connection 'bulk' uses the sqs driver" in caplog.text


def test_a_source_entry_naming_an_unknown_connection_is_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    bridge = bridge_at(FixedClock(NOON))
    table = Table(bridge, {"a": 60})
    table.connection = "nope"
    with caplog.at_level(logging.ERROR, "jobbridge.schedule"):
        assert Scheduler(bridge, [], sources=[table]).entries == []
    assert "schedule a: connection:" in caplog.text and "'nope'" in caplog.text


def test_a_scheduler_with_sources_looks_at_least_every_poll() -> None:
    clock = FixedClock(NOON + 1)
    bridge = bridge_at(clock)
    bridge.schedule("hourly", Ping(label="h"), every=3600)
    for sources, wait in (([], MAX_WAIT), ([Table(bridge, {})], SOURCE_POLL)):
        scheduler = Scheduler(bridge, sources=sources)
        scheduler.step()
        assert scheduler.until_due() == wait


def test_the_task_message_of_a_plain_bridge_is_its_job_by_name_and_a_registered_one_wins() -> None:
    bridge = bridge_at(FixedClock(NOON))
    env = task_message(bridge)("sources.ping", [], {"label": "x"}, {"queue": "q", "headers": {"h": 1}})
    assert (env.name, env.queue, env.payload, env.headers["h"]) == ("sources.ping", "q", {"label": "x"}, 1)
    build = job_message(bridge)
    for args, kwargs, options, match in (
            ([1], {}, {}, "args: a job takes its payload as named fields"),
            ([], {"nope": 1}, {}, "kwargs: do not match the fields of 'sources.ping'"),
            ([], {"label": "x"}, {"priority": 3}, "priority: jobbridge orders work by queue"),
            ([], {"label": "x"}, {"routing_key": "k"}, "routing_key: jobbridge routes by queue alone")):
        with pytest.raises(ConfigurationError, match=match):
            build("sources.ping", args, kwargs, options)
    with pytest.raises(ConfigurationError, match="task: no job is registered as 'other'"):
        build("other", [], {}, {})
    use_task_messages(bridge, lambda task, args, kwargs, options: env)
    assert task_message(bridge)("anything", [], {}, {}) is env


# -- bounded triggers -----------------------------------------------------------------------------


def test_a_window_keeps_the_ticks_from_its_start_until_its_end() -> None:
    window = Window(Every(60), start=NOON + 30, end=NOON + 300)
    assert window.next_after(NOON - 1000) == NOON + 60
    assert window.first_from(NOON + 60) == NOON + 60
    assert window.next_after(NOON + 240) is None  # 12:05 is its end, not a tick of it
    assert window.latest_at(NOON + 59) is None and window.latest_at(NOON + 1000) == NOON + 240
    assert window.latest_before(NOON + 120) == NOON + 60 and window.latest_before(NOON + 60) is None
    assert window.describe() == "every 60s until 2024-06-05T12:05:00Z" and window.zone_name == "UTC"
    assert Window(Every(60), start=NOON).first_from(NOON) == NOON


def test_once_is_one_tick_and_a_one_off_entry_fires_it_however_late() -> None:
    once = Once(NOON, "Europe/Berlin")
    assert (once.next_after(NOON - 1), once.next_after(NOON)) == (NOON, None)
    assert (once.latest_at(NOON), once.latest_before(NOON), once.latest_at(NOON - 1)) == (NOON, None, None)
    assert once.describe() == "once at 2024-06-05T12:00:00Z" and once.zone_name == "Europe/Berlin"

    def build(tick: Tick) -> Any:
        raise AssertionError("not built")

    late, strict = (Entry("x", once, build, "j", first_fires_late=True), Entry("x", once, build, "j"))
    assert [(s.tick, s.push) for s in late.plan(None, NOON + 3600)] == [(NOON, True)]
    assert [(s.tick, s.push) for s in strict.plan(None, NOON + 3600)] == [(NOON, False)]
    assert late.plan(NOON, NOON + 3600) == []  # fired already: never again
