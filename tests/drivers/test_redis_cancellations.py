"""The Redis driver reads a Redis result store's cancellations in its reserve (`ReadsCancellations`).

A cancellation that landed before a job was reserved still stops it: reserve.lua
(and the combined call, and the blocking read) marks the reservation ``cancelled``,
and the worker, which then makes no lookup of its own per batch, acknowledges it unrun.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from jobbridge.drivers.redis import RedisDriver
from jobbridge.results.redis import open_redis_store
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import ReadsCancellationsContract, make_envelope
from tests.drivers.cancellation_checks import check_a_cancelled_job_is_acknowledged_unrun
from tests.drivers.redis_helpers import drop_keys, make_driver
from tests.services import ensure_redis

CLOCK = FixedClock()


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"jbtest:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_keys(ensure_redis(), name)


@pytest.fixture
def driver(prefix: str) -> Iterator[RedisDriver]:
    made = make_driver(ensure_redis(), prefix, CLOCK, reservation=30)
    yield made
    made.close()


def _store(prefix: str, url: str | None = None, clock: FixedClock = CLOCK) -> Any:
    return open_redis_store(url or ensure_redis(), clock=clock, prefix=prefix)


def _push(driver: RedisDriver, n: int) -> list[str]:
    envelopes = [make_envelope(CLOCK) for _ in range(n)]
    driver.push(envelopes)
    return [env.id for env in envelopes]


class TestReadsCancellations(ReadsCancellationsContract):
    """The shipped suite; the driver's fixture is this module's."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return CLOCK

    @pytest.fixture
    def cancelling_store(self, prefix: str, store_clock: FixedClock) -> Iterator[Any]:
        store = _store(prefix, clock=store_clock)
        yield store
        store.close()


def test_the_blocking_read_marks_the_cancelled_jobs(driver: RedisDriver, prefix: str) -> None:
    store = _store(prefix)
    assert driver.read_cancellations(store)
    ids = _push(driver, 3)
    store.cancel([ids[2]], 60)
    assert [r.id for r in driver.reserve(["default"], 1)] == [ids[0]]  # the stream's group exists from here
    woken = driver._block(["default"], 5, 1.0)  # what an idle worker's blocking read hands out
    assert [(r.id, r.cancelled) for r in woken] == [(ids[1], False), (ids[2], True)]
    store.close()


def test_a_store_elsewhere_is_not_read(driver: RedisDriver, prefix: str) -> None:
    other_db = ensure_redis().rsplit("/", 1)[0] + "/15"
    store = _store(prefix, url=other_db)
    assert not driver.read_cancellations(store)
    assert not driver.read_cancellations(object())
    _push(driver, 1)
    (res,) = driver.reserve(["default"], 1)
    assert not res.cancelled
    store.close()


def test_a_worker_acknowledges_a_job_cancelled_before_its_reserve_unrun(prefix: str) -> None:
    settings = {"driver": "redis", "redis_url": ensure_redis(), "redis_prefix": prefix}
    check_a_cancelled_job_is_acknowledged_unrun(settings)
