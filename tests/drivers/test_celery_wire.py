"""The celery_wire driver on the real Redis (database 13, flushed per test): the shared contract, then what only
kombu's layout can get wrong."""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator

import kombu
import pytest
import redis

from jobbridge.drivers import Resources
from jobbridge.drivers.celerywire import open, parse_settings
from jobbridge.drivers.celerywire.driver import CeleryWireDriver
from jobbridge.drivers.redis import RedisDriver
from jobbridge.drivers.redis.settings import parse_settings as redis_settings
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import DriverContract, FailedStoreContract, LockStoreContract
from tests.drivers.amqp_servers import fresh_vhost, url_for
from tests.services import ensure_redis

URL = "redis://127.0.0.1:6379/13"


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    ensure_redis()
    client = redis.Redis.from_url(URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def driver(broker: redis.Redis) -> Iterator[CeleryWireDriver]:
    clock = FixedClock(1_800_000_000.0)
    shared = RedisDriver(redis_settings({"url": URL, "prefix": "jbwire:"}), clock=clock)
    found = open({"url": URL, "locks": "shared", "reservation": 10, "visibility_timeout": 10},
                 Resources(clock=clock, extra={"lock_store": shared}))
    yield found
    found.close()


def open_driver(clock: FixedClock, **settings: object) -> CeleryWireDriver:
    shared = RedisDriver(redis_settings({"url": URL, "prefix": "jbwire:"}), clock=clock)
    options: dict[str, object] = {"url": URL, "locks": "shared", "reservation": DriverContract.RESERVATION,
                                  "visibility_timeout": DriverContract.RESERVATION, **settings}
    if str(options["url"]).startswith("amqp"):
        options.pop("visibility_timeout")
    return open(options, Resources(clock=clock, extra={"lock_store": shared}))


class TestCeleryWireContract(DriverContract, FailedStoreContract, LockStoreContract):
    """The shared contract on kombu's Redis layout, the visibility timeout as long as the lease."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, broker: redis.Redis, clock: FixedClock) -> Iterator[CeleryWireDriver]:
        found = open_driver(clock)
        yield found
        found.close()

    def inject_undecodable(self, driver: CeleryWireDriver, queue: str, body: bytes) -> None:
        driver.wire.push_raw(queue, body)


class TestCeleryWireContractLongVisibility(DriverContract):
    """The reservation protocol again with Celery's default visibility timeout (an hour) beside a one-minute
    lease: this process's own lapsed deliveries go back at the lease, whatever kombu's timeout."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, broker: redis.Redis, clock: FixedClock) -> Iterator[CeleryWireDriver]:
        found = open_driver(clock, visibility_timeout=3600)
        yield found
        found.close()


@pytest.fixture(scope="module")
def amqp_url() -> Iterator[str]:
    with fresh_vhost() as name:
        yield url_for(name)


#: every queue the contract names
CONTRACT_QUEUES = ("default", "low", "high", "other", "celery")


def drop_queues(url: str) -> None:
    """The contract's queues and their exchanges gone, so the next test starts empty."""
    with kombu.Connection(url) as connection:
        channel = connection.channel()
        for queue in CONTRACT_QUEUES:
            channel.queue_delete(queue)
            channel.exchange_delete(queue)


class TestCeleryWireContractOnRabbitMQ(DriverContract, FailedStoreContract, LockStoreContract):
    """The shared contract on Celery's classic durable queues on RabbitMQ (a vhost of this module's own)."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def driver(self, amqp_url: str, broker: redis.Redis, clock: FixedClock) -> Iterator[CeleryWireDriver]:
        found = open_driver(clock, url=amqp_url)
        yield found
        found.close()
        drop_queues(amqp_url)

    def inject_undecodable(self, driver: CeleryWireDriver, queue: str, body: bytes) -> None:
        driver.wire.push_raw(queue, body)

    def test_counts_by_state(self, driver: CeleryWireDriver, clock: FixedClock) -> None:  # type: ignore[override]
        """RabbitMQ counts a queue's messages but cannot say which carry an eta: a delayed message still on
        the broker counts as ready, until a reserve takes it and holds it (then it counts as delayed)."""
        self.push(driver, clock, n=2)
        self.push(driver, clock, n=1, delay=100)
        self.reserve_one(driver)
        counts = {c.queue: c for c in driver.counts()}["default"]
        assert (counts.ready, counts.delayed, counts.reserved) == (2, 0, 1)
        assert driver.reserve(["default"], 5) and driver.reserve(["default"], 5) == []
        counts = {c.queue: c for c in driver.counts()}["default"]
        assert (counts.ready, counts.delayed, counts.reserved) == (0, 1, 2)


def _call(clock: FixedClock, **options: object) -> Envelope:
    return Envelope.new("wire.add", "celery", {"args": [1, 2], "kwargs": {}}, tries=4, timeout=30, now=clock.now(),
                        **options)  # type: ignore[arg-type]


def test_a_push_is_a_celery_message_in_kombus_list(driver: CeleryWireDriver, broker: redis.Redis) -> None:
    driver.push([_call(driver.clock, headers={"custom": "kept"})])  # type: ignore[arg-type]
    (raw,) = broker.lrange("celery", 0, -1)
    message = json.loads(raw)
    assert message["content-type"] == "application/json" and message["properties"]["body_encoding"] == "base64"
    assert json.loads(base64.b64decode(message["body"]))[:2] == [[1, 2], {}]
    headers = message["headers"]
    assert (headers["task"], headers["retries"], headers["custom"]) == ("wire.add", 0, "kept")
    assert broker.smembers("_kombu.binding.celery")


def test_reserve_records_kombus_unacked_and_release_counts_a_retry(driver: CeleryWireDriver,
                                                                    broker: redis.Redis) -> None:
    driver.push([_call(driver.clock)])  # type: ignore[arg-type]
    (res,) = driver.reserve(["celery"], 5)
    assert broker.hlen("unacked") == 1 and broker.zcard("unacked_index") == 1
    driver.release(res, 0)
    assert broker.hlen("unacked") == 0
    (again,) = driver.reserve(["celery"], 5)
    assert again.envelope.attempts == 2 and again.envelope.tries == 4
    driver.acknowledge([again])
    assert broker.hlen("unacked") == 0 and broker.llen("celery") == 0


def test_a_lapsed_message_is_restored_and_a_stale_receipt_settles_nothing(driver: CeleryWireDriver,
                                                                           broker: redis.Redis) -> None:
    driver.push([_call(driver.clock)])  # type: ignore[arg-type]
    (first,) = driver.reserve(["celery"], 5)
    driver.clock.advance(11)  # type: ignore[attr-defined]
    assert driver.reclaim_expired() == 1
    (second,) = driver.reserve(["celery"], 5)
    assert second.envelope.attempts == 2  # kombu marked it redelivered
    driver.acknowledge([first])
    assert broker.hlen("unacked") == 1  # the new delivery is still held
    driver.acknowledge([second])
    assert broker.hlen("unacked") == 0


def test_a_pickled_message_is_failed_unread(driver: CeleryWireDriver, broker: redis.Redis) -> None:
    body = base64.b64encode(pickle.dumps(((1,), {}, {}))).decode()
    broker.lpush("celery", json.dumps({"body": body, "content-type": "application/x-python-serialize",
                                       "content-encoding": "binary", "headers": {"task": "x", "id": "p1"},
                                       "properties": {"delivery_tag": "t1", "body_encoding": "base64"}}))
    (res,) = driver.reserve(["celery"], 5)
    assert res.decode_error is not None and "pickle" in res.decode_error and "never decoded" in res.decode_error
    driver.fail(res, res.decode_error)
    (failed,) = driver.failed.list()
    assert failed.id == "p1" and broker.hlen("unacked") == 0


def test_a_reservation_longer_than_the_visibility_timeout_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="visibility_timeout"):
        parse_settings({"url": URL, "locks": "shared", "reservation": 60, "visibility_timeout": 30})


def test_a_visibility_timeout_on_rabbitmq_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"RabbitMQ .* no visibility timeout"):
        parse_settings({"url": "amqp://guest:guest@127.0.0.1:5672/", "locks": "shared", "visibility_timeout": 30})


def test_rabbitmq_queues_are_celerys_own_declaration(amqp_url: str, broker: redis.Redis) -> None:
    """A queue the driver declared is one a Celery worker's own declaration matches (classic, durable, no
    arguments), and a message the driver pushed is a Celery message on it."""
    drop_queues(amqp_url)
    driver = open_driver(FixedClock(), url=amqp_url)
    try:
        driver.push([_call(driver.clock)])  # type: ignore[arg-type]
        with kombu.Connection(amqp_url) as connection:
            channel = connection.channel()
            kombu.Queue("celery", kombu.Exchange("celery", type="direct"), routing_key="celery",
                        durable=True).bind(channel).declare()  # raises PRECONDITION_FAILED if inequivalent
            got = channel.basic_get("celery", no_ack=True)
        assert got.properties["content_type"] == "application/json" and got.properties["delivery_mode"] == 2
        assert got.properties["application_headers"]["task"] == "wire.add"
        assert json.loads(got.body)[:2] == [[1, 2], {}]
    finally:
        driver.close()
        drop_queues(amqp_url)


def test_the_facade_maps_rabbitmq_to_the_wire_and_refuses_what_it_cannot_honour() -> None:
    from jobbridge.compat.config import wire
    from jobbridge.compat.exceptions import RefusedFeature

    amqp_url = "amqp://guest:guest@127.0.0.1:5672/x"
    found = wire.backend(amqp_url, None, "redis://127.0.0.1:6379/1")["connections"]
    assert found["broker"] == {"driver": "celery_wire", "url": amqp_url, "locks": "shared"}
    assert found["shared"] == {"driver": "redis", "url": "redis://127.0.0.1:6379/1"}
    with pytest.raises(RefusedFeature, match="result_backend = redis://"):
        wire.backend(amqp_url, None, None)
    with pytest.raises(RefusedFeature, match="visibility_timeout"):
        wire.backend(amqp_url, {"visibility_timeout": 10}, "redis://127.0.0.1:6379/1")
    with pytest.raises(RefusedFeature, match="sqs://"):
        wire.backend("sqs://", None, "redis://127.0.0.1:6379/1")


def test_the_facade_gives_the_wire_its_connection_settings_or_refuses_them() -> None:
    """broker_connection_timeout becomes the broker connection's connect_timeout; an AMQP-only setting such as
    broker_heartbeat is refused on the wire (never accepted and dropped); retry on start-up is honoured."""
    from jobbridge.compat import Celery
    from jobbridge.compat.config.settings import jobbridge_settings
    from jobbridge.compat.exceptions import RefusedFeature

    app = Celery("wire", broker="redis://127.0.0.1:6379/13", jobbridge_wire="celery",
                 broker_connection_timeout=3, broker_connection_retry_on_startup=True, set_as_current=False)
    settings = jobbridge_settings(app.conf, environ={})
    broker = settings.connection("broker")
    assert broker.driver == "celery_wire" and broker.options["connect_timeout"] == 3.0
    assert settings.start_retries > 0
    refused = Celery("wire", broker="redis://127.0.0.1:6379/13", jobbridge_wire="celery", broker_heartbeat=10,
                     set_as_current=False)
    with pytest.raises(RefusedFeature, match="broker_heartbeat"):
        jobbridge_settings(refused.conf, environ={})


def test_the_facade_maps_a_database_result_backend_to_celerys_tables_on_the_wire() -> None:
    """db+<database URL> on the wire: results in Celery's tables; on RabbitMQ, failed jobs and locks beside them."""
    from jobbridge.compat import Celery
    from jobbridge.compat.config import wire
    from jobbridge.compat.config.settings import jobbridge_settings
    from jobbridge.compat.exceptions import RefusedFeature

    database = "postgresql+psycopg://127.0.0.1:5432/test"
    assert wire.results_url(database) == "celery+db+" + database
    assert wire.results_url("sqlite:///r.sqlite3") == "celery+db+sqlite:///r.sqlite3"
    with pytest.raises(RefusedFeature, match="db\\+postgresql"):
        wire.results_url("memory://")
    found = wire.backend("amqp://guest:guest@127.0.0.1:5672/x", None, database)["connections"]
    assert found["shared"] == {"driver": "database", "url": database}
    app = Celery("wire", broker="redis://127.0.0.1:6379/13", backend="db+" + database, jobbridge_wire="celery",
                 set_as_current=False)
    settings = jobbridge_settings(app.conf, environ={})
    assert settings.results_store() == ("celery+db+" + database, {})


def test_chord_parts_count_once_in_celerys_keys_and_the_last_one_claims_the_join(broker: redis.Redis) -> None:
    """The store's side of a chord across sides: Celery's .s/.j/.d/.c keys, each part once, one claim, then done."""
    from jobbridge.results import FAILURE, SUCCESS, ResultRecord, open_store
    from jobbridge.results.celery_meta import CeleryChords

    store = open_store("celery+" + URL, clock=FixedClock(1_800_000_000.0))
    try:
        assert isinstance(store, CeleryChords)
        part = store.chord_part("unknown", ResultRecord("a", SUCCESS, result=1), 0, 60)
        assert part is None and broker.zcard("celery-taskset-meta-unknown.j") == 1  # no size: never joins
        store.chord_start("g", 3, 60)
        assert broker.get("celery-taskset-meta-g.s") == b"3"
        first = ResultRecord("p0", SUCCESS, result={"n": 0})
        assert store.chord_part("g", first, 0, 60) is None
        assert store.chord_part("g", first, 0, 60) is None  # the same task again (a redelivery): not counted
        failed = ResultRecord("p1", FAILURE, error="ValueError: boom", exception_type="builtins.ValueError")
        assert store.chord_part("g", failed, 1, 60) is None
        assert broker.zcard("celery-taskset-meta-g.j") == 2
        claim = store.chord_part("g", ResultRecord("p2", SUCCESS, result=[2]), 2, 60)
        assert claim is not None and [p.id for p in claim.parts] == ["p0", "p1", "p2"]
        assert [p.state for p in claim.parts] == [SUCCESS, FAILURE, SUCCESS]
        assert claim.parts[0].result == {"n": 0} and claim.parts[1].exception_type == "builtins.ValueError"
        assert store.chord_part("g", ResultRecord("p2", SUCCESS, result=[2]), 2, 60) is None  # claimed already
        store.chord_done(claim)
        assert broker.get("celery-taskset-meta-g.c") == b"done"
        assert not broker.exists("celery-taskset-meta-g.j", "celery-taskset-meta-g.s", "celery-taskset-meta-g.d")
        assert store.chord_part("g", first, 0, 60) is None  # a late duplicate after the join: nothing recreated
        assert not broker.exists("celery-taskset-meta-g.j")
        raw = json.loads(broker.zrange("celery-taskset-meta-unknown.j", 0, -1)[0])
        assert raw == [1, "a", "SUCCESS", 1]  # the part as Celery's backend writes it
    finally:
        store.close()
