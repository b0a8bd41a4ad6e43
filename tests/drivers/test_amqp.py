"""The amqp driver: the contract against the real RabbitMQ with a real shared store, then what only AMQP
can get wrong.

The shared node (127.0.0.1:5672) gets a vhost for this module (`fresh_vhost`),
and each test a queue prefix of its own. The contract runs on a `FixedClock`
with ``delay_scale = 0``: delays come back from the broker at once and wait in
the driver until the clock reaches them, so no test sleeps out a delay.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import amqp
import pytest

from jobbridge.clock import Clock
from jobbridge.drivers import Resources, driver_for_url, load, schema_of
from jobbridge.drivers.amqp import REFUSED, SETTINGS, AmqpDriver, open, parse_settings
from jobbridge.drivers.amqp.topology import BITS, Topology
from jobbridge.drivers.base import JobChecking, JobLimits
from jobbridge.drivers.database import DatabaseDriver
from jobbridge.drivers.redis import RedisDriver
from jobbridge.drivers.redis.settings import parse_settings as redis_settings
from jobbridge.errors import ConfigurationError, DriverUnavailable, PayloadTooLarge, RefusedSetting
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract, FailedStoreContract, LockStoreContract, make_envelope, pending
from tests.drivers.amqp_servers import fresh_vhost, url_for
from tests.services import ensure_redis


@pytest.fixture(scope="module")
def vhost() -> Iterator[str | None]:
    with fresh_vhost() as name:
        yield name


@pytest.fixture(scope="module")
def amqp_url(vhost: str | None) -> str:
    return url_for(vhost)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def prefix() -> str:
    return f"jbt{uuid.uuid4().hex[:8]}."


@pytest.fixture
def redis_store(clock: FixedClock) -> Iterator[RedisDriver]:
    key = f"jbat:{uuid.uuid4().hex[:10]}:"
    store = RedisDriver(redis_settings({"url": ensure_redis(), "prefix": key}), clock=clock)
    yield store
    keys = list(store.client.scan_iter(match=f"{key}*", count=1000))
    if keys:
        store.client.delete(*keys)
    store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, clock: FixedClock) -> Iterator[DatabaseDriver]:
    store = DatabaseDriver(f"sqlite:///{tmp_path / 'shared.sqlite3'}", clock=clock)
    store.migrate()
    yield store
    store.close()


def make_driver(url: str, store: object, clock: Clock, prefix: str, **settings: Any) -> AmqpDriver:
    options = {"url": url, "locks": "shared", "prefix": prefix, "reservation": DriverContract.RESERVATION,
               "delay_scale": 0.0, **settings}
    return open(options, Resources(clock=clock, extra={"lock_store": store}))


def delete_queues(driver: AmqpDriver) -> None:
    """What a test declared, gone (on the module's vhost this is tidiness; on / it is the clean-up)."""
    def work(ch: amqp.Channel) -> None:
        for queue in driver.declarations.queues:
            ch.queue_delete(driver.topology.queue(queue))
        for name in driver.declarations.parked:
            ch.queue_delete(name)
        for queue in driver.declarations.staged:
            for k in range(BITS):
                ch.queue_delete(driver.topology.stage(queue, k))
    try:
        driver.publisher.link.call("delete test queues", work)
    finally:
        driver.close()


def publish_raw(driver: AmqpDriver, queue: str, body: bytes, **properties: Any) -> None:
    """A message no jobbridge producer wrote, straight onto the queue."""
    def work(ch: amqp.Channel) -> None:
        driver.declarations.queue(ch, queue)
        ch.basic_publish(amqp.Message(body, delivery_mode=2, **properties), exchange="",
                         routing_key=driver.topology.queue(queue))
    driver.consumers.link.call("publish a raw message", work)


class TestAmqpContract(DriverContract, FailedStoreContract, LockStoreContract):
    """The shared contract, all three suites, on RabbitMQ (quorum queues), with Redis as the shared store."""

    @pytest.fixture
    def driver(self, amqp_url: str, redis_store: RedisDriver, clock: FixedClock, prefix: str
               ) -> Iterator[AmqpDriver]:
        driver = make_driver(amqp_url, redis_store, clock, prefix)
        yield driver
        delete_queues(driver)

    def inject_undecodable(self, driver: AmqpDriver, queue: str, body: bytes) -> None:
        publish_raw(driver, queue, body)


class TestAmqpContractClassicOnSqlite(DriverContract, FailedStoreContract):
    """The reservation protocol and the failed store again, on classic queues, with SQLite as the shared store."""

    @pytest.fixture
    def driver(self, amqp_url: str, sqlite_store: DatabaseDriver, clock: FixedClock, prefix: str
               ) -> Iterator[AmqpDriver]:
        driver = make_driver(amqp_url, sqlite_store, clock, prefix, queue_type="classic")
        yield driver
        delete_queues(driver)

    def inject_undecodable(self, driver: AmqpDriver, queue: str, body: bytes) -> None:
        publish_raw(driver, queue, body)


# -- settings ---------------------------------------------------------------------------------


def test_urls_select_the_driver_and_its_settings_load_without_kombu() -> None:
    assert {driver_for_url(u) for u in ("amqp://h/", "amqps://h/", "pyamqp://h/")} == {"amqp"}
    assert schema_of("amqp").required == "url" and "queue_type" in SETTINGS
    assert load("amqp").open is open


def test_settings_are_checked() -> None:
    good = {"url": "amqp://guest:guest@127.0.0.1:5672/", "locks": "shared"}
    assert parse_settings(good).queue_type == "quorum"
    assert parse_settings({**good, "url": "pyamqp://u:p@h:5672/v"}).broker_url == "amqp://u:p@h:5672/v"
    with pytest.raises(ConfigurationError, match="locks"):
        parse_settings({"url": good["url"]})
    with pytest.raises(ConfigurationError, match="quorum"):
        parse_settings({**good, "queue_type": "stream"})
    with pytest.raises(ConfigurationError, match="prefetch"):
        parse_settings({**good, "prefetch": -1})
    for key in ("visibility_timeout", "prefetch_count", "exchange", "confirm_publish"):
        assert key in REFUSED
        with pytest.raises(RefusedSetting, match=key):
            parse_settings({**good, key: 1})
    with pytest.raises(ConfigurationError, match="unknown setting"):
        parse_settings({**good, "nonsense": 1})
    # the password never appears in what the driver says about itself
    assert "s3cret" not in parse_settings({**good, "url": "amqp://u:s3cret@h/"}).scope


def test_a_delay_visits_one_stage_per_set_bit() -> None:
    topology = Topology("p.", "quorum")
    route = topology.route("mail", 5)
    assert route.stages == (2, 0) and route.exchange == "p.delay.2"
    assert route.key.split(".")[-1] == "mail" and route.key.split(".")[:BITS].count("1") == 2
    assert topology.route("mail", 0).exchange == "" and topology.route("mail", 0).key == "p.mail"
    assert topology.route("mail", 2**40).stages == tuple(range(BITS - 1, -1, -1))  # capped at the longest
    with pytest.raises(ConfigurationError, match="cannot be an amqp queue"):
        topology.route("a#b", 0)


# -- what only RabbitMQ can get wrong ----------------------------------------------------------


@pytest.fixture
def real_time(amqp_url: str, redis_store: RedisDriver, prefix: str) -> Iterator[AmqpDriver]:
    """A driver on the wall clock with delays held by the broker (delay_scale 1)."""
    driver = make_driver(amqp_url, redis_store, SystemClockForTests(), prefix, delay_scale=1.0)
    yield driver
    delete_queues(driver)


class SystemClockForTests:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


def test_a_long_delay_never_holds_a_short_one_back(real_time: AmqpDriver) -> None:
    now = time.time()
    long = make_envelope(FixedClock(now), delay=3600)
    short = make_envelope(FixedClock(now), delay=0.3)
    real_time.push([long])
    real_time.push([short])
    got = real_time.reserve(["default"], 5, wait=20)
    assert [r.id for r in got] == [short.id]
    # the long one is held by the broker's stages, not by this process
    counts = {c.queue: c for c in real_time.counts()}["default"]
    assert (counts.ready, counts.delayed, counts.reserved) == (0, 1, 1)
    assert real_time.consumers.buffered("default") == 0
    real_time.acknowledge(got)
    assert real_time.purge(["default"]) == 1
    assert pending(real_time, "default") == 0


def test_a_released_job_is_held_by_the_broker_and_comes_back(real_time: AmqpDriver) -> None:
    (env,) = [make_envelope(FixedClock(time.time()))]
    real_time.push([env])
    (res,) = real_time.reserve(["default"], 1, wait=10)
    real_time.release(res, 0.2)
    again: list[Any] = []
    deadline = time.monotonic() + 20
    while not again and time.monotonic() < deadline:
        again = real_time.reserve(["default"], 1, wait=1)
    assert [r.id for r in again] == [env.id] and again[0].attempt == 2
    real_time.acknowledge(again)


def test_a_dropped_connection_hands_its_jobs_to_another_worker_as_a_new_attempt(
        amqp_url: str, redis_store: RedisDriver, clock: FixedClock, prefix: str) -> None:
    first = make_driver(amqp_url, redis_store, clock, prefix)
    second = make_driver(amqp_url, redis_store, clock, prefix)
    try:
        (env,) = [make_envelope(clock)]
        first.push([env])
        (held,) = first.reserve(["default"], 1)
        assert second.reserve(["default"], 1) == []
        first.consumers.link.drop()  # the connection goes, as when its process dies
        (again,) = second.reserve(["default"], 1, wait=10)
        assert again.id == env.id and again.attempt == 2
        # the first worker's late outcome settles nothing
        first.acknowledge([held])
        assert first.extend([held], 60) == []
        second.acknowledge([again])
        assert pending(second, "default") == 0
    finally:
        delete_queues(second)
        first.close()


def test_a_job_the_consumer_timeout_would_cut_short_is_refused(
        amqp_url: str, redis_store: RedisDriver, clock: FixedClock, prefix: str) -> None:
    driver = make_driver(amqp_url, redis_store, clock, prefix, consumer_timeout=600, reservation=60)
    try:
        assert isinstance(driver, JobChecking)
        assert driver.check_jobs([JobLimits("short", 300.0)]) == []
        with pytest.raises(ConfigurationError, match="consumer_timeout"):
            driver.check_jobs([JobLimits("short", 300.0), JobLimits("report.monthly", 3600.0)])
        # no time limit (a Celery task's default): the worker starts, with one line naming it and the fix
        (line,) = driver.check_jobs([JobLimits("short", 300.0), JobLimits("proj.tasks.crunch", None)])
        assert "'proj.tasks.crunch' has no time limit" in line and "at most 540 s" in line
        assert "time_limit" in line and "consumer_timeout" in line
        disabled = make_driver(amqp_url, redis_store, clock, prefix, consumer_timeout=0)
        # the server's is off: nothing to cut a job short
        assert disabled.check_jobs([JobLimits("report.monthly", 3600.0), JobLimits("crunch", None)]) == []
        disabled.close()
        with pytest.raises(PayloadTooLarge):
            driver.push([make_envelope(clock, payload={"blob": "x" * (driver.max_message_bytes + 1)})])
    finally:
        delete_queues(driver)


def test_a_broker_that_is_not_there_fails_within_the_connect_timeout(redis_store: RedisDriver, prefix: str) -> None:
    driver = make_driver("amqp://guest:guest@127.0.0.1:1/", redis_store, FixedClock(), prefix, connect_timeout=1)
    with pytest.raises(DriverUnavailable, match="RabbitMQ at"):
        driver.push([make_envelope(FixedClock())])
    driver.close()


def test_a_blocking_reserve_lets_another_thread_settle(amqp_url: str, redis_store: RedisDriver, clock: FixedClock,
                                                       prefix: str) -> None:
    driver = make_driver(amqp_url, redis_store, clock, prefix)
    try:
        (env,) = [make_envelope(clock)]
        driver.push([env])
        (res,) = driver.reserve(["default"], 1)
        waiter = threading.Thread(target=lambda: driver.reserve(["other"], 1, wait=3))
        waiter.start()
        time.sleep(0.2)
        driver.acknowledge([res])  # not held behind the waiting reserve
        assert waiter.is_alive()
        waiter.join(10)
        assert pending(driver, "default") == 0
    finally:
        delete_queues(driver)


def test_undecodable_messages_carry_their_envelope_id_hint(amqp_url: str, redis_store: RedisDriver,
                                                          clock: FixedClock, prefix: str) -> None:
    driver = make_driver(amqp_url, redis_store, clock, prefix)
    try:
        publish_raw(driver, "default", b"not json", message_id="abc-1")
        (res,) = driver.reserve(["default"], 1)
        assert res.decode_error and res.id == "abc-1"
        driver.fail(res, res.decode_error)
        failed = driver.failed.get("abc-1")
        assert failed is not None and failed.body == b"not json"  # the body as it came
    finally:
        delete_queues(driver)


def test_a_celery_amqp_broker_url_selects_the_driver_with_the_result_store_as_its_shared_store() -> None:
    from jobbridge.compat import Celery
    from jobbridge.compat.config.brokers import jobbridge_backend
    from jobbridge.compat.config.settings import jobbridge_settings
    from jobbridge.compat.exceptions import ImproperlyConfigured

    app = Celery("proj", broker="pyamqp://guest:guest@127.0.0.1:5672//", backend="redis://127.0.0.1:6379/5",
                 broker_transport_options={"read_timeout": 4, "confirm_publish": True})
    conn = jobbridge_settings(app.conf).connection(None)
    assert conn.driver == "amqp" and conn.options["locks"] == "shared"
    assert conn.options["request_timeout"] == 4.0
    with pytest.raises(ImproperlyConfigured, match="result_backend"):
        jobbridge_backend("amqp://h//", {}, None, None)


def test_a_worker_retries_a_broker_out_of_reach_at_start_as_often_as_start_retries(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from jobbridge import JobBridge, Settings, worker_process

    with socket.socket() as closed:  # a port nothing listens on: every connect is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings = Settings.from_mapping({"start_retries": 2, "connections": {
        "default": "rabbit", "rabbit": {"driver": "amqp", "url": f"amqp://guest:guest@127.0.0.1:{port}/",
                                        "locks": "shared", "connect_timeout": 1},
        "shared": {"driver": "redis", "url": ensure_redis(), "prefix": f"jbat:{uuid.uuid4().hex[:8]}:"}}},
        source="test")
    waits: list[float] = []
    monkeypatch.setattr(worker_process.time, "sleep", waits.append)
    bridge = JobBridge(settings)
    try:
        with caplog.at_level("WARNING", "jobbridge.worker"), pytest.raises(DriverUnavailable):
            worker_process.check_worker_driver(bridge)
    finally:
        bridge.close()
    assert waits == [2.0, 4.0], "two retries with backoff, then the worker gives up"
    assert sum("cannot be reached at start" in r.getMessage() for r in caplog.records) == 2


def test_a_delivery_lost_with_its_channel_is_redelivered_and_said_once(
        amqp_url: str, redis_store: RedisDriver, clock: FixedClock, prefix: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """What a job running past consumer_timeout meets: its channel closed under it, its delivery handed back."""
    from amqp import exceptions as amqp_errors

    driver = make_driver(amqp_url, redis_store, clock, prefix)
    try:
        cut = amqp_errors.PreconditionFailed("delivery acknowledgement on channel 1 timed out. Timeout value used: "
                                             "1800000 ms", (60, 80))
        error = driver.consumers.link.translate(cut, "reserve jobs")
        assert isinstance(error, DriverUnavailable) and "consumer_timeout" in str(error)
        driver.push([make_envelope(clock)])
        (running,) = driver.reserve(["default"], 1)
        driver.consumers.link.call("close the channel", lambda ch: ch.close())  # as the broker closes it
        with caplog.at_level("WARNING", "jobbridge.drivers.amqp"):
            driver.acknowledge([running])
        assert sum("went back to RabbitMQ" in r.getMessage() for r in caplog.records) == 1
        (again,) = driver.reserve(["default"], 1)
        assert again.id == running.id and again.envelope.attempts == running.envelope.attempts + 1
        driver.acknowledge([again])
    finally:
        delete_queues(driver)
