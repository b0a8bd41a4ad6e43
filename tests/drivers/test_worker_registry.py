"""The worker registry and queue ages on memory, SQLite and Redis: beat, list, forget, prune; oldest waiting."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobbridge.drivers.queue_age_port import queue_ages_of
from jobbridge.drivers.worker_registry_port import STALE_AFTER, WorkerBeat, worker_registry_of
from jobbridge.envelope import Envelope
from jobbridge.testing import FixedClock
from tests.drivers.redis_helpers import drop_keys
from tests.services import ensure_redis


@pytest.fixture(params=["memory", "sqlite", "redis"])
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    clock = FixedClock(1_000_000.0)
    if request.param == "memory":
        from jobbridge.drivers.memory import MemoryDriver

        yield MemoryDriver(clock=clock)
        return
    if request.param == "sqlite":
        from jobbridge.drivers.database.driver import DatabaseDriver

        found = DatabaseDriver(f"sqlite:///{tmp_path / 'jobs.sqlite3'}", clock=clock)
        found.migrate()
        yield found
        found.close()
        return
    from jobbridge.drivers.redis.driver import RedisDriver
    from jobbridge.drivers.redis.settings import parse_settings

    url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
    found = RedisDriver(parse_settings({"url": url, "prefix": prefix}), clock=clock)
    yield found
    found.close()
    drop_keys(url, prefix)


def beat(worker_id: str, at: float, **changes: Any) -> WorkerBeat:
    return WorkerBeat(id=worker_id, name="w", host="h", pid=1, connection="default", queues=("a", "b"),
                      concurrency=4, started_at=at, last_beat=at, **changes)


def test_beats_replace_list_newest_first_forget_and_prune(driver: Any) -> None:
    registry = worker_registry_of(driver)
    assert registry is not None
    now = registry.now()
    registry.beat(beat("one", now - 100))
    registry.beat(beat("two", now - 50))
    registry.beat(beat("one", now, running=3, processed=10))
    listed = registry.list()
    assert [w.id for w in listed] == ["one", "two"]
    assert listed[0].running == 3 and listed[0].processed == 10 and listed[0].queues == ("a", "b")
    assert listed[0].is_live(now) and not listed[1].is_live(now) and now - listed[1].last_beat > STALE_AFTER
    assert registry.prune(now - 40) == 1
    assert [w.id for w in registry.list()] == ["one"]
    registry.forget("one")
    assert registry.list() == []


def test_the_oldest_waiting_job_per_queue(driver: Any) -> None:
    ages = queue_ages_of(driver)
    assert ages is not None
    now = driver.clock.now()
    envs = [Envelope.new("j", "a", {}, tries=1, timeout=5, now=now - 30),
            Envelope.new("j", "a", {}, tries=1, timeout=5, now=now - 10),
            Envelope.new("j", "b", {}, tries=1, timeout=5, now=now, available_at=now + 60)]
    driver.push(envs)
    found = ages.oldest_waiting(["a", "b", "c"])
    assert set(found) == {"a"}  # b's job is not due yet, c holds none
    assert found["a"] >= 0 and (found["a"] == pytest.approx(30, abs=1) or driver.__class__.__name__ == "RedisDriver")
    driver.reserve(["a"], 2)
    assert ages.oldest_waiting(["a"]) == {}
