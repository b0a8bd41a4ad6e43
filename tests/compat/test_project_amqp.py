"""A Celery-style project on RabbitMQ (``broker_url = "amqp://..."``) under a real ``jobbridge worker -A``.

tests/compat/projects/amqpproj is laid out as Celery's docs lay a project out, with
``task_queues`` of kombu ``Queue``/``Exchange`` objects (a direct and a topic
exchange beside the default ``celery`` queue), ``task_routes`` by exchange and
routing key, and broker connection settings. Its worker runs on a vhost of this
test's own; the test dispatches as a web process would and reads the results
back from the result backend (Redis).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobbridge.compat import Celery, RefusedFeature
from jobbridge.compat.config.settings import jobbridge_settings
from kombu import Exchange, Queue

from tests.drivers.amqp_servers import fresh_vhost, url_for
from tests.services import ensure_redis, unavailable

from .projects import Worker, load, use


@pytest.fixture
def rabbit(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with fresh_vhost() as vhost:
        if vhost is None:
            unavailable("RabbitMQ vhosts", "rabbitmqctl cannot reach the shared node to make a vhost")
        env = {"CELERY_BROKER_URL": url_for(vhost), "AMQPPROJ_BACKEND": ensure_redis()}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield env


def test_the_project_runs_unchanged_on_rabbitmq(tmp_path: Path, rabbit: dict[str, str]) -> None:
    app = use(load("amqpproj").celery_app)
    tasks = load("amqpproj.tasks")
    worker = Worker(tmp_path, "amqpproj", rabbit["CELERY_BROKER_URL"], "-c", "2",
                    env={"AMQPPROJ_BACKEND": rabbit["AMQPPROJ_BACKEND"]})
    try:
        added = tasks.add.delay(2, 3)
        encoded = tasks.encode.delay("cat.mp4")
        report = tasks.monthly.delay("2026-11")
        on_key = tasks.add.apply_async((4, 5), routing_key="celery")
        assert added.get(timeout=60) == 5
        # a route by exchange and routing key reaches the queue task_queues binds with them
        assert encoded.get(timeout=60) == {"video": "cat.mp4", "queue": "media"}
        assert report.get(timeout=60) == {"month": "2026-11", "queue": "reports"}  # topic: report.#
        assert on_key.get(timeout=60) == 9
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        app.close()
    out = worker.output()
    # no time limit: the worker starts, and names each such task with what to configure, once
    assert out.count("'amqpproj.tasks.add' has no time limit") == 1, out
    assert "'amqpproj.tasks.encode' has no time limit" in out
    assert "'amqpproj.tasks.monthly' has no time limit" not in out  # time_limit=60 fits consumer_timeout


def test_routing_keys_resolve_as_rabbitmq_would_route_them(rabbit: dict[str, str]) -> None:
    from jobbridge.compat.config.routing import queue_for
    from jobbridge.compat.exceptions import QueueNotFound, RefusedFeature

    app = load("amqpproj").celery_app
    assert queue_for(app, "x", None, (), {}, {"exchange": "reports", "routing_key": "report.q3"}) == "reports"
    assert queue_for(app, "x", None, (), {}, {"exchange": "", "routing_key": "media"}) == "media"
    with pytest.raises(QueueNotFound, match="would drop the task"):
        queue_for(app, "x", None, (), {}, {"exchange": "media", "routing_key": "media.audio"})
    with pytest.raises(QueueNotFound, match="would drop the task"):
        queue_for(app, "x", None, (), {}, {"exchange": "reports", "routing_key": "invoice.q3"})
    app.conf.task_queues = (*app.conf.task_queues, Queue("everything", Exchange("reports", type="topic"),
                                                         routing_key="#"))
    try:
        with pytest.raises(RefusedFeature, match="a copy to each"):
            queue_for(app, "x", None, (), {}, {"exchange": "reports", "routing_key": "report.q3"})
    finally:
        app.conf.task_queues = app.conf.task_queues[:-1]


AMQP = "amqp://guest:guest@127.0.0.1:5672/jb"


def _amqp_settings(**conf: Any) -> dict[str, Any]:
    app = Celery("conn", broker=AMQP, result_backend="redis://127.0.0.1:6379/1", **conf)
    return dict(jobbridge_settings(app.conf).connection("broker").options)


def test_broker_connection_settings_are_the_amqp_drivers_own() -> None:
    got = _amqp_settings(broker_heartbeat=15, broker_heartbeat_checkrate=3, broker_login_method="plain",
                         broker_pool_limit=10, broker_connection_timeout=2,
                         broker_use_ssl={"ca_certs": "/etc/ca.pem", "cert_reqs": ssl.CERT_REQUIRED})
    assert (got["heartbeat"], got["login_method"], got["connect_timeout"]) == (15.0, "PLAIN", 2.0)
    assert (got["tls"], got["tls_ca_file"], got["tls_verify"]) == (True, "/etc/ca.pem", True)
    assert _amqp_settings(broker_heartbeat=None)["heartbeat"] == 0.0
    for conf, match in [({"broker_pool_limit": 1}, "two connections"), ({"broker_login_method": "GSSAPI"}, "PLAIN"),
                        ({"broker_use_ssl": {"ciphers": "x"}}, "ciphers")]:
        with pytest.raises(RefusedFeature, match=match):
            _amqp_settings(**conf)


def test_retry_on_startup_is_the_workers_start_retries_on_every_driver() -> None:
    def retries(broker: str, **conf: Any) -> int:
        return jobbridge_settings(Celery("r", broker=broker, result_backend="redis://127.0.0.1:6379/1",
                                         **conf).conf).start_retries

    assert retries(AMQP) == 0  # unset: a worker whose store is down at start exits at once
    assert retries(AMQP, broker_connection_retry_on_startup=True) == 100  # Celery's max_retries default
    assert retries("redis://127.0.0.1:6379/0", broker_connection_retry_on_startup=True,
                   broker_connection_max_retries=3) == 3
    assert retries(AMQP, broker_connection_retry_on_startup=True, broker_connection_max_retries=None) > 10**5
    with pytest.raises(RefusedFeature, match="never gives up"):
        retries(AMQP, broker_connection_max_retries=5)


@pytest.mark.parametrize(("key", "value"), [("broker_heartbeat", 30), ("broker_login_method", "PLAIN"),
                                            ("broker_use_ssl", True), ("broker_pool_limit", 10),
                                            ("broker_heartbeat_checkrate", 5)])
def test_amqp_connection_settings_on_another_broker_are_refused(key: str, value: Any) -> None:
    app = Celery("other", broker="redis://127.0.0.1:6379/0", **{key: value})
    with pytest.raises(RefusedFeature, match="redis driver"):
        jobbridge_settings(app.conf)
    jobbridge_settings(Celery("fine", broker="redis://127.0.0.1:6379/0", broker_heartbeat=0,
                              broker_use_ssl=False, broker_heartbeat_checkrate=2).conf)
