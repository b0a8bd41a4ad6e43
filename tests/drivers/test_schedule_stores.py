"""Exactly one dispatch per tick, whatever the number of schedulers, on every store that keeps schedules.

Five schedulers share one store (SQLite, PostgreSQL, MariaDB, Redis), each with
its own app and connections, all on one `FixedClock`, so a simulated week passes
without a sleep. At every tick a random subset of them looks, in a random order;
one of them is stopped at random points between reading the store and pushing
(its store call raises, or its push raises inside the transaction, as a kill
would leave it) and started afresh. Whatever happens, each tick's job is pushed
exactly once, and no tick is skipped. Then every scheduler stops for three
hours: ``latest`` fires one tick, ``none`` none, ``all`` the bounded set.

The every-minute entry (10,080 ticks a week) runs on SQLite and Redis only;
on PostgreSQL and MariaDB the fleets run the crontab entries alone, over the
whole week in both scenarios (about 700 ticks, Berlin's spring-forward
night included). The minute ticks add no statement: each one is another round of
the read, advance-or-insert and push that every quarter-hour tick already
runs, so each server still runs every statement of its store (an entry's
first tick inserted, later ones advanced, a second look meeting a taken
tick, several entries due in one batch, a transaction rolled back mid-push),
just fifteen times fewer times.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire, schedule_store_of
from jobbridge.scheduling.entries import CATCH_UP_LIMIT, TICK_HEADER
from jobbridge.scheduling.scheduler import Scheduler
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from tests.drivers.database_servers import fresh_database
from tests.drivers.redis_helpers import drop_keys
from tests.services import ensure_redis

#: a week across Berlin's spring-forward night (31 March 2024) and after New York's (10 March)
WEEK_START = datetime(2024, 3, 27, tzinfo=UTC).timestamp()
WEEK = 7 * 86400
CRONS = {
    "quarter": ("*/15 * * * *", None),
    "berlin-night": ("30 2 * * *", "Europe/Berlin"),  # 02:30 does not exist on the 31st: it fires at 03:00
    "ny-office": ("0 9-17 * * mon-fri", "America/New_York"),
}


class Beat(Job, name="schedules.beat"):
    label: str = ""

    def handle(self, ctx: JobContext) -> None:
        pass


class Killed(Exception):
    """A scheduler stopped where it stood (raised from inside its store calls)."""


#: the stores whose fleets also run the every-minute entry (see the module's docstring)
MINUTELY = ("sqlite", "redis")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb", "redis"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(store: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """One store, fresh for the test: a database (per dialect) or a redis prefix."""
    if store == "redis":
        url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
        yield {"driver": "redis", "redis_url": url, "redis_prefix": prefix}
        drop_keys(url, prefix)
        return
    with fresh_database(store, tmp_path) as url:
        yield {"driver": "database", "database_url": url}


def declare_for(store: str) -> Callable[[JobBridge], None]:
    """The entries this store's fleet runs: all of them, or the crontab entries alone."""
    return declare if store in MINUTELY else lambda bridge: declare(bridge, every=False)


def declare(bridge: JobBridge, every: bool = True, crons: bool = True, **options: Any) -> None:
    if every:
        bridge.schedule("minutely", Beat(label="minutely"), every=60, **options)
    for name, (expression, tz) in (CRONS.items() if crons else ()):
        bridge.schedule(name, Beat(label=name), cron=expression, tz=tz, **options)


class Fleet:
    """Schedulers on one store, each with an app of its own; `restart` replaces one as a new process would."""

    def __init__(self, settings: dict[str, Any], clock: FixedClock, size: int,
                 declare_entries: Callable[[JobBridge], None]) -> None:
        self.settings, self.clock, self.declare = settings, clock, declare_entries
        self.schedulers = [self._new() for _ in range(size)]

    def _new(self) -> Scheduler:
        bridge = JobBridge(Settings.from_mapping(self.settings), jobs=[Beat], clock=self.clock)
        self.declare(bridge)
        return Scheduler(bridge)

    def restart(self, index: int, fresh_app: bool = True) -> None:
        """A new scheduler knowing nothing; ``fresh_app=False`` keeps the app (and the doomed store calls)."""
        old = self.schedulers[index]
        if fresh_app:
            old.bridge.close()  # its connections die with it
        self.schedulers[index] = self._new() if fresh_app else Scheduler(old.bridge)

    def pushed(self) -> Counter[tuple[str, float]]:
        """Every pushed job by (label, tick), read by reserving them all."""
        driver = self.schedulers[-1].bridge.driver()
        seen: Counter[tuple[str, float]] = Counter()
        while got := driver.reserve(["default"], 1000):
            seen.update((r.envelope.payload["label"], float(r.envelope.headers[TICK_HEADER])) for r in got)
            driver.acknowledge(got)
        return seen

    def close(self) -> None:
        for scheduler in self.schedulers:
            scheduler.bridge.close()


def expected(scheduler: Scheduler, start: float, end: float) -> Counter[tuple[str, float]]:
    """Each entry's ticks from ``start`` (on time at the first look) to ``end``, once each."""
    ticks: Counter[tuple[str, float]] = Counter()
    for entry in scheduler.entries:
        tick = entry.trigger.latest_at(start)
        tick = tick if tick == start else entry.trigger.next_after(start)
        while tick is not None and tick <= end:
            ticks[(entry.name, tick)] += 1
            tick = entry.trigger.next_after(tick)
    return ticks


def moments(scheduler: Scheduler, start: float, end: float) -> list[float]:
    """Every instant at which some entry ticks, in order: the simulation visits each."""
    return sorted({tick for _, tick in expected(scheduler, start, end)})


def test_five_schedulers_over_a_week_dispatch_every_tick_exactly_once(store: str, settings: dict[str, Any]) -> None:
    clock = FixedClock(WEEK_START)
    fleet = Fleet(settings, clock, 5, declare_for(store))
    rng = random.Random(11)
    try:
        instants = moments(fleet.schedulers[0], WEEK_START, WEEK_START + WEEK)
        for instant in instants:
            clock.set(instant + rng.uniform(0, 25))  # looks come a little late, never a tick late
            for scheduler in rng.sample(fleet.schedulers, rng.randint(1, 2)):
                scheduler.step()
        want = expected(fleet.schedulers[0], WEEK_START, WEEK_START + WEEK)
        if store in MINUTELY:
            assert len(want) > 10_080  # every minute of the week, and the crontab entries
        assert len(want) > 672  # every quarter of an hour of the week, and the other crontab entries
        assert {name for name, _ in want} >= set(CRONS)
        assert fleet.pushed() == want
    finally:
        fleet.close()


def _killer(scheduler: Scheduler, rng: random.Random) -> None:
    """Make this scheduler's store calls stop it at random points: before reading, between reading and
    firing, inside the push (the transaction is rolled back, as a dead connection's would be), after."""
    store = schedule_store_of(scheduler.bridge.driver())
    assert store is not None
    driver = scheduler.bridge.driver()
    read, fire, push = store.last, store.fire_many, driver.push

    def last(entries: Any) -> Any:
        if rng.random() < 0.15:
            raise Killed("before reading")
        found = read(entries)
        if rng.random() < 0.15:
            raise Killed("after reading, before pushing")
        return found

    def firing(firings: Any) -> list[Fire]:
        done = fire(firings)
        if rng.random() < 0.15:
            raise Killed("after the push, before the scheduler heard")
        return done

    def pushing(envelopes: Any, **kwargs: Any) -> None:
        push(envelopes, **kwargs)
        if kwargs.get("transaction") is not None and rng.random() < 0.3:
            raise Killed("inside the push's transaction")

    store.last, store.fire_many = last, firing  # type: ignore[method-assign]
    driver.push = pushing  # type: ignore[method-assign]


def test_a_scheduler_stopped_anywhere_between_reading_and_pushing_loses_and_doubles_no_tick(
        store: str, settings: dict[str, Any]) -> None:
    clock = FixedClock(WEEK_START)
    fleet = Fleet(settings, clock, 5, declare_for(store))
    rng = random.Random(5)
    kills = 0
    try:
        end = WEEK_START + (86400 if store in MINUTELY else WEEK)  # a day of every minute, or a week of crontab
        _killer(fleet.schedulers[0], rng)
        for instant in moments(fleet.schedulers[0], WEEK_START, end):
            clock.set(instant + rng.uniform(0, 25))
            order = [0, *rng.sample(range(1, 5), rng.randint(1, 2))]  # the doomed one looks first
            for index in order:
                try:
                    fleet.schedulers[index].step()
                except Killed:
                    kills += 1
                    fleet.restart(index, fresh_app=False)  # a new process, knowing nothing
        assert kills > 100
        assert fleet.pushed() == expected(fleet.schedulers[1], WEEK_START, end)
    finally:
        fleet.close()


@pytest.mark.parametrize("catch_up", ["latest", "none", "all"])
def test_after_three_hours_with_no_scheduler_missed_ticks_follow_catch_up(settings: dict[str, Any],
                                                                          catch_up: str) -> None:
    clock = FixedClock(WEEK_START)
    fleet = Fleet(settings, clock, 2, lambda b: b.schedule("minutely", Beat(label="m"), every=60,
                                                           catch_up=catch_up))  # type: ignore[arg-type]
    try:
        assert [f.outcome for f in fleet.schedulers[0].step()] == [Fire.PUSHED]
        assert fleet.pushed() == Counter({("m", WEEK_START): 1})
        clock.set(WEEK_START + 3 * 3600 + 45)  # everyone was down; the last tick is 45 s old: missed
        fleet.restart(1)
        fleet.schedulers[1].step()
        fleet.schedulers[0].step()
        missed = [WEEK_START + 60 * k for k in range(1, 181)]
        want = {"latest": missed[-1:], "none": [], "all": missed[-CATCH_UP_LIMIT:]}[catch_up]
        assert fleet.pushed() == Counter(("m", tick) for tick in want)
        clock.set(WEEK_START + 3 * 3600 + 60 + 1)  # then the grid resumes, whatever catch_up says
        fleet.schedulers[0].step()
        assert fleet.pushed() == Counter({("m", WEEK_START + 3 * 3600 + 60): 1})
    finally:
        fleet.close()


def test_a_database_at_schema_version_1_gets_the_schedules_table_and_keeps_its_jobs(tmp_path: Path) -> None:
    from sqlalchemy import func, select, text

    from jobbridge.drivers.database.migrations import recorded_version
    from jobbridge.drivers.database.schema import SCHEMA_VERSION, schema_versions

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    # on a tick of the grid: with the wall clock, a step late in the minute may judge the tick past due
    bridge = JobBridge(Settings.from_mapping({"database_url": url}), jobs=[Beat], clock=FixedClock(1_800_000_000.0))
    driver = bridge.driver()
    bridge.dispatch(Beat(label="kept"))
    with driver.engine.begin() as conn:  # what the previous release left: no schedules table, version 1
        conn.execute(text("DROP TABLE jobbridge_schedules"))
        conn.execute(schema_versions.delete().where(schema_versions.c.version == SCHEMA_VERSION))
        conn.execute(schema_versions.insert(), {"version": 1, "applied_at": 0.0})
    assert recorded_version(driver.engine) == 1
    driver.migrate()
    assert recorded_version(driver.engine) == SCHEMA_VERSION >= 2
    with driver.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema_versions)).scalar_one() == 2
    bridge.schedule("again", Beat(label="s"), every=60)
    assert [f.outcome for f in Scheduler(bridge).step()] == [Fire.PUSHED]
    labels = sorted(r.envelope.payload["label"] for r in driver.reserve(["default"], 10))
    assert labels == ["kept", "s"]
    bridge.close()
