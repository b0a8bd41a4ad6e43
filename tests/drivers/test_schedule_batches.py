"""`ScheduleStore.fire_many` on a batch: each firing judged on its own, whatever the others in the batch did.

The store fires a batch in a few statements (one transaction) or a few script
calls (one pipeline), not one per firing, so what one firing of a batch does
must not leak into another's outcome: some taken and some pushed in the same
batch, two ticks of one entry, one unique lock wanted twice, batches longer than
a statement's ``IN`` list or a script call, a push that fails, and two
schedulers firing the same large batch at the same instant. On SQLite,
PostgreSQL, MariaDB, Redis and the memory driver.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext
from jobbridge.drivers.schedule_port import Fire, Firing, ScheduleStore, schedule_store_of
from jobbridge.envelope import Envelope
from jobbridge.errors import StoreRefused
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from tests.drivers.database_servers import fresh_database
from tests.drivers.redis_helpers import drop_keys
from tests.services import ensure_redis

NOW = 1_800_000_000.0
TICK = NOW - 30  # the tick being fired: on the grid, a little before the store's now


class Beat(Job, name="batches.beat"):
    label: str = ""

    def handle(self, ctx: JobContext) -> None:
        pass


#: the stores a second process could share (the memory store is one process's own)
SHARED = ["sqlite", "postgresql", "mariadb", "redis"]


@pytest.fixture(params=["memory", *SHARED])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if request.param == "memory":
        yield {"driver": "memory"}
    elif request.param == "redis":
        url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
        yield {"driver": "redis", "redis_url": url, "redis_prefix": prefix}
        drop_keys(url, prefix)
    else:
        with fresh_database(request.param, tmp_path) as url:
            yield {"driver": "database", "database_url": url}


@pytest.fixture
def bridge(settings: dict[str, Any]) -> Iterator[JobBridge]:
    app = JobBridge(Settings.from_mapping(settings), jobs=[Beat], clock=FixedClock(NOW))
    yield app
    app.close()


def store_of(bridge: JobBridge) -> ScheduleStore:
    store = schedule_store_of(bridge.driver())
    assert store is not None
    return store


def job(bridge: JobBridge, label: str, **changes: Any) -> Envelope:
    return bridge.envelope(Beat(label=label)).replace(**changes)


def pushed_labels(bridge: JobBridge) -> Counter[str]:
    """Every job in the store, by label, read by reserving them all (what a worker would get)."""
    driver = bridge.driver()
    seen: Counter[str] = Counter()
    while got := driver.reserve(["default"], 1000):
        seen.update(r.envelope.payload["label"] for r in got)
        driver.acknowledge(got)
    return seen


def test_a_batch_with_some_ticks_taken_and_others_pushed_judges_each_on_its_own(bridge: JobBridge) -> None:
    store = store_of(bridge)
    assert store.fire_many([Firing("old", TICK, job(bridge, "old-first")),
                            Firing("later", TICK + 60, job(bridge, "later-first"))]) == [Fire.PUSHED] * 2
    assert pushed_labels(bridge) == Counter({"old-first": 1, "later-first": 1})
    firings = [
        Firing("new", TICK, job(bridge, "new")),                  # never fired: pushed
        Firing("old", TICK, job(bridge, "old-again")),            # this very tick is recorded: taken
        Firing("later", TICK, job(bridge, "later-earlier")),      # a later tick is recorded: taken
        Firing("skipped", TICK, None),                            # no job: the tick alone
        Firing("old", TICK + 60, job(bridge, "old-next")),        # its next tick: pushed
    ]
    assert store.fire_many(firings) == [Fire.PUSHED, Fire.TAKEN, Fire.TAKEN, Fire.ADVANCED, Fire.PUSHED]
    assert pushed_labels(bridge) == Counter({"new": 1, "old-next": 1})
    last = store.last(["new", "old", "later", "skipped", "never"])
    assert {name: got.tick for name, got in last.items()} == {
        "new": TICK, "old": TICK + 60, "later": TICK + 60, "skipped": TICK}
    ids = [firing.envelope.id if firing.envelope else None for firing in firings]
    assert (last["new"].job_id, last["old"].job_id, last["skipped"].job_id) == (ids[0], ids[4], None)


def test_several_ticks_of_one_entry_in_a_batch_each_fire_once(bridge: JobBridge) -> None:
    store = store_of(bridge)
    ticks = [TICK - 120, TICK - 60, TICK]
    firings = [Firing("caught-up", t, job(bridge, f"t{t:.0f}")) for t in ticks]
    firings.append(Firing("caught-up", TICK, job(bridge, "twice")))  # the same tick again: taken
    assert store.fire_many(firings) == [Fire.PUSHED, Fire.PUSHED, Fire.PUSHED, Fire.TAKEN]
    assert pushed_labels(bridge) == Counter({f"t{t:.0f}": 1 for t in ticks})
    assert store.last(["caught-up"])["caught-up"].tick == TICK
    assert store.fire_many(firings) == [Fire.TAKEN] * 4
    assert pushed_labels(bridge) == Counter()


def test_a_unique_lock_wanted_twice_in_a_batch_lets_one_job_through(bridge: JobBridge) -> None:
    store = store_of(bridge)
    assert bridge.driver().locks.acquire("held-already", "someone", 600.0)
    firings = [
        Firing("first", TICK, job(bridge, "first", unique_key="report", unique_for=600.0)),
        Firing("second", TICK, job(bridge, "second", unique_key="report", unique_for=600.0)),
        Firing("blocked", TICK, job(bridge, "blocked", unique_key="held-already", unique_for=600.0)),
        Firing("free", TICK, job(bridge, "free")),
    ]
    assert store.fire_many(firings) == [Fire.PUSHED, Fire.ADVANCED, Fire.ADVANCED, Fire.PUSHED]
    assert pushed_labels(bridge) == Counter({"first": 1, "free": 1})
    last = store.last(["first", "second", "blocked"])
    assert {name: got.tick for name, got in last.items()} == {"first": TICK, "second": TICK, "blocked": TICK}
    assert last["first"].job_id is not None
    assert last["second"].job_id is None and last["blocked"].job_id is None


def test_a_batch_longer_than_one_statement_or_script_call_fires_every_tick_once(bridge: JobBridge) -> None:
    store = store_of(bridge)
    size = 1234  # past the 500 names of an IN list and the 500 firings of one fire.lua call
    assert store.fire_many([Firing(f"e{i}", TICK, job(bridge, f"e{i}")) for i in range(0, size, 2)]) == \
        [Fire.PUSHED] * len(range(0, size, 2))
    pushed_labels(bridge)
    # the even entries are recorded at TICK: taken; the odd ones are new: pushed; all at once, interleaved
    outcomes = store.fire_many([Firing(f"e{i}", TICK, job(bridge, f"e{i}")) for i in range(size)])
    assert outcomes == [Fire.TAKEN if i % 2 == 0 else Fire.PUSHED for i in range(size)]
    assert pushed_labels(bridge) == Counter({f"e{i}": 1 for i in range(1, size, 2)})
    assert len(store.last([f"e{i}" for i in range(size)])) == size


@pytest.mark.parametrize("settings", SHARED, indirect=True)  # the memory driver stores any envelope
def test_a_batch_whose_job_cannot_be_stored_records_no_tick_of_it(bridge: JobBridge) -> None:
    store = store_of(bridge)
    unstorable = job(bridge, "bad").replace(payload={"label": "bad", "blob": b"not json"})
    with pytest.raises(StoreRefused):
        store.fire_many([Firing("good", TICK, job(bridge, "good")), Firing("bad", TICK, unstorable)])
    assert store.last(["good", "bad"]) == {}
    assert pushed_labels(bridge) == Counter()
    assert store.fire_many([Firing("good", TICK, job(bridge, "good"))]) == [Fire.PUSHED]


def race(calls: list[tuple[ScheduleStore, list[Firing]]]) -> list[list[Fire]]:
    """Each store's fire_many of its batch, in threads let go at the same instant; what each returned."""
    outcomes: list[list[Fire]] = [[] for _ in calls]
    errors: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def fire(index: int, store: ScheduleStore, batch: list[Firing]) -> None:
        start.wait()
        try:
            outcomes[index] = store.fire_many(batch)
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=fire, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]
    return outcomes


@pytest.mark.parametrize("settings", SHARED, indirect=True)
def test_two_schedulers_firing_the_same_large_batch_at_once_push_each_tick_once(
        settings: dict[str, Any]) -> None:
    """Each has its own app and connections; new entries (rows inserted) and then recorded ones (rows locked)."""
    apps = [JobBridge(Settings.from_mapping(settings), jobs=[Beat], clock=FixedClock(NOW)) for _ in range(2)]
    try:
        size = 700
        for tick in (TICK, TICK + 60):
            batches = [[Firing(f"e{i}", tick, job(app, f"{tick:.0f}-{i}")) for i in range(size)] for app in apps]
            outcomes = race([(store_of(app), batch) for app, batch in zip(apps, batches, strict=True)])
            assert len(outcomes[0]) == len(outcomes[1]) == size
            assert all(sorted((a, b), key=lambda f: f.value) == [Fire.PUSHED, Fire.TAKEN]
                       for a, b in zip(*outcomes, strict=True))
            assert pushed_labels(apps[0]) == Counter({f"{tick:.0f}-{i}": 1 for i in range(size)})
    finally:
        for app in apps:
            app.close()
