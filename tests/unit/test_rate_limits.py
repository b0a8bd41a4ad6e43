"""Rate limits: the parsing of a rate, the bucket arithmetic, and the worker's gate, on a FixedClock."""

from __future__ import annotations

import itertools
import threading

import pytest

from jobbridge import Job, JobContext, job
from jobbridge.envelope import Reservation
from jobbridge.errors import ConfigurationError, JobDefinitionError
from jobbridge.rate_gate import RateGate
from jobbridge.rate_limits import FileBuckets, Grants, LocalBuckets, RateLimit, as_rate_limit, book, per_second
from jobbridge.registry import JobRegistry
from jobbridge.testing import FixedClock
from jobbridge.testing.contract import make_envelope


@job("tests.rate.limited", rate_limit="5/s")
class Limited:
    n: int

    def handle(self, ctx: JobContext) -> None: ...


class Shared(Job, name="tests.rate.shared", rate_limit=RateLimit("1/m", shared=True)):
    def handle(self, ctx: JobContext) -> None: ...


@job("tests.rate.free")
class Free:
    n: int

    def handle(self, ctx: JobContext) -> None: ...


# -- rates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rate", "expected"), [
    ("10/s", 10.0), ("50/m", 50 / 60), ("100/h", 100 / 3600), ("5", 5.0), (5, 5.0), (2.5, 2.5), (" 3 / m ", 0.05),
])
def test_a_rate_is_read_as_celery_writes_it(rate: str | float, expected: float) -> None:
    assert per_second(rate) == pytest.approx(expected)


@pytest.mark.parametrize("rate", ["10/d", "ten/s", "-1/s", "", True, float("inf")])
def test_a_rate_not_understood_is_refused_naming_the_forms(rate: object) -> None:
    with pytest.raises(JobDefinitionError, match="rate limit"):
        per_second(rate)  # type: ignore[arg-type]


def test_zero_means_no_limit_and_a_rate_limit_of_zero_is_refused() -> None:
    assert as_rate_limit(0) is None and as_rate_limit("0/m") is None and as_rate_limit(None) is None
    with pytest.raises(JobDefinitionError, match="allows nothing"):
        RateLimit("0/s")
    with pytest.raises(JobDefinitionError, match="burst"):
        RateLimit("1/s", burst=0)


def test_the_option_is_on_the_job_class() -> None:
    assert Limited.options.rate_limit == RateLimit("5/s")
    assert Shared.options.rate_limit is not None and Shared.options.rate_limit.shared
    assert Free.options.rate_limit is None
    assert "shared by every worker" in str(Shared.options.rate_limit)


# -- the arithmetic ----------------------------------------------------------------------------


def test_turns_are_one_interval_apart_within_the_horizon() -> None:
    limit = RateLimit("5/s")
    tat, grants = book(0.0, 100.0, limit, 10, horizon=1.0)
    assert grants.starts == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert grants.next_in == pytest.approx(1.0)
    # a second taker at the same moment queues behind the first's turns
    tat, grants = book(tat, 100.0, limit, 2, horizon=2.0)
    assert grants.starts == pytest.approx([1.0, 1.2])
    # after a quiet spell the bucket does not save turns up (burst 1)
    tat, grants = book(tat, 200.0, limit, 3, horizon=0.0)
    assert grants.starts == (0.0,)


def test_a_burst_lets_a_quiet_bucket_start_several_at_once() -> None:
    limit = RateLimit("1/s", burst=3)
    tat, grants = book(0.0, 50.0, limit, 5, horizon=0.0)
    assert grants.starts == (0.0, 0.0, 0.0)
    assert grants.next_in == pytest.approx(1.0)
    _, grants = book(tat, 51.0, limit, 5, horizon=0.0)
    assert grants.starts == (0.0,)


def test_local_buckets_on_a_fixed_clock_never_grant_more_than_the_rate() -> None:
    clock = FixedClock()
    buckets = LocalBuckets(clock.now)
    limit = RateLimit("10/s")
    starts: list[float] = []
    lock = threading.Lock()

    def taker() -> None:
        for _ in range(50):
            grants = buckets.take("k", limit, 1, horizon=5.0)
            with lock:
                starts.extend(clock.now() + s for s in grants.starts)

    threads = [threading.Thread(target=taker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(starts) == 51  # the turns within five seconds, one of them now
    ordered = sorted(starts)
    assert all(b - a == pytest.approx(0.1) for a, b in itertools.pairwise(ordered))


def test_file_buckets_are_one_bucket_for_every_holder_of_the_file(tmp_path: object) -> None:
    path = f"{tmp_path}/rate-limits"
    first, second = FileBuckets(path), FileBuckets(path)
    limit = RateLimit("1/s")
    assert first.take("k", limit, 1, 0.0).starts == (0.0,)
    assert second.take("k", limit, 1, 0.0).starts == ()  # the other process's take counted
    assert second.take("other", limit, 1, 0.0).starts == (0.0,)
    with open(path, "w") as file:  # a file cut short starts afresh rather than failing the worker
        file.write("{")
    assert first.take("k", limit, 1, 0.0).starts == (0.0,)


# -- the gate ----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.back: list[tuple[str, float]] = []
        self.refuse = False

    def start(self, res: Reservation) -> None:
        self.started.append(res.id)

    def hand_back(self, res: Reservation, delay: float) -> bool:
        if self.refuse:
            return False
        self.back.append((res.id, delay))
        return True


def reservations(clock: FixedClock, cls: type, n: int) -> list[Reservation]:
    return [Reservation(make_envelope(clock, name=cls.options.name, payload={"n": i}, attempts=1), None, 0.0)
            for i in range(n)]


def make_gate(clock: FixedClock, *, horizon: float = 1.0, shared: object = None, store: object = None) -> RateGate:
    registry = JobRegistry()
    registry.register(Limited, Free)

    def call(operation: str, fn: object) -> Grants | None:
        return fn()  # type: ignore[operator, no-any-return]

    return RateGate(registry, local=LocalBuckets(clock.now), shared=shared,  # type: ignore[arg-type]
                    horizon=horizon, monotonic=clock.now, store=store or call)  # type: ignore[arg-type]


def test_the_gate_starts_holds_and_hands_back_and_never_holds_up_other_jobs() -> None:
    clock = FixedClock()
    gate, seen = make_gate(clock), Recorder()
    limited, free = reservations(clock, Limited, 10), reservations(clock, Free, 3)
    gate.admit([limited[0], free[0], *limited[1:], free[1], free[2]], seen.start, seen.hand_back)
    # every unlimited job and the first limited one start now; four wait for turns within a second
    assert seen.started == [free[0].id, free[1].id, free[2].id, limited[0].id]
    assert gate.waiting == 4
    # the other five go back unstarted, spread one interval apart from the horizon on
    assert [r for r, _ in seen.back] == [r.id for r in limited[5:]]
    assert [d for _, d in seen.back] == pytest.approx([1.0, 1.2, 1.4, 1.6, 1.8])
    assert gate.until_due() == pytest.approx(0.2)
    clock.advance(0.2)
    gate.start_due(seen.start, seen.hand_back)
    assert seen.started[-1] == limited[1].id and gate.waiting == 3
    clock.advance(0.6)
    gate.start_due(seen.start, seen.hand_back)
    assert seen.started[-3:] == [r.id for r in limited[2:5]] and gate.waiting == 0


def test_a_stopping_worker_hands_every_waiting_job_back() -> None:
    clock = FixedClock()
    gate, seen = make_gate(clock), Recorder()
    gate.admit(reservations(clock, Limited, 3), seen.start, seen.hand_back)
    assert gate.waiting == 2
    seen.refuse = True  # the store fails the hand-back: they wait, untaken, and are tried again
    gate.hand_back_all(seen.hand_back)
    assert gate.waiting == 2 and seen.back == []
    seen.refuse = False
    gate.hand_back_all(seen.hand_back)
    assert gate.waiting == 0 and [d for _, d in seen.back] == [0.0, 0.0]


def test_a_failed_shared_take_leaves_the_jobs_waiting_for_another_try() -> None:
    clock = FixedClock()
    failing = {"on": True}
    inner = LocalBuckets(clock.now, shared=True)

    def call(operation: str, fn: object) -> Grants | None:
        return None if failing["on"] else fn()  # type: ignore[operator, no-any-return]

    gate, seen = make_gate(clock, store=call, shared=inner), Recorder()
    gate.admit(reservations(clock, Limited, 2), seen.start, seen.hand_back)
    assert seen.started == [] and gate.waiting == 2
    failing["on"] = False
    clock.advance(1.0)
    gate.start_due(seen.start, seen.hand_back)
    assert len(seen.started) == 1 and gate.waiting == 1


def test_a_shared_limit_on_a_store_without_shared_buckets_is_refused_at_start() -> None:
    clock = FixedClock()
    registry = JobRegistry()
    registry.register(Shared)
    gate = RateGate(registry, local=LocalBuckets(clock.now), shared=None, horizon=1.0, monotonic=clock.now,
                    store=lambda op, fn: fn())
    with pytest.raises(ConfigurationError, match=r"tests\.rate\.shared.*sqs driver.*drop shared=True"):
        gate.check("default", "sqs")
    RateGate(registry, local=LocalBuckets(clock.now), shared=LocalBuckets(clock.now, shared=True), horizon=1.0,
             monotonic=clock.now, store=lambda op, fn: fn()).check("default", "memory")
