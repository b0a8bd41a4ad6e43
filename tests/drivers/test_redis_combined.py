"""`RedisDriver.acknowledge_and_reserve`: a batch's acknowledgement and the next claim in one script call.

acknowledge.lua and reserve.lua run as one script (`scripts.acknowledge_and_reserve_source`), so
what each does alone it does here: the acknowledged entries and their leases are gone, the
claimed ones are held under leases, and the batch-wide commands (one XACK, XDEL, ZREM and ZADD
per call) treat every entry of a batch, across queues, as the one-entry commands did.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobbridge.drivers.base import AcknowledgingReserve
from jobbridge.drivers.redis import RedisDriver
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.redis_helpers import drop_keys, make_driver
from tests.services import ensure_redis

CLOCK = FixedClock()  # never moved: every pushed job is due at once


@pytest.fixture
def driver() -> Iterator[RedisDriver]:
    url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
    made = make_driver(url, prefix, CLOCK, reservation=30)
    yield made
    made.close()
    drop_keys(url, prefix)


def _push(driver: RedisDriver, n: int, queue: str = "default") -> list[str]:
    envelopes = [make_envelope(CLOCK, queue=queue) for _ in range(n)]
    driver.push(envelopes)
    return [env.id for env in envelopes]


def _leases(driver: RedisDriver) -> int:
    return int(driver.client.zcard(driver.keys.leases))


def test_it_is_the_declared_port(driver: RedisDriver) -> None:
    assert isinstance(driver, AcknowledgingReserve)


def test_acknowledges_and_reserves_in_one_call(driver: RedisDriver) -> None:
    ids = _push(driver, 5)
    first = driver.reserve(["default"], 2)
    more = driver.acknowledge_and_reserve(first, ["default"], 2)
    assert len({r.id for r in first + more} & set(ids)) == 4
    assert all(r.envelope.attempts == 1 for r in more)
    (counts,) = driver.counts()
    assert (counts.ready, counts.reserved) == (1, 2)  # the first two are gone for good
    assert driver.extend(first, 30) == []
    assert {r.id for r in driver.extend(more, 30)} == {r.id for r in more}
    assert _leases(driver) == 2


def test_a_batch_across_queues_is_acknowledged_whole(driver: RedisDriver) -> None:
    _push(driver, 3, "high")
    _push(driver, 4, "low")
    held = driver.reserve(["high", "low"], 7)
    assert [r.envelope.queue for r in held] == ["high"] * 3 + ["low"] * 4  # priority order
    assert _leases(driver) == 7
    driver.acknowledge(held[1:])
    assert _leases(driver) == 1
    assert driver.counts()[0].pending == 1  # high: the one not acknowledged
    assert driver.acknowledge_and_reserve(held[:1], ["high", "low"], 5) == []
    assert driver.counts() == [] and _leases(driver) == 0


def test_no_room_acknowledges_alone_and_nothing_to_acknowledge_reserves(driver: RedisDriver) -> None:
    _push(driver, 3)
    held = driver.reserve(["default"], 1)
    assert driver.acknowledge_and_reserve(held, ["default"], 0) == []
    assert len(driver.acknowledge_and_reserve([], ["default"], 5)) == 2
    (counts,) = driver.counts()
    assert (counts.ready, counts.reserved) == (0, 2)


def test_a_stale_receipt_is_acknowledged_without_harm(driver: RedisDriver) -> None:
    _push(driver, 2)
    held = driver.reserve(["default"], 1)
    driver.acknowledge(held)
    more = driver.acknowledge_and_reserve(held, ["default"], 5)  # the same receipts again: already gone
    assert len(more) == 1 and _leases(driver) == 1
