"""The configuration layer: every rule of docs/configuration.md, one test (or one table of cases) each."""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobbridge import drivers, setting_checks
from jobbridge.errors import ConfigurationError, RefusedSetting, UnknownConnection
from jobbridge.setting_schema import Refusal
from jobbridge.settings import (
    DEFAULT_SQLITE_FILE,
    DRIVER_KEYS,
    ENV_PREFIX,
    TOP_FIELDS,
    ConnectionSettings,
    Settings,
    default_sqlite_url,
    discover,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

DESIGN_EXAMPLE = """
queues = ["high", "default"]
concurrency = 8

[connections]
default = "primary"

[connections.primary]
driver = "database"
url = "postgresql://app@db/app"
reservation = 60

[connections.bulk]
driver = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/123/bulk"
region = "eu-west-1"
"""


def env(tmp_path: Path, **variables: str) -> Settings:
    """Settings from exactly these JOBBRIDGE_* variables, in an empty directory."""
    return Settings.from_env({ENV_PREFIX + k.upper(): v for k, v in variables.items()}, cwd=tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def sections(**connections: dict[str, Any]) -> dict[str, Any]:
    return {"connections": {"default": next(iter(connections)), **connections}}


# ---------------------------------------------------------------- defaults


def test_nothing_configured_is_the_database_driver_on_an_absolute_sqlite_file(tmp_path: Path) -> None:
    for settings in (Settings.from_env({}, cwd=tmp_path), Settings.load({}, cwd=tmp_path)):
        conn = settings.connection()
        assert (conn.name, conn.driver, settings.default_connection) == ("database", "database", "database")
        assert conn.options["url"] == default_sqlite_url(tmp_path) == f"sqlite:///{tmp_path / DEFAULT_SQLITE_FILE}"
        assert settings.source == "defaults"
        assert (settings.queues, settings.concurrency, settings.processes) == (("default",), 8, 1)
        assert (settings.sleep, settings.reservation, conn.reservation) == (1.0, 60.0, 60.0)


def test_default_sqlite_url_is_absolute_even_for_a_relative_cwd(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_sqlite_url(Path(".")) == f"sqlite:///{tmp_path.resolve() / DEFAULT_SQLITE_FILE}"
    assert default_sqlite_url() == default_sqlite_url(tmp_path)


# ---------------------------------------------------------------- the environment


@pytest.mark.parametrize("key", sorted(TOP_FIELDS))
def test_every_setting_has_the_variable_jobbridge_plus_its_name(tmp_path: Path, key: str) -> None:
    assert ENV_PREFIX == "JOBBRIDGE_"
    try:
        Settings.from_env({f"JOBBRIDGE_{key.upper()}": "x"}, cwd=tmp_path)
    except ConfigurationError as exc:  # a bad value, or a driver missing its URL: never an unknown name
        assert "unknown" not in str(exc)


def test_environment_values_are_parsed(tmp_path: Path) -> None:
    settings = env(tmp_path, queues=" high, default ", concurrency="4", processes="2", sleep="0.5",
                   reservation="90")
    assert settings.queues == ("high", "default")
    assert (settings.concurrency, settings.processes, settings.sleep) == (4, 2, 0.5)
    assert settings.connection().reservation == 90.0
    assert settings.source == "environment"


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("CONCURRENCY", "abc", "whole number"),
    ("CONCURRENCY", "0", "at least 1"),
    ("PROCESSES", "1.5", "whole number"),
    ("SLEEP", "-1", "at least 0"),
    ("SLEEP", "soon", "number of seconds"),
    ("RESERVATION", "0", "greater than 0"),
    ("QUEUES", "high,,default", "list of names"),
    ("QUEUES", "high,high", "list of names"),
    ("REDIS_RECONNECT", "maybe", "true or false"),
    ("DATABASE_URL", "", "URL"),
])
def test_an_invalid_value_names_the_variable_and_what_is_expected(tmp_path: Path, variable: str, value: str,
                                                                  expected: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"JOBBRIDGE_{variable} must be .*{expected}"):
        Settings.from_env({f"JOBBRIDGE_{variable}": value}, cwd=tmp_path)


def test_an_unknown_variable_is_named_with_the_likely_intended_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"JOBBRIDGE_CONCURENCY \(did you mean JOBBRIDGE_CONCURRENCY\?\)"):
        env(tmp_path, concurency="4")
    with pytest.raises(ConfigurationError, match=r"unknown environment variable JOBBRIDGE_XYZZY;"):
        env(tmp_path, xyzzy="1")


@pytest.mark.parametrize(("driver", "variable"), [
    ("redis", "JOBBRIDGE_REDIS_URL"),
    ("sqs", "JOBBRIDGE_SQS_QUEUE_URL"),
    ("kafka", "JOBBRIDGE_KAFKA_BROKERS"),
])
def test_a_driver_missing_its_required_setting_fails_naming_the_variable(tmp_path: Path, driver: str,
                                                                         variable: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"the {driver} driver needs {variable}"):
        env(tmp_path, driver=driver)


def test_one_driver_variable_declares_one_connection_named_after_it(tmp_path: Path) -> None:
    settings = env(tmp_path, driver="redis", redis_url="redis://127.0.0.1:6379/3", redis_prefix="app:",
                   redis_reconnect="yes", redis_response_timeout_ms="250")
    conn = settings.connection()
    assert list(settings.connections) == ["redis"] and settings.default_connection == "redis"
    assert dict(conn.options) == {"url": "redis://127.0.0.1:6379/3", "prefix": "app:", "reconnect": True,
                                  "response_timeout_ms": 250, "reservation": 60.0}


@pytest.mark.parametrize("name", ["sync", "memory", "database", "Memory"])
def test_a_driver_needing_no_url_is_given_by_name_alone(tmp_path: Path, name: str) -> None:
    settings = env(tmp_path, driver=name)
    assert settings.connection().driver == settings.default_connection == name.lower()


def test_a_url_without_a_driver_picks_its_driver(tmp_path: Path) -> None:
    database = env(tmp_path, database_url="postgresql://app@db/app").connection()
    assert (database.name, database.driver, database.options["url"]) == ("database", "database",
                                                                         "postgresql://app@db/app")
    assert env(tmp_path, redis_url="redis://localhost/1").connection().driver == "redis"


def test_settings_of_two_drivers_without_a_driver_are_ambiguous(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"settings for database and redis .* but no driver"):
        env(tmp_path, database_url="sqlite:///x.db", redis_url="redis://localhost/1")


def test_another_drivers_setting_beside_the_driver_would_be_ignored_so_it_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"JOBBRIDGE_DATABASE_URL configures the database driver, but "
                                                 "JOBBRIDGE_DRIVER selects redis"):
        env(tmp_path, driver="redis", redis_url="redis://localhost/1", database_url="sqlite:///x.db")


@pytest.mark.parametrize(("value", "message"), [
    ("redis://localhost/1", "is a driver's name"),
    ("rabbitmq", "names no driver"),
    ("reddis", "did you mean redis"),
])
def test_the_driver_is_a_known_name_not_a_url(tmp_path: Path, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        env(tmp_path, driver=value)


def test_kafka_brokers_from_a_comma_separated_variable(tmp_path: Path) -> None:
    conn = env(tmp_path, driver="kafka", kafka_brokers="a:9092, b:9092").connection()
    assert conn.options["brokers"] == ("a:9092", "b:9092")
    with pytest.raises(RefusedSetting, match=r"JOBBRIDGE_KAFKA_BROKERS.*nowhere to push"):
        env(tmp_path, driver="kafka", kafka_brokers=" ")


def test_a_connections_section_cannot_be_an_environment_variable(tmp_path: Path) -> None:
    with pytest.raises(RefusedSetting, match=r"JOBBRIDGE_CONNECTIONS.*table of tables"):
        env(tmp_path, connections="primary")


def test_from_env_falls_back_to_a_file_only_when_no_variable_is_set(tmp_path: Path) -> None:
    write(tmp_path / "jobbridge.toml", 'driver = "memory"\n')
    assert Settings.from_env({}, cwd=tmp_path).connection().driver == "memory"
    assert Settings.from_env({"JOBBRIDGE_DRIVER": "sync"}, cwd=tmp_path).connection().driver == "sync"


# ---------------------------------------------------------------- files


def test_the_design_example_file(tmp_path: Path) -> None:
    settings = Settings.from_file(write(tmp_path / "jobbridge.toml", DESIGN_EXAMPLE))
    assert settings.source == str(tmp_path / "jobbridge.toml")
    assert settings.queues == ("high", "default") and settings.default_connection == "primary"
    primary, bulk = settings.connection(), settings.connection("bulk")
    assert (primary.driver, primary.options["url"], primary.reservation) == (
        "database", "postgresql://app@db/app", 60.0)
    assert bulk.driver == "sqs" and bulk.options["region"] == "eu-west-1"
    assert bulk.options["visibility_timeout"] == 60 and bulk.reservation == 60.0


def test_pyproject_tool_jobbridge_is_the_same_as_jobbridge_toml(tmp_path: Path) -> None:
    table = DESIGN_EXAMPLE.replace("[connections", "[tool.jobbridge.connections")
    text = "[project]\nname = 'x'\n\n[tool.jobbridge]\n" + table
    path = write(tmp_path / "pyproject.toml", text)
    assert discover(tmp_path) == path
    assert Settings.load({}, cwd=tmp_path).connection("bulk").driver == "sqs"


def test_a_pyproject_without_tool_jobbridge_counts_as_no_file(tmp_path: Path) -> None:
    path = write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert discover(tmp_path) is None
    assert Settings.load({}, cwd=tmp_path).source == "defaults"
    with pytest.raises(ConfigurationError, match=r"has no \[tool.jobbridge\] table"):
        Settings.from_file(path)


def test_two_files_configuring_jobbridge_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.jobbridge]\nconcurrency = 2\n")
    write(tmp_path / "jobbridge.toml", "concurrency = 4\n")
    with pytest.raises(ConfigurationError, match=r"keep one"):
        Settings.load({}, cwd=tmp_path)


def test_an_unreadable_file_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"is not valid TOML"):
        Settings.from_file(write(tmp_path / "jobbridge.toml", "concurrency = = 4"))
    with pytest.raises(ConfigurationError, match=r"cannot read the configuration file"):
        Settings.from_file(tmp_path / "missing.toml")


def test_file_values_are_typed(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"concurrency \(.*jobbridge.toml\) must be a whole number"):
        Settings.from_file(write(tmp_path / "jobbridge.toml", 'concurrency = "8"\n'))
    with pytest.raises(ConfigurationError, match=r"did you mean concurrency"):
        Settings.from_mapping({"concurency": 8})


def test_a_relative_sqlite_path_is_taken_from_the_files_directory(tmp_path: Path) -> None:
    path = write(tmp_path / "jobbridge.toml", 'database_url = "sqlite:///data/jobs.db"\n')
    assert Settings.from_file(path).connection().options["url"] == f"sqlite:///{tmp_path / 'data' / 'jobs.db'}"
    memory = Settings.from_mapping({"database_url": "sqlite:///:memory:"}).connection()
    assert memory.options["url"] == "sqlite:///:memory:"


# ---------------------------------------------------------------- load: a file, then the environment


def test_load_puts_the_environment_over_the_files_top_level_settings(tmp_path: Path) -> None:
    write(tmp_path / "jobbridge.toml", DESIGN_EXAMPLE)
    settings = Settings.load({"JOBBRIDGE_CONCURRENCY": "2", "JOBBRIDGE_RESERVATION": "30"}, cwd=tmp_path)
    assert settings.concurrency == 2 and settings.queues == ("high", "default")
    assert settings.connection("bulk").reservation == 30.0  # the default for connections that set none
    assert settings.connection("primary").reservation == 60.0  # its own
    assert settings.source == f"{tmp_path / 'jobbridge.toml'} + environment"


def test_load_refuses_a_driver_variable_beside_a_files_connections(tmp_path: Path) -> None:
    write(tmp_path / "jobbridge.toml", DESIGN_EXAMPLE)
    with pytest.raises(ConfigurationError, match=r"JOBBRIDGE_DRIVER and the connections section .* keep one"):
        Settings.load({"JOBBRIDGE_DRIVER": "redis"}, cwd=tmp_path)


def test_load_reads_the_environment_without_a_file(tmp_path: Path) -> None:
    assert Settings.load({"JOBBRIDGE_DRIVER": "memory"}, cwd=tmp_path).source == "environment"


# ---------------------------------------------------------------- the connections section


def test_never_both_a_driver_and_a_connections_section() -> None:
    with pytest.raises(ConfigurationError, match=r"never run and never failed"):
        Settings.from_mapping({"driver": "memory", **sections(a={"driver": "memory"})})


def test_a_one_driver_setting_beside_a_connections_section_is_not_inherited() -> None:
    with pytest.raises(ConfigurationError, match=r"redis_url .* nothing is inherited"):
        Settings.from_mapping({"redis_url": "redis://x/1", **sections(a={"driver": "memory"})})


def test_the_default_must_name_a_declared_connection() -> None:
    data = {"connections": {"default": "primery", "primary": {"driver": "memory"}, "other": {"driver": "sync"}}}
    with pytest.raises(UnknownConnection, match=r"'primery' .*did you mean primary.* not declared"):
        Settings.from_mapping(data)


def test_the_default_is_needed_only_with_more_than_one_connection() -> None:
    assert Settings.from_mapping({"connections": {"only": {"driver": "memory"}}}).default_connection == "only"
    with pytest.raises(ConfigurationError, match=r"but no default"):
        Settings.from_mapping({"connections": {"a": {"driver": "memory"}, "b": {"driver": "sync"}}})
    with pytest.raises(ConfigurationError, match=r"declares no connection"):
        Settings.from_mapping({"connections": {"default": "a"}})


def test_a_connection_without_a_driver_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"connection 'bulk' .* has no driver"):
        Settings.from_mapping(sections(bulk={"url": "sqlite:///x.db"}))


@pytest.mark.parametrize("table", ["memory", 3, ["driver"]])
def test_a_connection_is_a_table(table: object) -> None:
    with pytest.raises(ConfigurationError, match=r"connection 'a' .* must be a table"):
        Settings.from_mapping({"connections": {"a": table}})


def test_nothing_is_inherited_but_the_reservation_default() -> None:
    settings = Settings.from_mapping({"reservation": 30, **sections(
        a={"driver": "redis", "url": "redis://x/1", "prefix": "a:"},
        b={"driver": "redis", "url": "redis://x/1", "prefix": "b:", "reservation": 90},
        c={"driver": "memory"})})
    assert [c.reservation for c in settings.connections.values()] == [30.0, 90.0, 30.0]
    assert "reconnect" not in settings.connection("a").options


def test_an_unknown_connection_key_names_the_accepted_keys() -> None:
    with pytest.raises(ConfigurationError, match=r"'prefx' in connection 'a'.*did you mean prefix.*accepts: "
                                                 "driver, connect_timeout_ms"):
        Settings.from_mapping(sections(a={"driver": "redis", "url": "redis://x/1", "prefx": "a:"}))


VALID: dict[str, dict[str, Any]] = {
    "sync": {},
    "memory": {"reservation": 30},
    "database": {"url": "postgresql://app@db/app", "reservation": 30.5, "connect_timeout": 3,
                 "statement_timeout": 2.5},
    "redis": {"url": "rediss://x/1", "prefix": "q:", "reservation": 30, "connect_timeout_ms": 2000,
              "response_timeout_ms": 250, "reconnect": True, "reconnect_attempts": 5,
              "reconnect_max_backoff_ms": 5000},
    "sqs": {"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "region": "eu-west-1",
            "endpoint": "http://127.0.0.1:4566", "visibility_timeout": 45, "wait_time": 20, "key": "k",
            "secret": "s", "connect_timeout": 2.0, "read_timeout": 3.0, "max_attempts": 4},
    "kafka": {"brokers": ["a:9092", "b:9092"], "group": "workers", "topic_prefix": "jobs.", "lease": 20,
              "locks": "store", "connect_timeout": 2.0, "request_timeout": 4.0},
}


@pytest.mark.parametrize("driver", sorted(VALID))
def test_each_driver_accepts_exactly_its_own_keys(driver: str) -> None:
    assert set(VALID[driver]) == set(drivers.schema_of(driver).fields)
    settings = Settings.from_mapping(sections(a={"driver": driver, **VALID[driver]},
                                              store={"driver": "database", "url": "sqlite:///s.db"}))
    conn = settings.connection("a")
    for key, value in VALID[driver].items():
        assert conn.options[key] == (tuple(value) if isinstance(value, list) else value)
    assert conn.reservation == {"sync": 60.0, "sqs": 45.0, "kafka": 20.0}.get(driver, VALID[driver].get("reservation"))


@pytest.mark.parametrize(("driver", "key", "value", "message"), [
    ("redis", "url", "postgresql://db/app", "takes a redis:// or rediss:// URL"),
    ("database", "url", "redis://x/1", "takes a sqlite://"),
    ("sqs", "queue_url", "ftp://x/q", "takes a https:// or http:// or sqs:// URL"),
    ("redis", "connect_timeout_ms", 0, "at least 1"),
    ("redis", "reconnect", "yes", "true or false"),
    ("sqs", "wait_time", 21, "at most 20"),
    ("kafka", "brokers", "a:9092,a:9092", "list of names"),
])
def test_connection_values_are_checked(driver: str, key: str, value: object, message: str) -> None:
    base = {k: v for k, v in VALID[driver].items() if k != "locks"}
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        Settings.from_mapping(sections(a={"driver": driver, **base, key: value}))


def test_the_sqs_visibility_timeout_defaults_to_the_reservation_in_whole_seconds() -> None:
    conn = Settings.from_mapping({"reservation": 30.2, "driver": "sqs",
                                  "sqs_queue_url": "https://sqs/1/q"}).connection()
    assert conn.options["visibility_timeout"] == 31 and conn.reservation == 31.0


def test_kafka_locks_name_a_declared_shared_store() -> None:
    kafka = {"driver": "kafka", "brokers": "a:9092", "locks": "cache"}
    with pytest.raises(UnknownConnection, match=r"locks in connection 'k' names 'cache'.* not declared"):
        Settings.from_mapping(sections(k=kafka))
    with pytest.raises(ConfigurationError, match=r"a memory connection; the lock store must be shared"):
        Settings.from_mapping(sections(k=kafka, cache={"driver": "memory"}))
    ok = Settings.from_mapping(sections(k=kafka, cache={"driver": "redis", "url": "redis://x/2"}))
    assert ok.connection("k").options["locks"] == "cache"


def test_two_connections_on_one_store_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"connections 'a' and 'b' are one database store"):
        Settings.from_mapping(sections(a={"driver": "database", "url": "sqlite:////tmp/x.db"},
                                       b={"driver": "database", "url": "sqlite:////tmp/x.db"}))
    with pytest.raises(ConfigurationError, match=r"connections 'a' and 'b' are one database store"):
        Settings.from_mapping(sections(a={"driver": "database"}, b={"driver": "database"}))


# ---------------------------------------------------------------- refused by name


@pytest.mark.parametrize("key", sorted(setting_checks.GENERAL))
def test_a_foreign_setting_is_refused_at_the_top_level_and_in_any_connection(key: str) -> None:
    top = setting_checks.TOP_LEVEL.get(key) or setting_checks.GENERAL[key]
    with pytest.raises(RefusedSetting) as caught:
        Settings.from_mapping({key: 1}, source="code")
    assert (caught.value.key, caught.value.why, caught.value.instead) == (key, top.why, top.instead)
    assert all(part in str(caught.value) for part in (repr(key), top.why, top.instead, "in code"))
    with pytest.raises(RefusedSetting, match=rf"setting '{key}' in connection 'a'"):
        Settings.from_mapping(sections(a={"driver": "memory", key: 1}))


@pytest.mark.parametrize(("driver", "key", "instead"), [
    ("sqs", "url", "queue_url"),
    ("sqs", "prefix", "queue_url"),
    ("sqs", "suffix", "queue_url"),
    ("sqs", "retry_after", "visibility_timeout"),
    ("sqs", "reservation", "visibility_timeout"),
    ("kafka", "reservation", "lease"),
    ("kafka", "prefix", "topic_prefix"),
    ("redis", "connection", "database index"),
    ("redis", "visibility_timeout", "reservation"),
    ("redis", "queue", "queue= on the job"),
    ("database", "table", "nothing"),
    ("database", "after_commit", "dispatch(job, transaction=conn)"),
    ("redis", "max_connections", "response_timeout_ms and reconnect"),
    ("database", "pool_size", "concurrency"),
    ("memory", "min_connections", "concurrency"),
    ("database", "block_for", "sleep"),
])
def test_refused_per_driver_with_what_to_write_instead(driver: str, key: str, instead: str) -> None:
    with pytest.raises(RefusedSetting) as caught:
        Settings.from_mapping(sections(a={"driver": driver, **VALID[driver], key: "x"}))
    assert caught.value.key == key and instead in caught.value.instead
    assert "connection 'a'" in str(caught.value)


@pytest.mark.parametrize(("table", "key", "why"), [
    ({"key": "k"}, "key", "sign requests together"),
    ({"secret": "s"}, "secret", "sign requests together"),
    ({"key": "k", "secret": "s"}, "key", "no region"),
])
def test_sqs_credentials_are_whole_and_regional(table: dict[str, str], key: str, why: str) -> None:
    conn = {"driver": "sqs", "queue_url": "https://sqs/1/q", **table}
    with pytest.raises(RefusedSetting, match=why) as caught:
        Settings.from_mapping(sections(a=conn))
    assert caught.value.key == key


def test_an_empty_brokers_list_is_refused() -> None:
    with pytest.raises(RefusedSetting, match=r"'brokers' in connection 'a'"):
        Settings.from_mapping(sections(a={"driver": "kafka", "brokers": []}))


@pytest.mark.parametrize(("key", "instead"), [
    ("workers", "concurrency"), ("poll_interval_ms", "sleep"), ("default_queue", "queues"),
    ("broker_url", "jobbridge.compat"), ("url", "database_url"), ("connection", "driver"),
    ("kafka_locks", "connections section"), ("sqs_visibility_timeout", "reservation"),
])
def test_foreign_top_level_names_say_what_to_write(key: str, instead: str) -> None:
    with pytest.raises(RefusedSetting, match=re.escape(instead)):
        Settings.from_mapping({key: "x"})


def test_a_refused_variable_names_the_variable_to_set_instead(tmp_path: Path) -> None:
    with pytest.raises(RefusedSetting, match=r"'JOBBRIDGE_WORKERS' in the environment .* JOBBRIDGE_CONCURRENCY"):
        env(tmp_path, workers="4")
    with pytest.raises(RefusedSetting, match=r"JOBBRIDGE_RESERVATION$"):
        env(tmp_path, retry_after="90")


def test_a_driver_modules_own_refusals_are_added(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(drivers.DRIVERS["memory"].settings)
    refused = {"shards": Refusal("the memory driver has one store", "nothing")}
    monkeypatch.setattr(module, "SCHEMA", dataclasses.replace(module.SCHEMA, refused=refused))
    with pytest.raises(RefusedSetting, match=r"one store"):
        Settings.from_mapping(sections(a={"driver": "memory", "shards": 2}))


#: a process in which no client library (nor SQLAlchemy) can be imported, as when none is installed
WITHOUT_CLIENTS = """
import sys
for name in ("redis", "boto3", "botocore", "confluent_kafka", "psycopg", "pymysql", "sqlalchemy"):
    sys.modules[name] = None
from jobbridge.drivers import load
from jobbridge.errors import ConfigurationError
from jobbridge.settings import Settings

def attempt(step):
    try:
        step()
        print("accepted")
    except ConfigurationError as exc:
        print(exc)

every = {"default": "db", "db": {"driver": "database", "url": "postgresql://app@db/app"},
         "cache": {"driver": "redis", "url": "redis://cache/1", "reconnect": True},
         "bulk": {"driver": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "wait_time": 5},
         "events": {"driver": "kafka", "brokers": "a:9092", "locks": "cache"},
         "mem": {"driver": "memory"}, "now": {"driver": "sync"}}
attempt(lambda: Settings.from_mapping({"connections": every}))
attempt(lambda: Settings.from_mapping({"connections": {"c": {**every["cache"], "pool_size": 9}}}))
attempt(lambda: Settings.from_mapping({"connections": {"k": {**every["events"], "topic": "t"}}}))
attempt(lambda: Settings.from_mapping({"driver": "sqs", "sqs_queue_url": "https://sqs/1/q", "sqs_key": "k"}))
attempt(lambda: load("redis"))
attempt(lambda: load("kafka"))
print(sorted(name for name in ("redis", "boto3", "confluent_kafka", "psycopg", "sqlalchemy") if sys.modules.get(name)))
"""


def test_every_drivers_settings_are_checked_without_its_client_library() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_CLIENTS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 7, done.stdout
    assert lines[0] == "accepted"
    assert "'pool_size'" in lines[1] and "response_timeout_ms and reconnect" in lines[1]
    assert "'topic'" in lines[2] and "topic_prefix" in lines[2]
    assert "'sqs_key'" in lines[3] and "sign requests together" in lines[3]
    assert "pip install 'jobbridge[redis]'" in lines[4] and "pip install 'jobbridge[kafka]'" in lines[5]
    assert lines[6] == "[]", "a client library was imported by the settings checks"


# ---------------------------------------------------------------- reservations


@pytest.mark.parametrize("value", [1.99, 0.5])
def test_check_reservations_refuses_what_the_heartbeat_cannot_keep_alive(value: float) -> None:
    with pytest.raises(ConfigurationError, match=rf"connection 'a' has a reservation of {value:g} s.*every "
                                                 "quarter of it"):
        Settings.from_mapping(sections(a={"driver": "memory", "reservation": value}))


def test_check_reservations_on_settings_built_in_code() -> None:
    conn = ConnectionSettings("fast", "memory", {"reservation": -1})
    settings = Settings({"fast": conn}, "fast", reservation=60)
    with pytest.raises(ConfigurationError, match=r"connection 'fast' has a reservation of -1 s"):
        settings.check_reservations()
    Settings({"ok": ConnectionSettings("ok", "memory", {"reservation": 2})}, "ok").check_reservations()


@pytest.mark.parametrize(("driver", "key"), [("sqs", "visibility_timeout"), ("kafka", "lease")])
def test_the_reservation_by_its_drivers_name_is_checked_too(driver: str, key: str) -> None:
    base = {k: v for k, v in VALID[driver].items() if k != "locks"}
    with pytest.raises(ConfigurationError, match=r"connection 'a' has a reservation of 1 s"):
        Settings.from_mapping(sections(a={"driver": driver, **base, key: 1}))


# ---------------------------------------------------------------- the model


def test_connection_lookup_is_by_declared_name_only() -> None:
    settings = Settings.from_mapping(sections(primary={"driver": "memory"}, bulk={"driver": "sync"}))
    assert settings.connection().name == "primary" and settings.connection("bulk").driver == "sync"
    with pytest.raises(UnknownConnection, match=r"no connection is named 'blk' .*declared: 'primary', 'bulk'"):
        settings.connection("blk")


def test_settings_are_immutable_and_consistent() -> None:
    settings = Settings.from_mapping({"driver": "memory"})
    assert settings.source == "code"
    with pytest.raises(TypeError):
        settings.connection().options["reservation"] = 1  # type: ignore[index]
    with pytest.raises(UnknownConnection):
        Settings({"a": ConnectionSettings("a", "memory")}, "b")
    assert ConnectionSettings("a", "memory").reservation == 60.0


# ---------------------------------------------------------------- credentials never shown

PASSWORD = "hunter2"


@pytest.mark.parametrize(("variables", "says"), [
    ({"database_url": f"postgres:{PASSWORD}@db/app"}, "must be a URL"),
    ({"database_url": f"host=db user=app password={PASSWORD}"}, "must be a URL"),
    ({"database_url": f"redis://:{PASSWORD}@cache:6379/0"}, "takes a sqlite://"),
    ({"redis_url": f"postgresql://app:{PASSWORD}@db/app?password={PASSWORD}"}, "takes a redis://"),
    ({"driver": f"postgresql://app:{PASSWORD}@db/app"}, "a driver's name"),
    ({"driver": "sqs", "sqs_queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "sqs_key": "k",
      "sqs_secret": "", "sqs_region": "eu-west-1"}, "non-empty string"),
])
def test_an_error_never_quotes_a_password(tmp_path: Path, variables: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as info:
        env(tmp_path, **variables)
    assert PASSWORD not in str(info.value) and "***" in str(info.value)


@pytest.mark.parametrize("table", [f"postgresql://app:{PASSWORD}@db/app", [f"redis://:{PASSWORD}@cache/0"]])
def test_a_url_where_a_table_belongs_is_masked_in_the_error(table: object) -> None:
    with pytest.raises(ConfigurationError, match="must be a table") as info:
        Settings.from_mapping({"connections": {"primary": table}})
    assert PASSWORD not in str(info.value)


def test_a_secret_that_fails_validation_is_not_shown_at_all() -> None:
    with pytest.raises(ConfigurationError, match="never shown") as info:
        Settings.from_mapping(sections(bulk={"driver": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q",
                                             "region": "eu-west-1", "key": "k", "secret": 20240601}))
    assert "20240601" not in str(info.value)


def test_reprs_mask_every_credential() -> None:
    settings = Settings.from_mapping({
        "connections": {"default": "primary",
                        "primary": {"driver": "database", "url": f"postgresql://app:{PASSWORD}@db/app"},
                        "cache": {"driver": "redis", "url": f"redis://cache:6379/2?password={PASSWORD}"}},
        "results": f"redis://:{PASSWORD}@cache:6379/3"})
    shown = repr(settings)
    assert PASSWORD not in shown, shown
    assert "'postgresql://app:***@db/app'" in shown and "'redis://cache:6379/2?password=***'" in shown
    assert "results='redis://:***@cache:6379/3'" in shown and "default_connection='primary'" in shown
    conn = ConnectionSettings("bulk", "sqs", {"queue_url": "https://sqs.x/1/q", "key": "AKIA", "secret": PASSWORD})
    assert PASSWORD not in repr(conn) and "'secret': ***" in repr(conn) and "'reservation': 60.0" in repr(conn)


# ---------------------------------------------------------------- the manual


def test_the_manual_names_every_setting_and_every_refusal() -> None:
    text = DOCS.read_text()
    names = [*TOP_FIELDS, "connections", *(f"JOBBRIDGE_{k.upper()}" for k in TOP_FIELDS)]
    schemas = [drivers.schema_of(driver) for driver in drivers.DRIVERS]
    names += [key for schema in schemas for key in schema.fields]
    names += [*setting_checks.GENERAL, *setting_checks.TOP_LEVEL]
    names += [key for schema in schemas for key in schema.refused]
    missing = sorted({name for name in names if f"`{name}`" not in text})
    assert not missing, f"docs/configuration.md does not mention {missing}"
    assert set(DRIVER_KEYS) <= set(TOP_FIELDS)
