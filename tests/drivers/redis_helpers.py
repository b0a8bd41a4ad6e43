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


def inject_undecodable(driver: RedisDriver, queue: str, body: bytes) -> None:
    """A stream entry whose body no envelope decoder accepts, as a foreign producer might write."""
    driver.client.xadd(driver.keys.stream(queue), {"id": new_id(), "body": body, "attempts": 0})


def envelope_now(**fields: Any) -> Envelope:
    """An envelope due by the real clock, for tests on the system clock."""
    return make_envelope(FixedClock(SYSTEM_CLOCK.now()), **fields)


def worker_that_dies(url: str, prefix: str, ready: Event) -> None:
    """Run in a child process: reserve one job, say so, and 'run' it until killed."""
    driver = make_driver(url, prefix, SYSTEM_CLOCK, reservation=1)
    assert len(driver.reserve(["default"], 1)) == 1
    ready.set()
    time.sleep(60)
