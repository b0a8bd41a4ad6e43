"""The result-store contract on real Redis, then what only Redis can get wrong: restarts and dead servers."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from jobbridge.errors import ConfigurationError, DriverUnavailable
from jobbridge.results import PENDING, STARTED, SUCCESS, ResultRecord, open_store
from jobbridge.results import redis as results_redis
from jobbridge.results.redis import RedisResultStore, open_redis_store
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.results_contract import WAKE_TIMEOUT, Reopen, ResultStoreContract, StoreUrl
from tests.drivers.redis_server import own_redis
from tests.services import ensure_redis

RESTART_PORT = 6393


@pytest.fixture(scope="module")
def redis_url() -> str:
    return ensure_redis()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A fresh prefix per test; its keys are deleted afterwards (the shared server is never flushed)."""
    name = f"jbtest:{uuid.uuid4().hex[:12]}:"
    yield name
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{name}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def store(redis_url: str, prefix: str, clock: FixedClock) -> Iterator[RedisResultStore]:
    store = open_redis_store(redis_url, clock=clock, prefix=prefix)
    yield store
    store.close()


class TestRedisResultStore(ResultStoreContract):
    @pytest.fixture
    def reopen(self, redis_url: str, prefix: str, clock: FixedClock) -> Iterator[Reopen]:
        opened: list[RedisResultStore] = []

        def reopen() -> RedisResultStore:
            opened.append(open_redis_store(redis_url, clock=clock, prefix=prefix))
            return opened[-1]

        yield reopen
        for other in opened:
            other.close()

    @pytest.fixture
    def store_url(self, redis_url: str, prefix: str) -> StoreUrl:
        return redis_url, {"prefix": prefix}


# -- the key layout ---------------------------------------------------------------------------


def test_a_record_has_a_real_ttl_as_its_net(store: RedisResultStore, prefix: str) -> None:
    store.store(ResultRecord("r", SUCCESS, result=[1]), 30)
    ttl = store.client.pttl(f"{prefix}result:r")
    assert 0 < ttl <= 30_000
    assert store.client.zscore(f"{prefix}results", "r") == store.clock.now() + 30
    store.cancel(["c"], 60)
    assert 30_000 < store.client.pttl(f"{prefix}cancelled") <= 60_000
    store.counter_init("k", 2, 10)
    store.counter_decrement("k", "m")
    assert 0 < store.client.pttl(f"{prefix}counter-members:k") <= 10_000


def test_a_wait_leaves_nothing_behind(store: RedisResultStore, prefix: str) -> None:
    store.store(ResultRecord("w", STARTED), 60)
    assert store.wait("w", 0.1) is not None
    timer = threading.Timer(0.1, lambda: store.store(ResultRecord("w", SUCCESS), 60))
    timer.start()
    assert store.wait("w", WAKE_TIMEOUT) is not None
    timer.join()
    assert list(store.client.scan_iter(match=f"{prefix}result-w*")) == []


def test_the_clock_decides_expiry_not_redis(store: RedisResultStore, clock: FixedClock) -> None:
    store.store(ResultRecord("r", SUCCESS), 10)
    clock.advance(11)
    assert store.client.exists(f"{store.prefix}result:r")  # Redis still holds it (its real TTL is 10 s)
    assert store.get("r") is None and store.wait("r", 0) is None


# -- settings and errors ----------------------------------------------------------------------


def test_settings(redis_url: str, prefix: str, clock: FixedClock) -> None:
    store = open_store(redis_url, clock=clock, prefix=prefix)
    assert isinstance(store, RedisResultStore) and store.settings.reconnect and store.settings.prefix == prefix
    store.close()
    quiet = open_store(redis_url, clock=clock, prefix=prefix, reconnect=False, response_timeout_ms=500)
    assert isinstance(quiet, RedisResultStore) and not quiet.settings.reconnect
    quiet.close()
    with pytest.raises(ConfigurationError, match="reservation"):
        open_store(redis_url, clock=clock, reservation=60)
    with pytest.raises(ConfigurationError, match="queue_url"):
        open_store(redis_url, clock=clock, queue_url="x")


def test_an_unreachable_redis_is_driver_unavailable_and_wait_gives_up(clock: FixedClock) -> None:
    store = open_store("redis://127.0.0.1:1/0", clock=clock, reconnect=False, connect_timeout_ms=200)
    try:
        with pytest.raises(DriverUnavailable) as caught:
            store.get("x")
        assert isinstance(caught.value.__cause__, redis.ConnectionError)
        with pytest.raises(DriverUnavailable):
            store.wait("x", 0.3)  # tries until its deadline, then says why
    finally:
        store.close()


# -- a restart --------------------------------------------------------------------------------


def test_the_same_store_answers_after_a_redis_restart(tmp_path: Path) -> None:
    options = ("--appendonly", "yes", "--appendfsync", "always")
    with own_redis(RESTART_PORT, tmp_path, *options) as server:
        clock = FixedClock()
        store = open_redis_store(server.url, clock=clock, reconnect_attempts=60, reconnect_max_backoff_ms=200,
                                 connect_timeout_ms=500)
        other = open_redis_store(server.url, clock=clock, reconnect_attempts=60, reconnect_max_backoff_ms=200,
                                 connect_timeout_ms=500)
        try:
            store.store(ResultRecord("job", PENDING, name="n"), 3600)
            store.cancel(["revoked"], 3600)
            server.restart()
            got = store.get("job")
            assert got is not None and got.state == PENDING
            assert store.cancelled(["revoked", "job"]) == {"revoked"}
            pending = store.wait("job", 0.3)  # returns at its timeout: never hangs on the old connection
            assert pending is not None and pending.state == PENDING

            # a wait in progress when Redis dies is answered once Redis is back
            result: list[ResultRecord | None] = []
            waiter = threading.Thread(target=lambda: result.append(store.wait("job", WAKE_TIMEOUT)))
            waiter.start()
            time.sleep(0.2)
            server.kill()
            time.sleep(0.3)
            server.start()
            other.store(ResultRecord("job", SUCCESS, result="after the restart"), 3600)
            waiter.join(WAKE_TIMEOUT + 5)
            assert not waiter.is_alive()
            assert result[0] is not None and result[0].result == "after the restart"
        finally:
            store.close()
            other.close()


def test_a_wait_on_a_dead_redis_ends_at_its_deadline(tmp_path: Path) -> None:
    with own_redis(RESTART_PORT, tmp_path) as server:
        store = open_redis_store(server.url, clock=FixedClock(), reconnect_attempts=2, connect_timeout_ms=200)
        store.store(ResultRecord("job", STARTED), 3600)
        outcome: list[BaseException | ResultRecord | None] = []

        def wait() -> None:
            try:
                outcome.append(store.wait("job", 1.0))
            except DriverUnavailable as error:
                outcome.append(error)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        server.kill()  # and never back
        waiter.join(30)
        store.close()
        assert not waiter.is_alive(), "wait() outlived its timeout on a dead server"
        assert isinstance(outcome[0], DriverUnavailable)


def test_a_wait_on_a_frozen_redis_ends_at_its_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGSTOP keeps the sockets open and answers nothing: the silent half-open connection of a network cut."""
    monkeypatch.setattr(results_redis, "BLOCK_SLICE", 0.5)
    with own_redis(RESTART_PORT, tmp_path) as server:
        assert server.process is not None
        # a wait's reads time out after a slice plus the response timeout
        store = open_redis_store(server.url, clock=FixedClock(), connect_timeout_ms=200, response_timeout_ms=500)
        store.store(ResultRecord("job", STARTED), 3600)
        assert store.wait("job", 0.1) is not None  # the wait's connection is open and pooled
        outcome: list[BaseException | ResultRecord | None] = []

        def wait() -> None:
            try:
                outcome.append(store.wait("job", 1.0))
            except DriverUnavailable as error:
                outcome.append(error)

        server.process.send_signal(signal.SIGSTOP)
        try:
            waiter = threading.Thread(target=wait)
            waiter.start()
            waiter.join(30)
            assert not waiter.is_alive(), "wait() hung on a server that stopped answering"
        finally:
            server.process.send_signal(signal.SIGCONT)
        store.close()
        assert isinstance(outcome[0], DriverUnavailable)
