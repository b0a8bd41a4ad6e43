"""`RedisDriver.acknowledge_and_reserve`: a batch's acknowledgement and the next claim in one script call.

acknowledge.lua and reserve.lua run as one script (`scripts.acknowledge_and_reserve_source`), so
what each does alone it does here: the acknowledged entries and their leases are gone, the
claimed ones are held under leases, and the batch-wide commands (one XACK, XDEL, ZREM and ZADD
per call) treat every entry of a batch, across queues, as the one-entry commands did.
What every such driver must do is `jobbridge.testing.combined_contract`, run by
`TestRedisDriver`; here, what is Redis's own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobbridge.drivers.redis import RedisDriver
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope
from tests.drivers.redis_helpers import drop_keys, lease_members, make_driver
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
    return len(lease_members(driver))


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


def test_a_stale_receipt_is_acknowledged_without_harm(driver: RedisDriver) -> None:
    _push(driver, 2)
    held = driver.reserve(["default"], 1)
    driver.acknowledge(held)
    more = driver.acknowledge_and_reserve(held, ["default"], 5)  # the same receipts again: already gone
    assert len(more) == 1 and _leases(driver) == 1
