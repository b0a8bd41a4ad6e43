"""Every Celery setting is classified; unknown names are errors; broker URLs pick the driver."""

from __future__ import annotations

import types
from typing import Any

import pytest
from jobbridge.compat import Celery, ImproperlyConfigured, RefusedFeature
from jobbridge.compat.config.brokers import jobbridge_backend
from jobbridge.compat.config.setting_table import NEW_NAMES, OLD_NAMES, RULES
from jobbridge.compat.config.settings import Conf, jobbridge_settings
from kombu import Queue

from tests.services import ensure_redis

# Celery 5's settings: every one must be in the table (each row: new name, old name).
CELERY_SETTING_COUNT = 207
# the facade's own settings beside them (Celery ignores them): jobbridge_wire
JOBBRIDGE_SETTING_COUNT = 1


def _configured(source: Any, namespace: str | None = None) -> Celery:
    """An app configured from ``source``, used: config_from_object reads its source when the app is used."""
    app = Celery("configured")
    app.config_from_object(source, namespace=namespace)
    app.conf.check()
    return app


def test_every_celery_setting_is_classified_under_both_names() -> None:
    assert len(RULES) == len(OLD_NAMES) == CELERY_SETTING_COUNT + JOBBRIDGE_SETTING_COUNT
    for new, rule in RULES.items():
        assert rule.kind in ("honour", "accept", "refuse") and rule.why, new
        assert OLD_NAMES[NEW_NAMES[new]] == new
        if rule.kind == "refuse" or rule.ok is not None:
            assert rule.instead, f"{new}: a refusal must say what to write instead"
    for old, new in {"BROKER_URL": "broker_url", "CELERY_ALWAYS_EAGER": "task_always_eager",
                     "CELERYD_CONCURRENCY": "worker_concurrency", "CELERY_ROUTES": "task_routes",
                     "CELERYD_TASK_TIME_LIMIT": "task_time_limit", "CELERY_RESULT_DBURI": "database_url"}.items():
        assert OLD_NAMES[old] == new


def test_each_setting_can_be_set_with_a_harmless_value() -> None:
    for new in RULES:
        conf = Conf()
        value = {"broker_url": "memory://", "task_default_queue": "celery", "worker_concurrency": 2,
                 "task_time_limit": 10, "task_soft_time_limit": 5}.get(new)
        conf.set(new, value)
        assert conf[new] == value and conf[NEW_NAMES[new]] == value


@pytest.mark.parametrize("key", ["CELERY_TASK_ROUTS", "task_rutes", "broker_ulr", "TASK_ALWAYS_EAGER"])
def test_an_unknown_name_is_an_error_with_a_suggestion(key: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"not a Celery setting.*(did you mean|spelled)"):
        Conf().set(key, 1)


def test_the_namespace_reads_prefixed_new_names_and_catches_typos() -> None:
    settings = types.SimpleNamespace(
        DEBUG=True, SECRET_KEY="x", INSTALLED_APPS=["a"],
        CELERY_BROKER_URL="memory://", CELERY_TASK_ROUTES={"a.*": {"queue": "a"}}, CELERY_TIMEZONE="UTC",
    )
    app = Celery("ns")
    app.config_from_object(settings, namespace="CELERY")
    assert app.conf.task_routes == {"a.*": {"queue": "a"}} and app.conf.broker_url == "memory://"
    typo = types.SimpleNamespace(CELERY_TASK_ROUTS={})
    with pytest.raises(ImproperlyConfigured, match="did you mean 'CELERY_TASK_ROUTES'"):
        _configured(typo, namespace="CELERY")  # read when the app is first used, as Celery reads it
    old = types.SimpleNamespace(CELERY_ALWAYS_EAGER=True)
    with pytest.raises(ImproperlyConfigured, match="CELERY_TASK_ALWAYS_EAGER"):
        _configured(old, namespace="CELERY")
    celeryd = types.SimpleNamespace(CELERYD_CONCURRENCY=4)
    with pytest.raises(ImproperlyConfigured, match="CELERY_WORKER_CONCURRENCY"):
        _configured(celeryd, namespace="CELERY")


def test_without_a_namespace_old_names_work_and_celery_looking_typos_fail() -> None:
    flask_config = {"SECRET_KEY": "s", "SQLALCHEMY_DATABASE_URI": "sqlite://", "BROKER_URL": "memory://",
                    "CELERY_ALWAYS_EAGER": True, "CELERYD_CONCURRENCY": 3}
    app = Celery("flaskish")
    app.conf.update(flask_config)
    assert app.conf.task_always_eager is True and app.conf["CELERYD_CONCURRENCY"] == 3
    app.conf.update({"CELERY_TASK_ROUTES": {"a": "b"}, "CELERY_BROKER_URL": "memory://"})  # Flask's spelling
    assert app.conf.task_routes == {"a": "b"}
    with pytest.raises(ImproperlyConfigured, match="did you mean 'CELERY_TASK_ROUTES'"):
        app.conf.update({"CELERY_TASK_ROUTS": {}})


def test_a_config_module_skips_its_imports_and_refuses_unknown_lower_case_names() -> None:
    module = types.ModuleType("celeryconfig")
    module.os = types  # an import
    module.broker_url = "memory://"
    module.task_serializer = "json"
    module.helper = lambda: None
    app = Celery("cfg")
    app.config_from_object(module)
    assert app.conf.task_serializer == "json"
    module.task_serialiser = "json"
    with pytest.raises(ImproperlyConfigured, match="did you mean 'task_serializer'"):
        _configured(module)


@pytest.mark.parametrize(("key", "value", "match"), [
    ("task_serializer", "pickle", "pickle"),
    ("accept_content", ["json", "pickle"], "pickle"),
    ("beat_cron_starting_deadline", 30, "catch_up"),
    ("worker_max_tasks_per_child", 100, "--max-tasks-per-child"),
    ("task_default_priority", 5, "queue"),
    ("security_key", "key.pem", "signing"),
    ("task_acks_on_failure_or_timeout", False, "failed store"),
    ("worker_pool", "gevent", "no gevent"),
])
def test_refused_values_say_what_to_write(key: str, value: Any, match: str) -> None:
    with pytest.raises(RefusedFeature, match=match):
        Celery("refused", **{key: value})


def test_harmless_values_of_refused_settings_pass() -> None:
    app = Celery("fine", beat_cron_starting_deadline=None, task_default_priority=None, worker_pool="prefork",
                 result_backend="redis://localhost/1", task_acks_late=True, accept_content=["json"])
    assert app.conf.result_backend == "redis://localhost/1"


@pytest.mark.parametrize(("url", "expected"), [
    ("redis://localhost:6379/0", {"driver": "redis", "redis_url": "redis://localhost:6379/0"}),
    ("rediss://h:6380/1", {"driver": "redis", "redis_url": "rediss://h:6380/1"}),
    ("sqla+postgresql://u@db/app", {"driver": "database", "database_url": "postgresql://u@db/app"}),
    ("db+sqlite:///jobs.sqlite3", {"driver": "database", "database_url": "sqlite:///jobs.sqlite3"}),
    ("mysql://root@h/test", {"driver": "database", "database_url": "mysql://root@h/test"}),
    ("memory://", {"driver": "memory"}),
])
def test_broker_urls_pick_the_driver(url: str, expected: dict[str, Any]) -> None:
    assert jobbridge_backend(url, {}) == expected


def test_transport_options_map_or_are_refused() -> None:
    got = jobbridge_backend("redis://h/0", {"global_keyprefix": "app:", "visibility_timeout": 3600})
    assert got["redis_prefix"] == "app:"
    with pytest.raises(RefusedFeature, match="did you mean 'visibility_timeout'"):
        jobbridge_backend("redis://h/0", {"visibility_timeot": 1})
    sqs = jobbridge_backend("sqs://", {"region": "eu-west-1",
                                       "predefined_queues": {"celery": {"url": "https://sqs.x/1/q"}}})
    assert sqs == {"driver": "sqs", "sqs_region": "eu-west-1", "sqs_queue_url": "https://sqs.x/1/q"}
    with pytest.raises(RefusedFeature, match="predefined_queues"):
        jobbridge_backend("sqs://", {})


@pytest.mark.parametrize("url", ["librabbitmq://guest@localhost//", "filesystem://", "zookeeper://h"])
def test_brokers_without_a_driver_are_refused_when_set(url: str) -> None:
    with pytest.raises(RefusedFeature, match="amqp://"):
        Celery("nope", broker=url)


def test_jobbridge_settings_come_from_the_celery_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    app = Celery("s", broker=f"sqla+sqlite:///{tmp_path}/jobs.sqlite3", worker_concurrency=3,
                 task_queues=[Queue("high"), Queue("celery")])
    settings = jobbridge_settings(app.conf)
    conn = settings.connection()
    assert conn.driver == "database" and str(conn.options["url"]).endswith("jobs.sqlite3")
    assert settings.concurrency == 3 and settings.queues == ("high", "celery")
    monkeypatch.setenv("JOBBRIDGE_REDIS_URL", "redis://127.0.0.1:6379/3")
    monkeypatch.setenv("JOBBRIDGE_CONCURRENCY", "5")
    env = jobbridge_settings(app.conf)
    assert env.connection().driver == "redis" and env.concurrency == 5


def test_the_celery_broker_url_variable_wins_as_in_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Celery("env", broker="redis://localhost/0")
    monkeypatch.setenv("CELERY_BROKER_URL", "memory://")
    assert app.conf.broker_url == "memory://"
    assert jobbridge_settings(app.conf).connection().driver == "memory"


def test_no_broker_means_jobbridges_default_store(tmp_path: Any) -> None:
    settings = jobbridge_settings(Celery("bare").conf)
    assert settings.connection().driver == "database" and settings.queues == ("celery",)


def test_conf_attribute_assignment_and_item_access_are_classified() -> None:
    app = Celery("conf")
    app.conf.task_default_queue = "main"
    app.conf["CELERY_DEFAULT_QUEUE"] = "other"
    assert app.conf.task_default_queue == "other"
    with pytest.raises(ImproperlyConfigured):
        app.conf.task_defualt_queue = "x"
    with pytest.raises(AttributeError):
        _ = app.conf.not_a_setting
    assert app.conf.get("nope", 1) == 1 and app.conf.task_acks_late is False


def test_socket_transport_options_become_the_redis_drivers_timeouts() -> None:
    options = {"socket_timeout": 2.5, "socket_connect_timeout": 1, "retry_on_timeout": False,
               "socket_keepalive": False, "health_check_interval": 0, "max_connections": None,
               "queue_order_strategy": "priority", "max_retries": 4, "interval_max": 0.5}
    got = jobbridge_backend("redis://h/0", options)
    assert got == {"driver": "redis", "redis_url": "redis://h/0", "redis_response_timeout_ms": 2500,
                   "redis_connect_timeout_ms": 1000, "redis_reconnect": True, "redis_reconnect_attempts": 4,
                   "redis_reconnect_max_backoff_ms": 500}


def test_the_redis_client_really_gets_the_transport_options_timeouts() -> None:
    app = Celery("timeouts", broker=ensure_redis(),
                 broker_transport_options={"socket_timeout": 2.5, "socket_connect_timeout": 1.5})
    bridge = app.jobbridge_app()
    try:
        driver: Any = bridge.driver()
        kwargs = driver.client.connection_pool.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (2.5, 1.5)
    finally:
        bridge.close()


@pytest.mark.parametrize(("option", "value", "match"), [
    ("retry_on_timeout", True, "not sent again"),
    ("socket_keepalive", True, "no TCP keepalive"),
    ("health_check_interval", 25, "does not ping a connection"),
    ("max_connections", 10, "does not cap its redis connections"),
    ("queue_order_strategy", "round_robin", "in the order it lists them"),
    ("socket_timeout", None, "waits for ever"),
    ("interval_start", 0.2, "exponential backoff"),
])
def test_transport_options_jobbridge_cannot_honour_are_refused_saying_why(option: str, value: Any,
                                                                          match: str) -> None:
    with pytest.raises(RefusedFeature, match=match):
        jobbridge_backend("redis://h/0", {option: value})


def test_sqs_and_database_transport_options_map_or_are_refused() -> None:
    queues = {"celery": {"url": "https://sqs.eu-west-1.amazonaws.com/1/q"}}
    sqs = jobbridge_backend("sqs://", {"predefined_queues": queues, "wait_time_seconds": 10,
                                       "polling_interval": 2, "max_retries": 3})
    assert (sqs["sqs_wait_time"], sqs["sleep"], sqs["sqs_max_attempts"]) == (10, 2.0, 4)
    with pytest.raises(RefusedFeature, match=r"queue_name_prefix.*named after the one predefined queue"):
        jobbridge_backend("sqs://", {"predefined_queues": queues, "queue_name_prefix": "dev-"})
    with pytest.raises(RefusedFeature, match="fails at once with DriverUnavailable"):
        jobbridge_backend("sqla+postgresql://u@db/app", {"max_retries": 3})


def test_broker_connection_timeout_is_the_drivers_connect_timeout(tmp_path: Any) -> None:
    assert jobbridge_backend("redis://h/0", {}, 2.5)["redis_connect_timeout_ms"] == 2500
    assert jobbridge_backend("redis://h/0", {"socket_connect_timeout": 1}, 2.5)["redis_connect_timeout_ms"] == 1000
    assert jobbridge_backend("sqla+postgresql://u@db/app", {}, 2.5)["database_connect_timeout"] == 3
    assert "database_connect_timeout" not in jobbridge_backend(f"sqla+sqlite:///{tmp_path}/j.db", {}, 2.5)
    app = Celery("ct", broker="sqla+postgresql://u@db/app", broker_connection_timeout=7)
    assert jobbridge_settings(app.conf).connection().options["connect_timeout"] == 7


@pytest.mark.parametrize(("key", "value", "match"), [
    ("broker_connection_retry", False, "never exits"),
    ("task_publish_retry", True, "redis_reconnect"),
    ("task_publish_retry_policy", {"max_retries": 3}, "redis_reconnect"),
    ("redis_socket_timeout", 5, "broker_transport_options socket_timeout"),
    ("redis_retry_on_timeout", True, "broker_transport_options"),
    ("database_engine_options", {"pool_size": 20}, "connect_timeout and statement_timeout"),
])
def test_connection_settings_that_would_change_nothing_are_refused(key: str, value: Any, match: str) -> None:
    with pytest.raises(RefusedFeature, match=match):
        Celery("refused-connection", **{key: value})


def test_connection_settings_with_values_true_of_jobbridge_pass() -> None:
    app = Celery("fine-connection", broker_connection_retry=True, broker_connection_max_retries=None,
                 broker_pool_limit=None, task_publish_retry=False, redis_socket_timeout=None,
                 database_engine_options={}, broker_heartbeat=10)
    assert app.conf.broker_connection_retry is True
