"""Celery's wire on RabbitMQ: real Celery 5 (in a venv of its own) and jobbridge share one vhost's queues.

The broker is a vhost of this module's own on the shared node; results (and the
shared store) are on Redis database 12, flushed per test. The harness (processes,
the client, the app) is tests/integration/test_celery_wire.py's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.drivers.amqp_servers import fresh_vhost, url_for
from tests.integration import test_celery_wire as harness
from tests.services import ensure_redis

URL = "redis://127.0.0.1:6379/12"
celery_bin = harness.celery_bin


@pytest.fixture(scope="module")
def amqp_url() -> Iterator[str]:
    with fresh_vhost() as name:
        yield url_for(name)


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, amqp_url: str) -> Iterator[redis.Redis]:
    ensure_redis()
    monkeypatch.setattr(harness, "URL", URL)
    monkeypatch.setenv("WIRE_BROKER", amqp_url)
    client = redis.Redis.from_url(URL)
    client.flushdb()
    yield client
    client.flushdb()


def _check(got: dict[str, object], count: int) -> None:
    assert got["adds"] == [2 * i for i in range(count)]
    assert got["echo"] == [[1, "two", [3]], {"four": {"five": 5}}]
    assert (got["countdown"], got["retrying"], got["chain"]) == (101, 2, 10)


def test_celery_client_to_jobbridge_worker_on_rabbitmq(tmp_path: Path, broker: redis.Redis,
                                                       celery_bin: Path) -> None:
    worker = harness.jobbridge_worker(tmp_path)
    try:
        got = harness.client(celery_bin / "python", "celery", 20, "few")
    finally:
        worker.stop()
    _check(got, 20)
    ran = harness._ran(broker)
    assert ran and all(line.endswith("|jobbridge") for line in ran), worker.output()
    retries = [x.decode() for x in broker.lrange("wire:flaky:celery-flaky", 0, -1)]
    assert retries == ["0|jobbridge", "1|jobbridge", "2|jobbridge"]


def test_facade_to_celery_worker_on_rabbitmq(tmp_path: Path, broker: redis.Redis, celery_bin: Path) -> None:
    worker = harness.celery_worker(tmp_path, celery_bin)
    try:
        got = harness.client(Path(sys.executable), "jobbridge", 20, "few")
    finally:
        # every result is read: no shutdown to wait for (Celery's own waits on RabbitMQ for seconds)
        worker.proc.kill()
        worker.proc.wait(10)
    _check(got, 20)
    ran = harness._ran(broker)
    assert ran and all(line.endswith("|celery") for line in ran), worker.output()
    retries = [x.decode() for x in broker.lrange("wire:flaky:jobbridge-flaky", 0, -1)]
    assert retries == ["0|celery", "1|celery", "2|celery"]
