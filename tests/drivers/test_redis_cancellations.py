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

from jobbridge.drivers.base import ReadsCancellations
from jobbridge.drivers.redis import RedisDriver
from jobbridge.results.redis import open_redis_store
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
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


def test_each_way_of_reserving_marks_the_cancelled_jobs(driver: RedisDriver, prefix: str) -> None:
    store = _store(prefix)
    assert isinstance(driver, ReadsCancellations) and driver.read_cancellations(store)
    ids = _push(driver, 6)
    store.cancel([ids[1], ids[3], ids[5]], 60)
    first = driver.reserve(["default"], 2)
    assert [(r.id, r.cancelled) for r in first] == [(ids[0], False), (ids[1], True)]
    more = driver.acknowledge_and_reserve(first, ["default"], 2)
    assert [(r.id, r.cancelled) for r in more] == [(ids[2], False), (ids[3], True)]
    woken = driver._block(["default"], 5, 1.0)  # what an idle worker's blocking read hands out
    assert [(r.id, r.cancelled) for r in woken] == [(ids[4], False), (ids[5], True)]
    store.close()


def test_a_lapsed_cancellation_is_not_in_force(driver: RedisDriver, prefix: str) -> None:
    clock = FixedClock()
    store = _store(prefix, clock=clock)
    assert driver.read_cancellations(store)
    (job_id,) = _push(driver, 1)
    store.cancel([job_id], 10)
    clock.advance(11)  # by the result store's clock, as its own lookup judges it
    (res,) = driver.reserve(["default"], 1)
    assert not res.cancelled
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
