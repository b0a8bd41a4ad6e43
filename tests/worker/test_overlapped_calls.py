"""On Redis the worker starts a reserved batch while its next store call is out (`jobbridge.worker_window`).

A real `RedisDriver` (on a throwaway key prefix) whose overlapping call notes
when its ``meanwhile`` runs, and a pool whose ``submit`` notes whether it was
called from inside one: most batches must start there, every job must run once
and be acknowledged, and a job budget (``--max-jobs``), which counts a batch as
it starts, is never overrun by a batch held back.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from jobbridge import Job, JobBridge, JobContext, RateLimit, Settings
from jobbridge.clock import SYSTEM_CLOCK
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.redis import RedisDriver
from jobbridge.drivers.redis.settings import parse_settings
from jobbridge.envelope import Reservation
from jobbridge.pool import Pool
from jobbridge.rate_gate import RateGate
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from jobbridge.worker import Worker, WorkerOptions
from jobbridge.worker_window import HeldBack, room
from tests.drivers.redis_helpers import drop_keys
from tests.services import ensure_redis
from tests.worker import jobs
from tests.worker.conftest import Harness, drain_noops

JOBS = 2_000


class Notes:
    """Counts overlapping calls, and says (``inside``) when one's ``meanwhile`` is running (a driver mixin)."""

    calls = 0
    inside = threading.local()

    def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
        self.calls += 1
        if meanwhile is None:
            return super().acknowledge_and_reserve(reservations, queues, limit, None)  # type: ignore[misc]
        run = meanwhile

        def noted() -> None:
            self.inside.now = True
            try:
                run()
            finally:
                self.inside.now = False
        return super().acknowledge_and_reserve(reservations, queues, limit, noted)  # type: ignore[misc]


class Noting(Notes, RedisDriver):
    pass


class NotingDatabase(Notes, DatabaseDriver):
    pass


class Limited(Job, name="worker.limited", rate_limit=RateLimit("100000/s", shared=True)):
    """Takes a turn of a limit kept in the store: starting it is a store call."""

    def handle(self, ctx: JobContext) -> None:
        jobs.RAN.append(("limited", ctx.id))


@pytest.fixture
def clock() -> FixedClock:
    """The bridge's clock at the real now: the jobs it dispatches are due by Redis's clock."""
    return FixedClock(SYSTEM_CLOCK.now())


@pytest.fixture
def driver() -> Iterator[Noting]:
    url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
    made = Noting(parse_settings({"url": url, "prefix": prefix, "reservation": 60}), clock=SYSTEM_CLOCK)
    yield made
    made.close()
    drop_keys(url, prefix)


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many attempts the pool was handed inside a call's ``meanwhile`` and outside one."""
    seen = {"inside": 0, "outside": 0}
    plain = Pool.submit

    def submit(pool: Pool, reservation: Reservation) -> None:
        seen["inside" if getattr(Notes.inside, "now", False) else "outside"] += 1
        plain(pool, reservation)
    monkeypatch.setattr(Pool, "submit", submit)
    return seen


def test_batches_start_while_the_next_call_is_out(harness: Harness, driver: Noting,
                                                  submitted: dict[str, int]) -> None:
    drain_noops(harness, driver, JOBS)
    assert driver.calls > 0
    assert submitted["inside"] > JOBS // 2, submitted  # without the overlap: none


def test_a_job_budget_is_never_overrun_by_a_batch_held_back(harness: Harness, driver: Noting,
                                                            submitted: dict[str, int]) -> None:
    bridge = harness.bridge(driver=driver)
    bridge.dispatch_many(jobs.Noop(n=i) for i in range(500))
    stats = harness.worker(bridge, concurrency=4, max_jobs=150, sleep=0.01).run()
    assert stats.succeeded == 150 and len(jobs.RAN) == 150
    assert submitted["inside"] == 0, "with a budget nothing is held back"
    (counts,) = driver.counts()
    assert (counts.pending, counts.reserved) == (350, 0), "nothing reserved beyond the budget is left held"


def test_a_rate_limited_batch_is_never_held_back(tmp_path: Path, clock: FixedClock, submitted: dict[str, int],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Its turns are taken from the store as it starts, which must not happen inside another call: on SQLite
    that second write would wait for the first's lock until the busy timeout."""
    booked = {"inside": 0}
    plain_book = RateGate._book

    def book(gate: RateGate, *args: Any) -> None:
        booked["inside"] += bool(getattr(Notes.inside, "now", False))
        plain_book(gate, *args)
    monkeypatch.setattr(RateGate, "_book", book)
    driver = NotingDatabase(f"sqlite:///{tmp_path / 'jobs.sqlite3'}", reservation=60, clock=clock)
    driver.migrate()
    conf = Settings.from_mapping({"driver": "memory", "reservation": 60})
    bridge = JobBridge(conf, clock=clock, drivers={conf.default_connection: driver}, jobs=[Limited])
    try:
        bridge.dispatch_many(Limited() for _ in range(300))
        stats = Worker(bridge, WorkerOptions(concurrency=4, stop_when_empty=True, sleep=0.01)).run()
    finally:
        bridge.close()
    assert stats.succeeded == 300 and len({job_id for kind, job_id in jobs.RAN if kind == "limited"}) == 300
    assert driver.calls > 0 and booked["inside"] == 0 and submitted["inside"] == 0, (booked, submitted)


# -- the window and the held-back batch, without a store ---------------------------------------


def test_the_overlapping_window_is_larger_and_each_call_asks_for_half_of_it() -> None:
    plain, overlapping = room(8, 0, 0.05), room(8, 0, 0.05, overlapping=True)
    assert plain == 8 * 8  # the threads and 7 x 8 ahead
    assert overlapping == (8 + 8 * 31) // 2  # half of the threads and 31 x 8 ahead
    assert room(8, overlapping, 0.05, overlapping=True) == overlapping, "room for the batch the next call reserves"
    assert room(8, 0, 500.0, overlapping=True) == 8, "slow attempts: nothing ahead, and no halving"


def test_a_held_back_batch_starts_once_even_when_the_call_fails() -> None:
    started: list[list[str]] = []
    held = HeldBack(lambda got: started.append([r.id for r in got]))

    class Failing:
        def acknowledge_and_reserve(self, reservations: Sequence[Reservation], queues: Sequence[str],
                                    limit: int, meanwhile: Callable[[], None] | None = None) -> list[Reservation]:
            raise ConnectionError("before the request was written")

    batch = [Reservation(make_envelope(FixedClock()), None, 0.0) for _ in range(3)]
    held.hold(batch)
    with pytest.raises(ConnectionError):
        held.call(Failing(), [], ["default"], 10)  # type: ignore[arg-type]
    held.start_now()
    assert started == [[r.id for r in batch]] and not held
