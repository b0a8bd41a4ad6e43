"""The redis driver: the contract suite against real Redis, then what only Redis can get wrong."""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import redis

from jobbridge.clock import SYSTEM_CLOCK, Clock, StoreClock
from jobbridge.drivers import Resources, driver_for_url, load
from jobbridge.drivers.redis import REFUSED, SETTINGS, RedisDriver, check_eviction_policy
from jobbridge.drivers.redis.entries import MAX_MESSAGE_BYTES, chunks
from jobbridge.drivers.redis.keys import CONSUMER, GROUP
from jobbridge.drivers.redis.settings import RedisSettings, parse_settings
from jobbridge.errors import (
    ConfigurationError,
    DriverError,
    DriverUnavailable,
    NoFailedJob,
    RefusedSetting,
    StoreRefused,
)
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import (
    AcknowledgingReserveContract,
    DriverContract,
    FailedStoreContract,
    LockStoreContract,
    make_envelope,
    pending,
)
from tests.drivers.redis_helpers import (
    drop_keys,
    envelope_now,
    inject_undecodable,
    lease_members,
    make_driver,
    worker_that_dies,
    write_entry,
)
from tests.drivers.redis_server import own_redis
from tests.services import ensure_redis


@pytest.fixture(scope="module")
def redis_url() -> str:
    return ensure_redis()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A fresh prefix per test; its keys are deleted afterwards (the shared server is never flushed)."""
    name = f"jbtest:{uuid.uuid4().hex[:12]}:"
    yield name
    drop_keys(redis_url, name)


class TestRedisDriver(DriverContract, FailedStoreContract, LockStoreContract, AcknowledgingReserveContract):
    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, redis_url: str, prefix: str, clock: FixedClock) -> Iterator[RedisDriver]:
        driver = make_driver(redis_url, prefix, clock, reservation=self.RESERVATION)
        yield driver
        driver.close()

    def inject_undecodable(self, driver: RedisDriver, queue: str, body: bytes) -> None:
        inject_undecodable(driver, queue, body)


# -- blocking reserve -------------------------------------------------------------------------


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def open_driver(redis_url: str, prefix: str) -> Iterator[Callable[..., RedisDriver]]:
    """Drivers on this test's prefix, closed when it ends."""
    opened: list[RedisDriver] = []

    def make(clock: Clock, **settings: object) -> RedisDriver:
        opened.append(make_driver(redis_url, prefix, clock, **settings))
        return opened[-1]

    yield make
    for driver in opened:
        driver.close()


@pytest.fixture
def driver(open_driver: Callable[..., RedisDriver], clock: FixedClock) -> RedisDriver:
    return open_driver(clock)


def test_a_blocking_reserve_wakes_on_a_push_from_another_client(
    driver: RedisDriver, open_driver: Callable[..., RedisDriver], clock: FixedClock
) -> None:
    other = open_driver(clock)
    driver.reserve(["default"], 1)  # creates the group, as a worker's first poll would
    timer = threading.Timer(0.2, lambda: other.push([make_envelope(clock)]))
    timer.start()
    started = time.monotonic()
    got = driver.reserve(["low", "default"], 10, wait=20.0)
    elapsed = time.monotonic() - started
    timer.join()
    assert len(got) == 1 and got[0].attempt == 1
    assert 0.15 < elapsed < 10.0, f"woke after {elapsed:.3f}s, not on the push"  # wide: a busy machine is slow
    assert [r.id for r in driver.extend(got, 60)] == [got[0].id]  # its lease was recorded
    driver.acknowledge(got)
    assert pending(driver, "default") == 0


def test_an_idle_blocking_reserve_returns_empty_after_its_wait(driver: RedisDriver) -> None:
    started = time.monotonic()
    assert driver.reserve(["default"], 5, wait=0.3) == []
    assert 0.25 < time.monotonic() - started < 2.0


def test_a_blocking_read_beyond_the_limit_hands_the_rest_back(driver: RedisDriver, clock: FixedClock) -> None:
    driver.reserve(["high", "low"], 1)  # groups exist, so raw pushes below are readable
    high = [make_envelope(clock, queue="high") for _ in range(2)]
    low = [make_envelope(clock, queue="low") for _ in range(2)]
    driver.push(high + low)
    # XREADGROUP BLOCK answers at once when entries wait, one batch per stream: 4 claimed, 3 wanted
    got = driver._block(["high", "low"], 3, 1.0)
    assert [r.envelope.queue for r in got] == ["high", "high", "low"]
    assert pending(driver, "low") == 2
    rest = driver.reserve(["low"], 5)
    assert len(rest) == 1 and rest[0].attempt == 1 and rest[0].id != got[2].id
    driver.acknowledge(got + rest)
    assert pending(driver, "high") + pending(driver, "low") == 0


def test_threads_blocking_on_reserve_never_share_a_job(driver: RedisDriver, clock: FixedClock) -> None:
    taken: list[str] = []
    guard = threading.Lock()
    done = threading.Event()
    driver.reserve(["default"], 1)

    def work() -> None:
        while not done.is_set() or pending(driver, "default"):
            got = driver.reserve(["default"], 5, wait=0.2)
            with guard:
                taken.extend(r.id for r in got)
            driver.acknowledge(got)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    pushed: list[str] = []
    for _ in range(40):
        envs = [make_envelope(clock) for _ in range(10)]
        driver.push(envs)
        pushed += [e.id for e in envs]
        time.sleep(0.005)
    done.set()
    for t in threads:
        t.join(10)
    assert len(taken) == len(set(taken)) == 400
    assert set(taken) == set(pushed)


# -- delayed jobs -----------------------------------------------------------------------------


def test_delayed_jobs_wait_in_a_sorted_set_and_lua_promotes_them(driver: RedisDriver, clock: FixedClock) -> None:
    soon = make_envelope(clock, delay=10)
    later = make_envelope(clock, delay=20, queue="other")
    driver.push([soon, later])
    assert driver.client.zcard(driver.keys.delayed("default")) == 1
    assert driver.client.xlen(driver.keys.stream("default")) == 0
    clock.advance(15)
    # one reserve promotes every due job of the queues it names, then claims
    (res,) = driver.reserve(["default", "other"], 5)
    assert res.id == soon.id and res.attempt == 1
    assert driver.client.zcard(driver.keys.delayed("default")) == 0
    assert driver.client.zcard(driver.keys.delayed("other")) == 1
    driver.release(res, 30)  # back into the delayed set as attempt 2, not into this process
    assert driver.client.zcard(driver.keys.delayed("default")) == 1
    clock.advance(31)
    (again,) = driver.reserve(["default"], 5)
    assert again.id == soon.id and again.attempt == 2 and dict(again.envelope.payload) == {"n": 1}


def test_a_blocking_reserve_wakes_for_a_delayed_job_falling_due(open_driver: Callable[..., RedisDriver]) -> None:
    driver = open_driver(SYSTEM_CLOCK)
    env = envelope_now(delay=0.3)
    driver.push([env])
    started = time.monotonic()
    got = driver.reserve(["default"], 1, wait=3.0)
    assert [r.id for r in got] == [env.id]
    assert 0.2 < time.monotonic() - started < 1.5


# -- leases: the lease set is the authority, XAUTOCLAIM the safety net ------------------------


def test_an_entry_claimed_without_a_lease_is_swept_back_by_xautoclaim(
    open_driver: Callable[..., RedisDriver], clock: FixedClock
) -> None:
    driver = open_driver(clock, reservation=0.2)
    env = make_envelope(clock)
    driver.push([env])
    stream = driver.keys.stream("default")
    driver.client.xgroup_create(stream, GROUP, "0")
    # a worker that died between its blocking read and recording the lease
    driver.client.xreadgroup(GROUP, CONSUMER, {stream: ">"}, count=1)
    assert driver.reclaim_expired() == 0  # idle for less than a reservation
    time.sleep(0.3)
    assert driver.reclaim_expired() == 1
    (res,) = driver.reserve(["default"], 1)
    assert res.id == env.id and res.attempt == 2


def test_a_heartbeat_outlives_the_real_idle_time(open_driver: Callable[..., RedisDriver], clock: FixedClock) -> None:
    """XAUTOCLAIM sees a long-idle entry, but its lease member says it is held: it stays put."""
    driver = open_driver(clock, reservation=0.2)
    driver.push([make_envelope(clock)])
    (res,) = driver.reserve(["default"], 1)
    time.sleep(0.3)
    clock.advance(0.1)
    assert driver.extend([res], 0.2)
    assert driver.reclaim_expired() == 0
    assert driver.reserve(["default"], 1) == []
    driver.acknowledge([res])
    assert pending(driver, "default") == 0


def test_a_worker_killed_mid_job_leaves_it_to_run_again(
    open_driver: Callable[..., RedisDriver], prefix: str
) -> None:
    driver = open_driver(SYSTEM_CLOCK, reservation=1)
    env = envelope_now()
    driver.push([env])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=worker_that_dies, args=(driver.settings.url, prefix, ready))
    child.start()
    assert ready.wait(30)
    child.kill()  # kill -9 mid-job
    child.join(10)
    assert driver.reserve(["default"], 1) == [] and driver.reclaim_expired() == 0
    time.sleep(1.1)
    assert driver.reclaim_expired() == 1
    (res,) = driver.reserve(["default"], 1)
    assert res.id == env.id and res.attempt == 2
    driver.acknowledge([res])
    assert pending(driver, "default") == 0


def test_a_long_job_with_a_live_heartbeat_runs_once(open_driver: Callable[..., RedisDriver]) -> None:
    driver, other = open_driver(SYSTEM_CLOCK, reservation=1), open_driver(SYSTEM_CLOCK, reservation=1)
    driver.push([envelope_now()])
    (res,) = driver.reserve(["default"], 1)
    deadline = time.monotonic() + 2.5  # two and a half reservations
    while time.monotonic() < deadline:
        time.sleep(0.25)
        (res,) = driver.extend([res], 1)
        assert other.reclaim_expired() == 0
        assert other.reserve(["default"], 1) == []
    driver.acknowledge([res])
    assert pending(other, "default") == 0


def test_a_stale_reservation_settles_nothing(driver: RedisDriver, clock: FixedClock) -> None:
    env = make_envelope(clock)
    driver.push([env])
    (stale,) = driver.reserve(["default"], 1)
    clock.advance(61)
    assert driver.reclaim_expired() == 1
    (fresh,) = driver.reserve(["default"], 1)
    driver.release(stale, 0)
    driver.fail(stale, "late")
    driver.acknowledge([stale])
    assert driver.failed.count() == 0 and pending(driver, "default") == 1
    assert [r.id for r in driver.extend([fresh], 60)] == [env.id]
    driver.acknowledge([fresh])
    assert pending(driver, "default") == 0
    assert lease_members(driver) == []


def test_acknowledge_takes_a_batch_across_queues(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock, queue=q) for q in ("a", "b", "a", "c")])
    got = driver.reserve(["a", "b", "c"], 10)
    assert [r.envelope.queue for r in got] == ["a", "a", "b", "c"]
    driver.acknowledge(got)
    assert driver.counts() == []
    assert lease_members(driver) == []


def test_counts_before_any_worker_read_the_queue(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock, queue="fresh"), make_envelope(clock, queue="fresh", delay=5)])
    (counts,) = driver.counts()
    assert (counts.queue, counts.ready, counts.delayed, counts.reserved) == ("fresh", 1, 1, 0)
    clock.advance(10)  # due but not yet promoted: ready, as far as anyone can tell
    (counts,) = driver.counts()
    assert (counts.ready, counts.delayed) == (2, 0)


def test_an_undecodable_failed_job_retries_as_it_was(driver: RedisDriver, clock: FixedClock) -> None:
    inject_undecodable(driver, "default", b"\xffgarbage")
    (res,) = driver.reserve(["default"], 1)
    driver.fail(res, res.decode_error or "")
    assert driver.failed.retry("all") == 1
    (again,) = driver.reserve(["default"], 1)
    assert again.decode_error and again.body == b"\xffgarbage" and again.id == res.id and again.attempt == 1


def test_a_unique_lock_is_also_dropped_by_redis_in_real_time(driver: RedisDriver) -> None:
    assert driver.locks.acquire("job:x", "a", 0.05)
    assert not driver.locks.acquire("job:x", "b", 0.05)
    time.sleep(0.1)  # the FixedClock has not moved; the PX safety net has
    assert driver.locks.acquire("job:x", "b", 10)
    driver.locks.release("job:x", "a")
    assert not driver.locks.acquire("job:x", "c", 10)


# -- what Redis itself can lose ---------------------------------------------------------------


def test_check_eviction_policy_warns_unless_noeviction(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with own_redis(6391, tmp_path, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru") as server:
        driver = make_driver(server.url, "jb:", SYSTEM_CLOCK)
        with caplog.at_level(logging.WARNING, logger="jobbridge.drivers.redis"):
            driver.check()  # the start-up check the worker runs
        assert "allkeys-lru" in caplog.text and "noeviction" in caplog.text
        assert check_eviction_policy(driver.client) == "allkeys-lru"
        caplog.clear()
        driver.client.config_set("maxmemory-policy", "noeviction")
        with caplog.at_level(logging.WARNING, logger="jobbridge.drivers.redis"):
            assert check_eviction_policy(driver.client) == "noeviction"
        assert caplog.text == ""
        driver.close()


def test_a_redis_restart_is_ridden_out_and_loses_no_pushed_job(tmp_path: Path) -> None:
    options = ("--appendonly", "yes", "--appendfsync", "always")
    with own_redis(6392, tmp_path, *options) as server:
        clock = FixedClock()
        driver = make_driver(server.url, "jb:", clock, reconnect=True, reconnect_attempts=60,
                             reconnect_max_backoff_ms=200, connect_timeout_ms=500)
        envs = [make_envelope(clock) for _ in range(50)]
        driver.push(envs)
        first = driver.reserve(["default"], 10)
        driver.acknowledge(first)

        server.kill()  # kill -9, then back after half a second
        restarter = threading.Timer(0.5, server.start)
        restarter.start()
        rest = driver.reserve(["default"], 100)  # rides the outage on its retries
        restarter.join()
        driver.acknowledge(rest)
        assert {r.id for r in first + rest} == {e.id for e in envs}
        assert pending(driver, "default") == 0

        # a worker blocked in XREADGROUP when redis dies goes on consuming once it is back
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.extend(r.id for r in driver.reserve(["default"], 5, wait=4)))
        waiter.start()
        time.sleep(0.2)
        server.restart()
        late = make_envelope(clock)
        pusher = make_driver(server.url, "jb:", clock, reconnect=True)
        pusher.push([late])
        waiter.join(10)
        assert got == [late.id]
        pusher.close()
        driver.close()


# -- errors, settings, registry ---------------------------------------------------------------


def test_redis_errors_never_reach_the_caller(prefix: str, clock: FixedClock) -> None:
    dead = make_driver("redis://127.0.0.1:1/0", prefix, clock, connect_timeout_ms=200)
    with pytest.raises(DriverUnavailable) as caught:
        dead.push([make_envelope(clock)])
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
    with pytest.raises(DriverUnavailable):
        dead.reserve(["default"], 1)


def test_a_refused_command_is_a_driver_error(driver: RedisDriver, clock: FixedClock) -> None:
    driver.client.set(driver.keys.stream("default"), "not a stream")
    with pytest.raises(DriverError) as caught:
        driver.push([make_envelope(clock)])
    assert isinstance(caught.value.__cause__, redis.RedisError)
    assert not isinstance(caught.value, DriverUnavailable)


def test_settings_are_exactly_the_declared_keys() -> None:
    assert {
        "url", "prefix", "reservation", "connect_timeout_ms", "response_timeout_ms",
        "reconnect", "reconnect_attempts", "reconnect_max_backoff_ms",
    } == SETTINGS
    assert parse_settings({"url": "rediss://h:6380/2"}) == RedisSettings(url="rediss://h:6380/2")


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("connection", "url"),
        ("visibility_timeout", "reservation"),
        ("retry_after", "reservation"),
        ("block_for", "--sleep"),
        ("max_connections", "response_timeout_ms and reconnect"),
        ("min_connections", "response_timeout_ms and reconnect"),
        ("pool_size", "response_timeout_ms and reconnect"),
    ],
)
def test_foreign_settings_are_refused_with_what_to_write_instead(key: str, instead: str) -> None:
    why, write_instead, _ = REFUSED[key]
    assert why and instead in write_instead
    with pytest.raises(RefusedSetting, match=key):
        parse_settings({"url": "redis://localhost/1", key: 1})


def test_bad_settings_fail_at_boot() -> None:
    with pytest.raises(ConfigurationError, match="url"):
        parse_settings({"url": "http://localhost"})
    with pytest.raises(ConfigurationError, match="queue_url"):
        parse_settings({"url": "redis://localhost", "queue_url": "x"})
    with pytest.raises(ConfigurationError, match="reservation"):
        parse_settings({"url": "redis://localhost", "reservation": 0})
    assert parse_settings({"url": "redis://localhost", "reconnect": "true"}).reconnect


def test_the_registry_opens_it_by_url_scheme(redis_url: str, prefix: str, clock: FixedClock) -> None:
    assert driver_for_url("rediss://example:6380/1") == "redis"
    module = load(driver_for_url(redis_url))
    driver = module.open({"driver": "redis", "url": redis_url, "prefix": prefix}, Resources(clock=clock))
    try:
        assert isinstance(driver, RedisDriver) and driver.clock is clock
        assert driver.capabilities.may_lose_an_accepted_job and driver.capabilities.blocking_reserve
        assert not driver.capabilities.transactional_push
        driver.migrate()
    finally:
        driver.close()


def test_describe_names_the_url_without_its_password(prefix: str, clock: FixedClock) -> None:
    driver = make_driver("redis://app:s3cret@cache.internal:6380/3", prefix, clock)
    text = driver.describe()
    assert "s3cret" not in text and "app:***@cache.internal:6380/3" in text and prefix in text
    driver.close()


# -- entries that are no job: each a stand-in to fail, never an exception (issue 9) ------------

SECRET = "hunter2-in-a-field"


def spoiled_body(clock: FixedClock, field: str, literal: bytes) -> bytes:
    """A good body with one field's value replaced by a literal (orjson writes neither NaN nor 70-bit ints)."""
    data = orjson.loads(make_envelope(clock).encode())
    data[field] = 1.5
    return orjson.dumps(data).replace(b'"%s":1.5' % field.encode(), b'"%s":%s' % (field.encode(), literal))


@pytest.mark.parametrize(
    ("fields", "reason", "named_by"),
    [
        ({"id": b"\xff\xfe" + SECRET.encode()}, "'id' field is not utf-8 text", "entry"),
        ({"id": ""}, "'id' field: expected", "entry"),
        ({"attempts": str(2**70)}, "'attempts' field: expected a count", "id"),
        ({"attempts": "-3"}, "'attempts' field: expected a count", "id"),
        ({"attempts": "1e3"}, "'attempts' field: expected a count", "id"),
        ({"attempts": "2147483647"}, "'attempts' field: expected a count", "id"),
        ({"id": None}, "no 'id' field", "entry"),
        ({"body": None}, "no 'body' field", "id"),
        ({"attempts": None}, "no 'attempts' field", "id"),
        ({"id": None, "body": None, "attempts": None, SECRET: SECRET}, "no 'id' or 'body' or 'attempts'", "entry"),
        ({SECRET: SECRET}, "1 field(s) this driver never writes", "id"),
        ({"id": SECRET}, "not the id in its body", "id"),
        ({"body": b"\xff{" + SECRET.encode()}, "not json", "id"),
    ],
)
def test_an_entry_that_is_no_job_is_failed_once_with_its_reason_beside_good_jobs(
    driver: RedisDriver, clock: FixedClock, fields: dict[str, object], reason: str, named_by: str,
) -> None:
    before, after = make_envelope(clock), make_envelope(clock)
    driver.push([before])
    entry_id = write_entry(driver, clock, "default", fields)
    driver.push([after])
    got = driver.reserve(["default"], 10)
    assert [r.id for r in got if r.decode_error is None] == [before.id, after.id]
    (bad,) = [r for r in got if r.decode_error is not None]
    assert reason in bad.decode_error.lower() and SECRET not in bad.decode_error  # type: ignore[union-attr]
    stored = driver.client.xrange(driver.keys.stream("default"), entry_id, entry_id)[0][1]
    expected_id = entry_id if named_by == "entry" else stored[b"id"].decode()
    assert bad.id == expected_id and bad.attempt == 1
    driver.fail(bad, bad.decode_error or "")
    driver.acknowledge([r for r in got if r is not bad])
    (failed,) = driver.failed.list(10)
    assert (failed.id, failed.error, failed.body) == (expected_id, bad.decode_error, stored.get(b"body", b""))
    assert driver.counts() == [] and lease_members(driver) == []


@pytest.mark.parametrize(
    ("field", "literal", "reason"),
    [
        ("attempts", b"%d" % 2**70, "attempts"),  # orjson could not write it back: it once crashed the worker
        ("attempts", b"-5", "attempts"),
        ("available_at", b'"NaN"', "available_at"),
        ("available_at", b"-1e18", "available_at"),
        ("unique_key", b'{"key":[1,2]}', "unique_key"),
    ],
)
def test_a_body_out_of_range_is_a_stand_in_too(
    driver: RedisDriver, clock: FixedClock, field: str, literal: bytes, reason: str,
) -> None:
    body = spoiled_body(clock, field, literal)
    write_entry(driver, clock, "default", {"body": body})
    (res,) = driver.reserve(["default"], 1)
    assert res.decode_error and reason in res.decode_error
    driver.fail(res, res.decode_error)
    (failed,) = driver.failed.list(1)
    assert failed.body == body, "the failed store keeps the body exactly as stored, never re-encoded"


def test_a_bad_entry_read_by_a_blocking_reserve_is_a_stand_in(driver: RedisDriver, clock: FixedClock) -> None:
    driver.reserve(["default"], 1)  # the group exists, so the blocking read sees what comes next
    write_entry(driver, clock, "default", {"id": b"\xff", "attempts": "x"})
    (res,) = driver._block(["default"], 5, 1.0)
    assert res.decode_error and "utf-8" in res.decode_error.lower() and res.attempt == 1
    assert driver.extend([res], 60), "its lease was recorded like any other"


def test_release_and_reclaim_put_a_bad_entry_back_as_it_was(driver: RedisDriver, clock: FixedClock) -> None:
    """Only a count is counted on: the fields that made it a stand-in come back for the next reserve to name."""
    write_entry(driver, clock, "default", {"attempts": "seven", "colour": SECRET})
    (res,) = driver.reserve(["default"], 1)
    driver.release(res, 30)  # not into the delayed set, whose members hold only the three fields
    (res,) = driver.reserve(["default"], 1)
    assert res.decode_error and "never writes" in res.decode_error
    clock.advance(61)
    assert driver.reclaim_expired() == 1
    (res,) = driver.reserve(["default"], 1)
    (entry,) = driver.client.xrange(driver.keys.stream("default"))
    assert entry[1][b"attempts"] == b"seven" and entry[1][b"colour"] == SECRET.encode()
    write_entry(driver, clock, "other", {"colour": "red"})  # a count beside a foreign field still counts
    (other,) = driver.reserve(["other"], 1)
    clock.advance(61)
    driver.reclaim_expired()
    (again,) = driver.reserve(["other"], 1)
    assert again.attempt == other.attempt + 1 == 2 and again.decode_error == other.decode_error


def test_a_delayed_member_it_never_wrote_is_promoted_to_be_failed(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    driver.client.zadd(driver.keys.delayed("default"), {b"\xffgarbage": 0, b"99999999999:3:abc{}": 0})
    got = driver.reserve(["default"], 10)
    assert len(got) == 3 and sum(r.decode_error is None for r in got) == 1
    reasons = sorted(r.decode_error or "" for r in got if r.decode_error)
    assert "'attempts' field" in reasons[0] and "'id' field" in reasons[1]
    for res in got:
        if res.decode_error:
            driver.fail(res, res.decode_error)
    assert driver.failed.count() == 2 and {f.body for f in driver.failed.list(2)} == {b"\xffgarbage", b"{}"}


def test_reclaim_puts_back_an_entry_of_thousands_of_fields(driver: RedisDriver, clock: FixedClock) -> None:
    write_entry(driver, clock, "default", {f"f{i}": "x" for i in range(5000)})
    (res,) = driver.reserve(["default"], 1)
    assert res.decode_error and "5000 field(s)" in res.decode_error
    clock.advance(61)
    assert driver.reclaim_expired() == 1  # more fields than Lua's unpack() takes: cut to what names it
    (again,) = driver.reserve(["default"], 1)
    assert again.id == res.id and again.attempt == 2 and "never writes" in (again.decode_error or "")


def test_a_blocking_read_leaves_such_an_entry_for_the_sweep(
    open_driver: Callable[..., RedisDriver], clock: FixedClock
) -> None:
    driver = open_driver(clock, reservation=0.2)
    driver.reserve(["high", "low"], 1)  # the groups exist, so the blocking read sees what comes next
    driver.push([make_envelope(clock, queue="high")])
    write_entry(driver, clock, "low", {f"f{i}": "x" for i in range(5000)})
    (res,) = driver._block(["high", "low"], 1, 1.0)  # the surplus cannot be handed back whole
    driver.acknowledge([res])
    time.sleep(0.3)
    assert driver.reclaim_expired() == 1
    (bad,) = driver.reserve(["low"], 1)
    assert bad.attempt == 2 and "never writes" in (bad.decode_error or "")


def test_reclaim_drops_lease_members_it_never_wrote(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    (res,) = driver.reserve(["default"], 1)
    driver.client.zadd(driver.keys.leases, {b"no-space": 0, b"\xff\xfe default": 0, b"abc default": 0,
                                            b"1-1 nowhere": 0})
    clock.advance(61)
    assert driver.reclaim_expired() == 2  # the real lapsed lease, and the member naming a gone entry
    assert lease_members(driver) == []
    (again,) = driver.reserve(["default"], 1)
    assert again.id == res.id and again.attempt == 2


def test_counts_and_reclaim_pass_over_names_they_did_not_write(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    driver.client.sadd(driver.keys.queues, b"\xff\xfe", "not-a-stream")
    driver.client.set(driver.keys.stream("not-a-stream"), "a string")
    assert [c.queue for c in driver.counts()] == ["default"]
    assert driver.reclaim_expired() == 0


def test_the_failed_store_reads_hashes_it_did_not_write(driver: RedisDriver) -> None:
    driver.client.zadd(driver.keys.failed, {"partial": 2, b"\xff\xfe": 1})
    driver.client.hset(driver.keys.failed_job("partial"), mapping={"name": b"\xffname", "attempts": "many"})
    driver.client.hset(driver.keys.failed_job("").encode() + b"\xff\xfe", mapping={"queue": b"\xff"})
    driver.client.zadd(driver.keys.failed, {"queue-not-text": 0})
    driver.client.hset(driver.keys.failed_job("queue-not-text"), mapping={"queue": b"\xff", "body": b"{}"})
    (partial, foreign, _) = driver.failed.list(10)
    assert (partial.id, partial.name, partial.attempts, partial.body) == ("partial", "\ufffdname", 0, b"")
    assert foreign.queue == "\ufffd"
    assert driver.failed.retry("all") == 0  # none names a queue to go back to
    with pytest.raises(NoFailedJob):
        driver.failed.retry("partial")
    assert driver.failed.flush() == 3 and driver.failed.count() == 0
    assert driver.client.exists(driver.keys.failed_job("").encode() + b"\xff\xfe") == 0


def test_fail_stores_an_error_no_utf8_encoder_takes(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    (res,) = driver.reserve(["default"], 1)
    driver.fail(res, "boom \udc80")
    (failed,) = driver.failed.list(1)
    assert failed.error == "boom \\udc80"


# -- what push refuses: StoreRefused, a DriverError no retry can help ----------------------------


def test_push_refuses_a_job_over_the_size_limit_and_stores_none_of_its_batch(
    driver: RedisDriver, clock: FixedClock
) -> None:
    assert driver.capabilities.max_message_bytes == MAX_MESSAGE_BYTES == 8 * 1024 * 1024
    small = make_envelope(clock)
    big = make_envelope(clock, payload={"blob": "x" * MAX_MESSAGE_BYTES})
    with pytest.raises(StoreRefused, match="at most 8388608") as caught:
        driver.push([small, big])
    assert not isinstance(caught.value, DriverUnavailable) and "xxxx" not in str(caught.value)
    assert pending(driver, "default") == 0
    fits = make_envelope(clock, payload={"blob": "x" * (MAX_MESSAGE_BYTES - 1000)})
    driver.push([fits])
    (res,) = driver.reserve(["default"], 1)
    assert res.id == fits.id and res.decode_error is None


def test_push_refuses_what_cannot_be_sent_to_redis(driver: RedisDriver, clock: FixedClock) -> None:
    with pytest.raises(StoreRefused, match="cannot be stored as JSON"):
        driver.push([make_envelope(clock, payload={"n": 2**70})])
    with pytest.raises(StoreRefused, match="not UTF-8"):
        driver.locks.acquire("bad\udc80key", "owner", 10)
    with pytest.raises(DriverError, match="transaction"):
        driver.push([make_envelope(clock)], transaction=object())
    with pytest.raises(StoreRefused, match="ttl"):
        driver.locks.acquire("key", "owner", float("inf"))
    assert driver.counts() == []


def test_a_release_delay_redis_cannot_score_is_held_to_range(driver: RedisDriver, clock: FixedClock) -> None:
    driver.push([make_envelope(clock)])
    (res,) = driver.reserve(["default"], 1)
    driver.release(res, float("nan"))  # at once
    (res,) = driver.reserve(["default"], 1)
    driver.release(res, float("inf"))  # a year, the longest a release waits
    ((_, due),) = driver.client.zrange(driver.keys.delayed("default"), 0, -1, withscores=True)
    assert due == clock.now() + 365 * 86400


def test_a_push_is_cut_into_calls_by_count_and_by_bytes(clock: FixedClock) -> None:
    pairs = [(make_envelope(clock), b"x" * size) for size in (40, 40, 40, 10, 200, 1)]
    sizes = [[len(body) for _, body in chunk] for chunk in chunks(pairs, count=3, size=100)]
    assert sizes == [[40, 40], [40, 10], [200], [1]]
    assert [len(c) for c in chunks(pairs, count=2, size=10_000)] == [2, 2, 2]


# -- leases judged by Redis's clock (issue 9) --------------------------------------------------


def redis_time(driver: RedisDriver) -> float:
    seconds, micros = driver.client.time()
    return seconds + micros / 1e6


def test_a_driver_on_the_system_clock_reads_time_off_redis(open_driver: Callable[..., RedisDriver]) -> None:
    driver = open_driver(SYSTEM_CLOCK)
    assert isinstance(driver.clock, StoreClock)
    assert abs(driver.clock.now() - redis_time(driver)) < 0.5


def test_a_host_an_hour_ahead_agrees_with_redis_on_leases_and_delays(
    open_driver: Callable[..., RedisDriver],
) -> None:
    """The host's wall clock moves neither a lease nor a delay: only Redis's clock does."""
    driver = open_driver(SYSTEM_CLOCK)
    driver.clock = StoreClock(driver._server_time, wall=lambda: time.time() + 3600)
    ahead = FixedClock(time.time() + 3600)  # what a dispatcher on that host stamps its envelopes with
    ready, later = make_envelope(ahead), make_envelope(ahead, delay=30)
    driver.push([ready, later])
    (res,) = driver.reserve(["default"], 5)
    assert res.id == ready.id, "a job due now on the host's clock is due now on Redis's"
    now = redis_time(driver)
    assert abs(res.lease_until - (now + driver.reservation)) < 1
    ((_, due),) = driver.client.zrange(driver.keys.delayed("default"), 0, -1, withscores=True)
    assert abs(due - (now + 30)) < 1, "a 30 s delay is 30 s of Redis's clock"
    ((_, deadline),) = lease_members(driver)
    assert abs(deadline - (now + driver.reservation)) < 1
    assert driver.reclaim_expired() == 0, "the host's hour ahead lapses no lease"
    driver.acknowledge([res])
