"""The kafka driver: the contract against Tansu with a real lock store, then what only Kafka can get wrong.

Tansu (a Kafka-compatible broker) is started by `ensure_kafka`; the lock store
is Redis (a fresh prefix per test) or SQLite (a file per test). Group joins on
Tansu wait about half the session timeout, so every consumer here runs with
``session.timeout.ms=2000``; each test gets fresh topics (a prefix of its own).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from jobbridge import Backoff, JobBridge, JobContext, job
from jobbridge.clock import SYSTEM_CLOCK, Clock, StoreClock
from jobbridge.drivers import Resources, driver_for_url, load
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.kafka import REFUSED, SETTINGS, KafkaDriver, brokers_from_url, open, parse_settings
from jobbridge.drivers.kafka.client import Admin
from jobbridge.drivers.kafka.messages import decode
from jobbridge.drivers.kafka.redis_store import RedisLeaseStore
from jobbridge.drivers.kafka.sql_store import SqlLeaseStore
from jobbridge.drivers.kafka.store import Delayed, Held, LeaseStore, Reserved, Reserving, Spot
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.drivers.redis import RedisDriver
from jobbridge.drivers.redis.settings import parse_settings as redis_settings
from jobbridge.envelope import Envelope, new_id
from jobbridge.errors import (
    ConfigurationError,
    DriverError,
    DriverUnavailable,
    NoFailedJob,
    PayloadTooLarge,
    RefusedSetting,
    StoreRefused,
)
from jobbridge.settings import Settings
from jobbridge.store_reports import FailedJob
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract, FailedStoreContract, LockStoreContract, make_envelope, pending
from jobbridge.worker import Worker, WorkerOptions
from tests.drivers.database_servers import DIALECTS, fresh_database
from tests.services import ensure_kafka, ensure_redis, faketime_env

#: group joins on Tansu take about half of this; 2 s keeps them near the 1 s floor
FAST_GROUP = {"session.timeout.ms": 2000}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def brokers() -> str:
    return ensure_kafka()


@pytest.fixture(scope="module")
def redis_url() -> str:
    return ensure_redis()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def names() -> dict[str, str]:
    """A topic prefix and a group per test.

    On Tansu, joining a group that already exists costs as much as a new one (about a second),
    and a shared group would couple tests: a consumer killed in one lingers as a member until
    its session times out, and every join waits for it.
    """
    tag = uuid.uuid4().hex[:10]
    return {"topic_prefix": f"jbt{tag}.", "group": f"jbtest-{tag}"}


@pytest.fixture
def redis_lock_store(redis_url: str, clock: FixedClock) -> Iterator[RedisDriver]:
    prefix = f"jbkt:{uuid.uuid4().hex[:10]}:"
    lock = RedisDriver(redis_settings({"url": redis_url, "prefix": prefix}), clock=clock)
    yield lock
    keys = list(lock.client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        lock.client.delete(*keys)
    lock.close()


@pytest.fixture
def sqlite_lock_store(tmp_path: Path, clock: FixedClock) -> Iterator[DatabaseDriver]:
    lock = DatabaseDriver(f"sqlite:///{tmp_path / 'locks.sqlite3'}", clock=clock)
    lock.migrate()
    yield lock
    lock.close()


def make_driver(brokers: str, lock_store: object, clock: Clock, names: dict[str, str],
                config: dict[str, Any] | None = None, **settings: Any) -> KafkaDriver:
    options = {"brokers": brokers, "locks": "locks", "lease": DriverContract.RESERVATION, **names, **settings}
    extra = {"lock_store": lock_store, "kafka_consumer_config": FAST_GROUP, "kafka_config": config or {}}
    return open(options, Resources(clock=clock, extra=extra))


def produce_raw(driver: KafkaDriver, queue: str, body: bytes, key: str | None = None) -> None:
    """A message no jobbridge producer wrote, straight onto the queue's topic."""
    driver.admin.ensure([driver.topic(queue)])
    producer = Producer({"bootstrap.servers": ",".join(driver.settings.brokers)})
    producer.produce(driver.topic(queue), value=body, key=key)
    assert producer.flush(10) == 0


class TestKafkaContract(DriverContract, FailedStoreContract, LockStoreContract):
    """The shared contract, all three suites, on Tansu, with Redis as the lock store."""

    #: Kafka cannot delete a topic's waiting records and keep the reserved ones (KafkaDriver.purge)
    purge_refused = True

    @pytest.fixture
    def driver(self, brokers: str, redis_lock_store: RedisDriver, clock: FixedClock,
               names: dict[str, str]) -> Iterator[KafkaDriver]:
        driver = make_driver(brokers, redis_lock_store, clock, names)
        yield driver
        driver.close()

    def inject_undecodable(self, driver: KafkaDriver, queue: str, body: bytes) -> None:
        produce_raw(driver, queue, body)


# -- the lock store, on its own: both kinds, no Kafka ------------------------------------------


@pytest.fixture(params=["redis", *DIALECTS])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Iterator[LeaseStore]:
    """Each kind of lock store, with a scope of its own."""
    scope = f"g@{uuid.uuid4().hex[:8]}."
    if request.param in DIALECTS:
        with fresh_database(request.param, tmp_path) as url:
            database = DatabaseDriver(url, clock=clock)
            yield SqlLeaseStore.on(database, scope)
            database.close()
        return
    lock = RedisDriver(redis_settings({"url": ensure_redis(), "prefix": f"jbkt:{uuid.uuid4().hex[:10]}:"}),
                       clock=clock)
    yield RedisLeaseStore.on(lock, scope)
    keys = list(lock.client.scan_iter(match=f"{lock.settings.prefix}*", count=1000))
    if keys:
        lock.client.delete(*keys)
    lock.close()


def lease(spot: Spot, token: str = "", at: float = 100.0, queue: str = "q") -> Reserving:
    return Reserving(spot, queue, token or new_id(), at, new_id(), b"body:" + spot.key.encode())


class TestLeaseStore:
    """What the driver relies on the lock store for, on SQLite and on Redis."""

    def test_a_spot_is_reserved_once(self, store: LeaseStore) -> None:
        a, b = Spot("t", 0, 5), Spot("t", 1, 5)
        first = lease(a)
        assert store.reserve([first, lease(b)]) == [Reserved.WON, Reserved.WON]
        assert store.reserve([lease(a), lease(Spot("t", 0, 6))]) == [Reserved.HELD, Reserved.WON]
        assert store.acknowledge([Held(a, "not-the-token"), Held(a, first.token)]) == [False, True]
        assert store.reserve([lease(a)]) == [Reserved.SETTLED]
        assert store.states([a, b, Spot("t", 9, 9)]) == [Reserved.SETTLED, Reserved.HELD, None]
        assert store.reserved() == {"q": 2}

    def test_racing_reserves_have_one_winner_per_spot(self, store: LeaseStore) -> None:
        spots = [Spot("t", p, o) for p in range(3) for o in range(20)]
        wins: list[Spot] = []
        guard = threading.Lock()

        def race() -> None:
            asks = [lease(s) for s in spots]
            won = [c.spot for c, r in zip(asks, store.reserve(asks), strict=True) if r is Reserved.WON]
            with guard:
                wins.extend(won)

        threads = [threading.Thread(target=race) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(wins, key=lambda s: s.key) == sorted(spots, key=lambda s: s.key)

    def test_park_settles_the_spot_and_keeps_the_job_delayed(self, store: LeaseStore) -> None:
        spot = Spot("t", 0, 0)
        park = Reserving(spot, "q", new_id(), 150.0, "job-1", b"later", park=True)
        assert store.reserve([park]) == [Reserved.WON]
        assert store.states([spot]) == [Reserved.SETTLED]
        assert store.take_due(149.0, 200.0, "p", 10) == []
        assert {q: (c.due, c.later) for q, c in store.delayed(149.0).items()} == {"q": (0, 1)}
        (row,) = store.take_due(150.0, 200.0, "p", 10)
        assert (row.id, row.queue, row.job_id, row.body) == (park.token, "q", "job-1", b"later")
        # taken rows wait out the promoter's fence before anyone else sees them
        assert store.take_due(199.0, 300.0, "other", 10) == []
        store.drop_delayed([row.id], "other")  # not the holder: stays
        assert [r.id for r in store.take_due(200.0, 300.0, "other", 10)] == [row.id]
        store.drop_delayed([row.id], "other")
        assert store.delayed(1000.0) == {}

    def test_extend_release_and_fail_need_the_token(self, store: LeaseStore) -> None:
        a, b, c = Spot("t", 0, 1), Spot("t", 0, 2), Spot("t", 0, 3)
        la, lb, lc = lease(a), lease(b), lease(c)
        store.reserve([la, lb, lc])
        assert store.extend([Held(a, la.token), Held(b, "x")], 500.0) == [True, False]
        row = Delayed(new_id(), "q", 120.0, "job-b", b"again")
        assert not store.release(Held(b, "x"), row)
        assert store.release(Held(b, lb.token), row)
        failure = FailedJob("job-c", "q", "n", 2, "boom", 110.0, b"dead")
        assert not store.fail(Held(c, "x"), failure)
        assert store.fail(Held(c, lc.token), failure)
        assert store.list_failed(5) == [failure] and store.count_failed() == 1
        assert store.reserved() == {"q": 1}
        assert store.records_from("t", {0: 2}) == 2 and store.records_from("t", {0: 0}) == 3
        # a's deadline moved to 500: it lapses then, and one reclaim wins it
        assert store.reclaim(499.0, 10) == []
        results: list[list[Spot]] = []
        threads = [threading.Thread(target=lambda: results.append(store.reclaim(500.0, 10))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(len(r) for r in results) == [0, 0, 1] and [a] in results
        taken = store.take_due(500.0, 600.0, "p", 10)
        assert sorted(r.job_id for r in taken) == sorted([la.job_id, "job-b"])
        assert {r.job_id: r.body for r in taken}[la.job_id] == la.body
        assert store.reserved() == {}

    def test_forget_drops_settled_records_below_the_commit(self, store: LeaseStore) -> None:
        asks = [lease(Spot("t", 0, o)) for o in range(4)]
        store.reserve(asks)
        store.acknowledge([Held(c.spot, c.token) for c in asks[:1] + asks[2:3]])
        store.forget("t", 0, 3)
        assert store.states([c.spot for c in asks]) == [None, Reserved.HELD, None, Reserved.HELD]

    def test_a_delayed_row_moves_to_the_failed_store_only_for_its_promoter(self, store: LeaseStore) -> None:
        row = Delayed(new_id(), "q", 100.0, "job-big", b"big")
        store.add_delayed([row])
        (taken,) = store.take_due(100.0, 200.0, "p", 10)
        failure = FailedJob("job-big", "q", "n", 1, "too large", 150.0, b"big")
        assert not store.fail_delayed(taken.id, "someone-else", failure)
        assert store.fail_delayed(taken.id, "p", failure)
        assert store.list_failed(5) == [failure] and store.delayed(1000.0) == {}
        assert store.take_due(1000.0, 2000.0, "p", 10) == []  # gone from the delayed rows for good

    def test_the_store_clock_is_the_server_s(self, store: LeaseStore) -> None:
        read = store.server_clock()
        if isinstance(store, SqlLeaseStore) and store.engine.dialect.name == "sqlite":
            assert read is None  # a file on this host: this host's clock is every worker's
            return
        assert read is not None and abs(read() - time.time()) < 5  # the server runs on this machine

    def test_the_failed_store(self, store: LeaseStore) -> None:
        for i in range(3):
            spot = Spot("t", 0, i)
            ask = lease(spot)
            store.reserve([ask])
            store.fail(Held(spot, ask.token), FailedJob(f"job-{i}", "q", "n", 1, "e", 100.0 + i, b"b%d" % i))
        assert [f.id for f in store.list_failed(2)] == ["job-2", "job-1"]
        with pytest.raises(NoFailedJob, match="job-9"):
            store.retry_failed("job-9", 200.0, bytes.upper, new_id)
        assert store.retry_failed("job-0", 200.0, bytes.upper, new_id) == 1
        (row,) = store.take_due(200.0, 300.0, "p", 10)
        assert (row.job_id, row.queue, row.body) == ("job-0", "q", b"B0")
        assert store.retry_failed("all", 200.0, bytes.upper, new_id) == 2
        assert store.count_failed() == 0
        assert not store.fail(Held(Spot("x", 0, 0), "gone"), FailedJob("job-x", "q", "n", 1, "e", 1.0, b""))
        assert store.flush_failed() == 0
        ask = lease(Spot("t", 1, 0))
        store.reserve([ask])
        store.fail(Held(ask.spot, ask.token), FailedJob("job-y", "q", "n", 1, "e", 1.0, b""))
        assert store.flush_failed() == 1 and store.list_failed(5) == []


# -- settings, opening, capabilities ------------------------------------------------------------


def test_the_module_follows_the_driver_convention() -> None:
    assert driver_for_url("kafka://a:9092,b:9092") == "kafka"
    module = load("kafka")
    assert module.SETTINGS == SETTINGS == {"brokers", "group", "topic_prefix", "lease", "locks", "connect_timeout",
                                           "request_timeout"}
    assert not set(REFUSED) & SETTINGS
    assert brokers_from_url("kafka://a:9092,b:9093/") == ("a:9092", "b:9093")


def test_settings_are_checked_and_refused_by_name() -> None:
    parsed = parse_settings({"brokers": "kafka://a:1,b:2", "locks": "cache", "reservation": 30.0})
    assert (parsed.brokers, parsed.lease, parsed.group, parsed.topic_prefix) == (("a:1", "b:2"), 30.0,
                                                                                  "jobbridge", "jobbridge.")
    with pytest.raises(RefusedSetting, match=r"'bootstrap_servers'.*brokers"):
        parse_settings({"brokers": ["a:1"], "locks": "x", "bootstrap_servers": "a:1"})
    with pytest.raises(RefusedSetting, match=r"'enable_auto_commit'.*never skips"):
        parse_settings({"brokers": ["a:1"], "locks": "x", "enable_auto_commit": True})
    with pytest.raises(ConfigurationError, match="unknown setting 'partitions'"):
        parse_settings({"brokers": ["a:1"], "locks": "x", "partitions": 3})
    with pytest.raises(ConfigurationError, match="topic_prefix 'a b'"):
        parse_settings({"brokers": ["a:1"], "locks": "x", "topic_prefix": "a b"})
    with pytest.raises(ConfigurationError, match="no brokers"):
        parse_settings({"brokers": " , ", "locks": "x"})


def test_open_without_a_lock_store_is_a_boot_failure_naming_it(clock: FixedClock) -> None:
    with pytest.raises(ConfigurationError, match="needs locks = "):
        open({"brokers": ["127.0.0.1:9092"]}, Resources(clock=clock))
    with pytest.raises(ConfigurationError, match=r"locks = 'cache'.*resources.extra\['lock_store'\]"):
        open({"brokers": ["127.0.0.1:9092"], "locks": "cache"}, Resources(clock=clock))
    with pytest.raises(ConfigurationError, match="is a MemoryDriver; it must be a database or redis driver"):
        open({"brokers": ["127.0.0.1:9092"], "locks": "cache"},
             Resources(clock=clock, extra={"lock_store": MemoryDriver(clock=clock)}))


def test_capabilities_follow_the_lock_store(redis_lock_store: RedisDriver, sqlite_lock_store: DatabaseDriver,
                                            clock: FixedClock, names: dict[str, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    on_redis = make_driver("127.0.0.1:9092", redis_lock_store, clock, names)
    on_sqlite = make_driver("127.0.0.1:9092", sqlite_lock_store, clock, names)
    # delayed and failed jobs live in the lock store: Redis may lose them, a database does not
    assert on_redis.capabilities.may_lose_an_accepted_job
    assert not on_sqlite.capabilities.may_lose_an_accepted_job
    assert on_sqlite.locks.shared and on_sqlite.capabilities.delayed_push
    assert "leases in sqlite at" in on_sqlite.describe()
    # the start-up check is the lock store driver's own: Redis's eviction policy, a database's packet size
    checked: list[str] = []
    monkeypatch.setattr(redis_lock_store, "check", lambda: checked.append("redis"))
    monkeypatch.setattr(sqlite_lock_store, "check", lambda: checked.append("sqlite"))
    on_redis.check()
    on_sqlite.check()
    assert checked == ["redis", "sqlite"]
    # unique locks are the kafka connection's own, apart from the lock store connection's locks
    assert on_sqlite.locks.acquire("job:7", "a", 60)
    assert sqlite_lock_store.locks.acquire("job:7", "b", 60)
    assert not on_sqlite.locks.acquire("job:7", "c", 60)
    on_redis.close()
    on_sqlite.close()


def test_a_queue_kafka_cannot_name_fails_the_push(redis_lock_store: RedisDriver, clock: FixedClock,
                                                  names: dict[str, str]) -> None:
    driver = make_driver("127.0.0.1:9092", redis_lock_store, clock, names)
    with pytest.raises(ConfigurationError, match="queue 'mail box' cannot be a Kafka topic"):
        driver.push([make_envelope(clock, queue="mail box", delay=60)])
    assert driver.store.delayed(clock.now() + 100) == {}  # nothing was stored
    driver.close()


def test_unreachable_brokers_are_driver_unavailable(redis_lock_store: RedisDriver, clock: FixedClock,
                                                    names: dict[str, str]) -> None:
    driver = make_driver("127.0.0.1:1", redis_lock_store, clock, names, request_timeout=1)  # the wait's bound
    with pytest.raises(DriverUnavailable, match=r"kafka failed to create topics.*request_timeout 1 s") as caught:
        driver.push([make_envelope(clock)])
    assert type(caught.value.__cause__).__name__ == "KafkaException"
    driver.close()


# -- end to end on a database lock store ----------------------------------------------------------


def test_the_life_of_jobs_on_a_sqlite_lock_store(brokers: str, sqlite_lock_store: DatabaseDriver,
                                                 clock: FixedClock, names: dict[str, str]) -> None:
    driver = make_driver(brokers, sqlite_lock_store, clock, names)
    envs = [make_envelope(clock, payload={"n": i}) for i in range(4)] + [make_envelope(clock, delay=30)]
    driver.push(envs)
    got = {r.id: r for r in driver.reserve(["default"], 10)}
    assert set(got) == {e.id for e in envs[:4]}
    ack, again, dead, lost = (got[e.id] for e in envs[:4])
    driver.acknowledge([ack])
    driver.release(again, 5)
    driver.fail(dead, "boom")
    counts = {c.queue: c for c in driver.counts()}["default"]
    assert (counts.ready, counts.delayed, counts.reserved) == (0, 2, 1)
    clock.advance(DriverContract.RESERVATION + 1)
    assert driver.reclaim_expired() == 1
    assert driver.failed.retry(dead.id) == 1
    back = {r.id: r.attempt for r in driver.reserve(["default"], 10)}
    assert back == {again.id: 2, lost.id: 2, dead.id: 1, envs[4].id: 1}
    assert pending(driver, "default") == 4
    driver.close()


# -- offsets, restarts and kills --------------------------------------------------------------------


def committed(brokers: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def test_offsets_never_pass_an_unfinished_job_across_a_restart(
    brokers: str, redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    first = make_driver(brokers, redis_lock_store, clock, names)
    topic = first.topic("default")
    Admin({"bootstrap.servers": brokers}, partitions=1).ensure([topic])  # one partition: offsets in push order
    envs = [make_envelope(clock, payload={"n": i}) for i in range(6)]
    first.push(envs)
    got = first.reserve(["default"], 6)
    assert [r.id for r in got] == [e.id for e in envs]
    first.acknowledge([got[i] for i in (0, 1, 3, 5)])
    assert first.reserve(["default"], 6) == []  # the reserving thread commits
    assert committed(brokers, names["group"], topic, 1) == [2]
    first.close()  # leaves the group; jobs 2 and 4 stay leased to a worker that is gone
    assert committed(brokers, names["group"], topic, 1) == [2]

    second = make_driver(brokers, redis_lock_store, clock, names)
    assert second.reserve(["default"], 6) == []  # re-read from offset 2: 2 and 4 held, 3 and 5 done
    assert pending(second, "default") == 2
    clock.advance(DriverContract.RESERVATION + 1)
    assert second.reclaim_expired() == 2
    back = second.reserve(["default"], 6)
    assert sorted((r.id, r.attempt) for r in back) == sorted((envs[i].id, 2) for i in (2, 4))
    second.acknowledge(back)
    assert second.reserve(["default"], 6) == []
    assert committed(brokers, names["group"], topic, 1) == [8]  # six jobs and the two copies
    assert pending(second, "default") == 0
    second.close()


_HOLDER = textwrap.dedent("""
    import json, sys, time
    from jobbridge.drivers import Resources
    from jobbridge.drivers.kafka import open
    from jobbridge.drivers.redis import RedisDriver
    from jobbridge.drivers.redis.settings import parse_settings
    from jobbridge.testing.clock import FixedClock

    args = json.loads(sys.argv[1])
    clock = FixedClock(args["now"])
    lock = RedisDriver(parse_settings({"url": args["redis"], "prefix": args["prefix"]}), clock=clock)
    extra = {"lock_store": lock, "kafka_consumer_config": {"session.timeout.ms": 2000}}
    driver = open(args["settings"], Resources(clock=clock, extra=extra))
    got, deadline = [], time.monotonic() + 30
    while len(got) < args["take"] and time.monotonic() < deadline:
        got += driver.reserve(["default"], args["take"] - len(got), wait=0.5)
    print(json.dumps([r.id for r in got]), flush=True)
    time.sleep(600)
""")


def test_a_killed_consumers_jobs_come_back_and_nothing_is_lost(
    brokers: str, redis_lock_store: RedisDriver, redis_url: str, clock: FixedClock, names: dict[str, str]
) -> None:
    import json

    settings = {"brokers": brokers, "locks": "locks", "lease": DriverContract.RESERVATION, **names}
    driver = make_driver(brokers, redis_lock_store, clock, names)
    envs = [make_envelope(clock, payload={"n": i}) for i in range(10)]
    driver.push(envs)
    args = {"now": clock.now(), "redis": redis_url, "prefix": redis_lock_store.settings.prefix,
            "settings": settings, "take": 4}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, json.dumps(args)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout is not None
        held = json.loads(holder.stdout.readline())
        assert len(held) == 4
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)

    # the dead consumer's group membership times out; this one takes the partitions over
    first = driver.reserve(["default"], 10)
    assert {r.id for r in first} == {e.id for e in envs} - set(held)
    driver.acknowledge(first)
    assert driver.reserve(["default"], 10) == [] and pending(driver, "default") == 4
    clock.advance(DriverContract.RESERVATION + 1)
    assert driver.reclaim_expired() == 4
    back = driver.reserve(["default"], 10)
    assert sorted((r.id, r.attempt) for r in back) == sorted((job_id, 2) for job_id in held)
    driver.acknowledge(back)
    assert driver.reserve(["default"], 10) == []
    topic = driver.topic("default")
    partitions = driver.admin.topics()[topic]
    starts, unread = driver.meter.unread(topic, partitions)
    assert unread == 0, f"committed offsets {starts} stop short of the ends"
    assert pending(driver, "default") == 0
    driver.close()


def test_two_consumers_in_one_group_never_share_a_job(
    brokers: str, redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    a = make_driver(brokers, redis_lock_store, clock, names)
    b = make_driver(brokers, redis_lock_store, clock, names)
    envs = [make_envelope(clock, payload={"n": i}) for i in range(40)]
    a.push(envs)
    early = a.reserve(["default"], 10)  # a owns every partition now, and holds ten leases
    taken: dict[str, list[str]] = {"a": [r.id for r in early], "b": []}
    stop = threading.Event()

    def work(name: str, driver: KafkaDriver) -> None:
        while not stop.is_set():
            got = driver.reserve(["default"], 1 if name == "a" else 5, wait=0.2)
            taken[name].extend(r.id for r in got)
            driver.acknowledge(got)
            if name == "a":
                time.sleep(0.2)  # a slow worker: b joins the group and takes partitions over

    threads = [threading.Thread(target=work, args=pair) for pair in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(taken["a"]) + len(taken["b"]) < 40 and time.monotonic() < deadline:
        time.sleep(0.1)
    a.acknowledge(early)  # finished after the rebalance: b learns it from the lock store
    time.sleep(1.5)  # let both commit, and b look up what a held on its partitions
    stop.set()
    for t in threads:
        t.join(10)
    assert taken["b"], "the second consumer never got a partition"
    everything = taken["a"] + taken["b"]
    assert sorted(everything) == sorted(e.id for e in envs), "a job was lost or handed out twice"
    topic = a.topic("default")
    assert a.meter.unread(topic, a.admin.topics()[topic])[1] == 0
    a.close()
    b.close()


def test_full_partitions_pause_and_resume_without_skipping(
    monkeypatch: pytest.MonkeyPatch, brokers: str, redis_lock_store: RedisDriver, clock: FixedClock,
    names: dict[str, str]
) -> None:
    monkeypatch.setattr("jobbridge.drivers.kafka.reader.BUFFER_CAP", 8)
    driver = make_driver(brokers, redis_lock_store, clock, names)
    Admin({"bootstrap.servers": brokers}, partitions=1).ensure([driver.topic("default")])
    envs = [make_envelope(clock, payload={"n": i}) for i in range(600)]
    driver.push(envs)  # one batch: Tansu reports the partition's end as 1 however far it goes
    seen: list[str] = []
    while got := driver.reserve(["default"], 7):
        seen += [r.id for r in got]
        driver.acknowledge(got)
    assert sorted(seen) == sorted(e.id for e in envs)
    assert pending(driver, "default") == 0
    driver.close()


def test_a_blocking_reserve_wakes_on_a_push_from_another_process_s_driver(
    brokers: str, redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    worker = make_driver(brokers, redis_lock_store, clock, names)
    web = make_driver(brokers, redis_lock_store, clock, names)
    assert worker.reserve(["default"], 1) == []  # joined, caught up, idle
    env = make_envelope(clock)
    timer = threading.Timer(0.3, lambda: web.push([env]))
    started = time.monotonic()
    timer.start()
    got = worker.reserve(["default"], 1, wait=30)
    timer.join()
    assert [r.id for r in got] == [env.id]
    assert time.monotonic() - started < 20, "it woke on the push, not at the end of its 30 s wait"
    worker.close()
    web.close()


# -- a real worker over Kafka -------------------------------------------------------------------

RAN: list[tuple[int, int]] = []


@job("kafka-test.record", tries=2, backoff=Backoff.fixed(0))
@dataclasses.dataclass
class Record:
    """n=1 fails its first attempt; n=2 fails every attempt; the rest succeed."""

    n: int

    def handle(self, ctx: JobContext) -> None:
        RAN.append((self.n, ctx.attempt))
        if self.n == 2 or (self.n == 1 and ctx.attempt == 1):
            raise RuntimeError(f"job {self.n} fails attempt {ctx.attempt}")


def test_a_worker_runs_retries_and_fails_jobs_over_kafka(brokers: str, redis_url: str,
                                                         names: dict[str, str]) -> None:
    RAN.clear()
    prefix = f"jbkt:{uuid.uuid4().hex[:10]}:"
    settings = Settings.from_mapping({"connections": {
        "default": "events",
        "events": {"driver": "kafka", "brokers": brokers, "locks": "locks", **names},
        "locks": {"driver": "redis", "url": redis_url, "prefix": prefix},
    }})
    lock = RedisDriver(redis_settings(settings.connection("locks").options), clock=SYSTEM_CLOCK)
    kafka = open(settings.connection("events").options,
                 Resources(clock=SYSTEM_CLOCK, extra={"lock_store": lock, "kafka_consumer_config": FAST_GROUP}))
    bridge = JobBridge(settings, drivers={"events": kafka, "locks": lock}, jobs=[Record])
    try:
        bridge.dispatch_many([Record(n=i) for i in range(6)])
        worker = Worker(bridge, WorkerOptions(concurrency=3, sleep=0.05, stop_when_empty=True))
        stats = worker.run()
        assert sorted(RAN) == sorted([(i, 1) for i in range(6)] + [(1, 2), (2, 2)])
        assert (stats.succeeded, stats.released, stats.failed) == (5, 2, 1)
        (failed,) = kafka.failed.list(5)
        assert failed.name == "kafka-test.record" and "fails attempt 2" in failed.error
        assert pending(kafka, "default") == 0
    finally:
        keys = list(lock.client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            lock.client.delete(*keys)
        bridge.close()


# -- poison: messages that cannot become jobs, and jobs too large to produce -------------------------


def produce_with(driver: KafkaDriver, queue: str, records: list[tuple[bytes | None, bytes | None, Any]]) -> list[Spot]:
    """``(key, value, headers)`` records written by another producer; where each landed."""
    driver.admin.ensure([driver.topic(queue)])
    producer = Producer({"bootstrap.servers": ",".join(driver.settings.brokers)})
    spots: dict[int, Spot] = {}

    def landed(i: int) -> Any:
        return lambda _error, m: spots.__setitem__(i, Spot(m.topic(), m.partition(), m.offset()))

    for i, (key, value, headers) in enumerate(records):
        producer.produce(driver.topic(queue), value=value, key=key, headers=headers, on_delivery=landed(i))
    assert producer.flush(10) == 0
    return [spots[i] for i in range(len(records))]


def test_messages_that_cannot_become_jobs_are_handed_out_to_be_failed(
    brokers: str, clock: FixedClock, names: dict[str, str], tmp_path: Path
) -> None:
    """On PostgreSQL, the strictest lock store: its id columns hold 191 characters, its text no NUL."""
    good = make_envelope(clock)
    headed = make_envelope(clock)
    records: list[tuple[bytes | None, bytes | None, Any]] = [
        (good.id.encode(), good.encode(), None),
        # the driver reads no record header: malformed ones change nothing
        (None, headed.encode(), [("jb-attempts", b"\xff\xfe"), ("attempts", b"not a number"), ("empty", None)]),
        (b"\xff\xfe", b"\xff\xfe not UTF-8", None),
        (b"tombstone", None, None),
        (b"long-id", make_envelope(clock).replace(id="j" * 300).encode(), None),
        (b"nul-id", make_envelope(clock).replace(id="a\x00b").encode(), None),
        (b"long-name", make_envelope(clock).replace(name="n" * 300).encode(), None),
        (b"attempts", make_envelope(clock).replace(attempts=2**40).encode(), None),
        (b"x" * 300, b"[1, 2]", None),
    ]
    with fresh_database("postgresql", tmp_path) as url:
        lock = DatabaseDriver(url, clock=clock)
        driver = make_driver(brokers, lock, clock, names)
        try:
            spots = produce_with(driver, "default", records)
            got = {r.id: r for r in driver.reserve(["default"], 20)}
            # a key that is not a plain short id names nothing: the message's spot does, stably
            by_spot = str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafka:{spots[2].key}"))
            poison = {by_spot, "tombstone", "long-id", "nul-id", "long-name", "attempts",
                      str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafka:{spots[8].key}"))}
            assert set(got) == {good.id, headed.id} | poison
            assert got[good.id].decode_error is None and got[headed.id].decode_error is None
            assert got[headed.id].attempt == 1
            reasons = {job_id: got[job_id].decode_error or "" for job_id in poison}
            assert "not JSON" in reasons["tombstone"] and "id" in reasons["long-id"] and "id" in reasons["nul-id"]
            assert "name" in reasons["long-name"] and "attempts" in reasons["attempts"]
            for job_id in poison:
                driver.fail(got[job_id], reasons[job_id])
            driver.acknowledge([got[good.id], got[headed.id]])
            failed = {f.id: f for f in driver.failed.list(20)}
            assert set(failed) == poison and failed[by_spot].body == b"\xff\xfe not UTF-8"
            assert all(failed[job_id].error == reasons[job_id] for job_id in poison)
            assert driver.reserve(["default"], 20) == [] and pending(driver, "default") == 0
        finally:
            driver.close()
            lock.close()


def test_a_decoder_that_raises_names_the_problem_and_never_the_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(body: object, attempts: int | None = None) -> Envelope:
        raise RuntimeError("a bug, quoting the body: secret")

    monkeypatch.setattr(Envelope, "decode", broken)
    assert decode(b"{}") == (None, "stored message could not be read (RuntimeError)")


def test_a_push_larger_than_the_producer_takes_is_refused_before_anything_is_stored(
    redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    assert make_driver("127.0.0.1:1", redis_lock_store, clock, names).capabilities.max_message_bytes == 999_900
    driver = make_driver("127.0.0.1:1", redis_lock_store, clock, names, config={"message.max.bytes": 2000})
    assert driver.max_message_bytes == driver.capabilities.max_message_bytes == 1900
    small = make_envelope(clock, delay=60)
    big = make_envelope(clock, payload={"text": "x" * 2000}, delay=60)
    with pytest.raises(PayloadTooLarge, match=rf"job {big.id} .* at most 1900 .*message.max.bytes") as caught:
        driver.push([small, big])
    assert "x" * 20 not in str(caught.value)  # the error names sizes, never the payload
    assert driver.store.delayed(clock.now() + 100) == {}  # not even the small one was stored
    # a due job is refused before any broker is asked (these brokers do not exist)
    with pytest.raises(PayloadTooLarge):
        driver.push([make_envelope(clock, payload={"text": "x" * 2000})])
    driver.close()


def test_a_client_option_kafka_refuses_is_a_driver_error(redis_lock_store: RedisDriver, clock: FixedClock,
                                                          names: dict[str, str]) -> None:
    driver = make_driver("127.0.0.1:1", redis_lock_store, clock, names, config={"message.max.bytes": "lots"})
    with pytest.raises(DriverError, match=r"message\.max\.bytes") as caught:
        driver.push([make_envelope(clock)])
    assert type(caught.value.__cause__).__name__ == "KafkaException"
    driver.close()


def test_a_delayed_job_too_large_to_produce_goes_to_the_failed_store(
    brokers: str, redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    """A body larger than this producer takes (it came from another producer) must not block promotion."""
    driver = make_driver(brokers, redis_lock_store, clock, names, config={"message.max.bytes": 4000})
    small, big = make_envelope(clock), make_envelope(clock, payload={"text": "x" * 5000})
    driver.store.add_delayed([Delayed(new_id(), "default", clock.now(), e.id, e.encode()) for e in (big, small)])
    (res,) = driver.reserve(["default"], 5)
    assert res.id == small.id
    (failed,) = driver.failed.list()
    assert (failed.id, failed.name, failed.body) == (big.id, big.name, big.encode())
    assert "more than the 3900 this connection produces" in failed.error
    driver.acknowledge([res])
    assert pending(driver, "default") == 0
    driver.close()


def test_a_delayed_job_the_broker_refuses_is_failed_and_the_others_are_produced_once(
    monkeypatch: pytest.MonkeyPatch, redis_lock_store: RedisDriver, clock: FixedClock, names: dict[str, str]
) -> None:
    """A topic whose max.message.bytes is below the producer's: the broker refuses at delivery."""
    driver = make_driver("127.0.0.1:1", redis_lock_store, clock, names)
    produced: list[str] = []

    def produce(messages: list[tuple[str, str, bytes]]) -> None:
        if any(len(body) > 3000 for _, _, body in messages):
            raise StoreRefused("kafka failed to deliver a job: Broker: Message size too large")
        produced.extend(key for _, key, _ in messages)

    monkeypatch.setattr(driver, "_produce", produce)
    envs = [make_envelope(clock), make_envelope(clock, payload={"text": "x" * 5000}), make_envelope(clock)]
    driver.store.add_delayed([Delayed(new_id(), "default", clock.now(), e.id, e.encode()) for e in envs])
    driver.reclaim_expired()  # promotes what is due
    assert sorted(produced) == sorted([envs[0].id, envs[2].id])
    (failed,) = driver.failed.list()
    assert failed.id == envs[1].id and "Message size too large" in failed.error
    clock.advance(120)  # past the promoter's fence: nothing was left behind to be produced again
    driver.reclaim_expired()
    assert sorted(produced) == sorted([envs[0].id, envs[2].id])
    driver.close()


def test_leases_are_judged_by_the_lock_store_s_clock(
    redis_lock_store: RedisDriver, sqlite_lock_store: DatabaseDriver, names: dict[str, str]
) -> None:
    on_redis = make_driver("127.0.0.1:1", redis_lock_store, SYSTEM_CLOCK, names)
    assert isinstance(on_redis.clock, StoreClock) and abs(on_redis.clock.now() - time.time()) < 5
    # SQLite is a file on this host: every worker using it shares this host's clock
    assert make_driver("127.0.0.1:1", sqlite_lock_store, SYSTEM_CLOCK, names).clock is SYSTEM_CLOCK
    fixed = FixedClock()
    assert make_driver("127.0.0.1:1", redis_lock_store, fixed, names).clock is fixed  # tests keep theirs


_RECLAIMER = textwrap.dedent("""
    import json, sys, time
    from jobbridge.drivers import Resources
    from jobbridge.drivers.database import DatabaseDriver
    from jobbridge.drivers.kafka import open
    from jobbridge.drivers.redis import RedisDriver
    from jobbridge.drivers.redis.settings import parse_settings

    args = json.loads(sys.argv[1])
    if args["url"].startswith("redis"):
        lock = RedisDriver(parse_settings({"url": args["url"], "prefix": args["prefix"]}))
    else:
        lock = DatabaseDriver(args["url"])
    driver = open(args["settings"], Resources(extra={"lock_store": lock}))
    # what reclaim_expired asks the lock store, by the driver's clock (and nothing of Kafka)
    lapsed = driver.store.reclaim(driver.clock.now(), 100)
    print(json.dumps({"ahead": time.time() - args["now"], "reclaimed": len(lapsed)}), flush=True)
""")


@pytest.mark.parametrize("kind", ["redis", "postgresql"])
def test_a_worker_whose_clock_is_two_minutes_ahead_sees_no_lease_lapse_early(
    kind: str, brokers: str, redis_url: str, names: dict[str, str], tmp_path: Path
) -> None:
    import json

    with fresh_database("postgresql", tmp_path) as pg_url:
        url = redis_url if kind == "redis" else pg_url
        prefix = f"jbkt:{uuid.uuid4().hex[:10]}:"
        lock: RedisDriver | DatabaseDriver = (RedisDriver(redis_settings({"url": url, "prefix": prefix}))
                                              if kind == "redis" else DatabaseDriver(url))
        settings = {"brokers": brokers, "locks": "locks", "lease": 30.0, **names}
        driver = open(settings, Resources(extra={"lock_store": lock, "kafka_consumer_config": FAST_GROUP}))
        try:
            driver.push([make_envelope(FixedClock(time.time())) for _ in range(3)])
            held = driver.reserve(["default"], 3)
            assert len(held) == 3
            args = {"url": url, "prefix": prefix, "settings": settings, "now": time.time()}
            done = subprocess.run([sys.executable, "-c", _RECLAIMER, json.dumps(args)], cwd=ROOT, text=True,
                                  capture_output=True, timeout=60,
                                  env={**os.environ, "PYTHONPATH": str(ROOT), **faketime_env(120)})
            assert done.returncode == 0, done.stderr[-3000:]
            seen = json.loads(done.stdout)
            assert seen["ahead"] > 100, "the reclaimer did not run with its clock ahead"
            # by its own clock every lease lapsed 90 s ago; by the store's none has
            assert seen["reclaimed"] == 0
            assert len(driver.extend(held, 30)) == 3
            driver.acknowledge(held)
            assert pending(driver, "default") == 0
        finally:
            driver.close()
            lock.close()
