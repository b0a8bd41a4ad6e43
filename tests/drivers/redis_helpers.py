"""Helpers for tests/drivers/test_redis.py: drivers on a throwaway prefix, and a worker to kill."""

from __future__ import annotations

import time
from multiprocessing.synchronize import Event
from typing import Any

import redis

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.redis import RedisDriver
from jobbridge.drivers.redis.settings import parse_settings
from jobbridge.envelope import Envelope, new_id
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import make_envelope


def make_driver(url: str, prefix: str, clock: Clock, **settings: object) -> RedisDriver:
    return RedisDriver(parse_settings({"url": url, "prefix": prefix, **settings}), clock=clock)


def drop_keys(url: str, prefix: str) -> None:
    """Delete one test's keys; the shared server is never flushed."""
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def lease_members(driver: RedisDriver) -> list[tuple[bytes, float]]:
    """The lease set's members and deadlines, without the member at +inf that keeps it a skiplist (reserve.lua)."""
    found: list[Any] = driver.client.zrangebyscore(driver.keys.leases, "-inf", "(+inf", withscores=True)
    return [(bytes(member), float(score)) for member, score in found]


def inject_undecodable(driver: RedisDriver, queue: str, body: bytes) -> None:
    """A stream entry whose body no envelope decoder accepts, as a foreign producer might write."""
    driver.client.xadd(driver.keys.stream(queue), {"id": new_id(), "body": body, "attempts": 0})


def write_entry(driver: RedisDriver, clock: FixedClock, queue: str, fields: dict[str, Any]) -> str:
    """An entry written straight onto a queue's stream, as anything but this driver might; its entry id.

    ``fields`` start from a good job's (id, body, attempts 0); a value of None drops that field.
    """
    job_id = new_id()
    body = make_envelope(clock, queue=queue, id=job_id).encode()
    written = {k: v for k, v in {"id": job_id, "body": body, "attempts": "0", **fields}.items() if v is not None}
    driver.client.sadd(driver.keys.queues, queue)
    return str(driver.client.xadd(driver.keys.stream(queue), written).decode())


def envelope_now(**fields: Any) -> Envelope:
    """An envelope due by the real clock, for tests on the system clock."""
    return make_envelope(FixedClock(SYSTEM_CLOCK.now()), **fields)


def worker_that_dies(url: str, prefix: str, ready: Event) -> None:
    """Run in a child process: reserve one job, say so, and 'run' it until killed."""
    driver = make_driver(url, prefix, SYSTEM_CLOCK, reservation=1)
    assert len(driver.reserve(["default"], 1)) == 1
    ready.set()
    time.sleep(60)
