"""`jobbridge.redaction`: every form a credential takes in a URL, masked; and every place a URL is quoted uses it."""

from __future__ import annotations

from typing import Any

import pytest

from jobbridge.drivers import driver_for_url
from jobbridge.drivers.database.engine import describe, parse_url
from jobbridge.drivers.redis.connection import redacted
from jobbridge.drivers.redis.settings import parse_settings
from jobbridge.errors import ConfigurationError
from jobbridge.redaction import MASK, is_secret_key, mask_url, quoted
from jobbridge.results import open_store
from jobbridge.testing.clock import FixedClock

SECRET = "hunter2"


@pytest.mark.parametrize(("url", "shown"), [
    # the userinfo password, in every scheme and host form
    ("postgresql://app:hunter2@db:5432/app", "postgresql://app:***@db:5432/app"),
    ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
    ("rediss://default:hunter2@cache:6380/1", "rediss://default:***@cache:6380/1"),
    ("mysql+pymysql://root:hunter2@127.0.0.1/test", "mysql+pymysql://root:***@127.0.0.1/test"),
    ("redis://u:hunter2@[::1]:6379/0", "redis://u:***@[::1]:6379/0"),
    ("postgresql://u:hunter2@[2001:db8::7]/app", "postgresql://u:***@[2001:db8::7]/app"),
    ("postgresql://u:hunter%32@db/app", "postgresql://u:***@db/app"),  # percent-encoded
    # a password holding what ends a userinfo: masked whole, up to the last @
    ("redis://:hun@ter2@cache/0", "redis://:***@cache/0"),
    ("redis://:hun/ter@2@cache/0", "redis://:***@cache/0"),
    ("postgresql://u:hun?ter#2@db/app", "postgresql://u:***@db/app"),
    # query-string credentials, any case, any separator
    ("postgresql://app@db/app?password=hunter2", "postgresql://app@db/app?password=***"),
    ("postgresql://db/app?sslmode=require&PassWord=hunter2&x=1", "postgresql://db/app?sslmode=require&PassWord=***&x=1"),
    ("postgresql://db/app?sslpassword=hunter2", "postgresql://db/app?sslpassword=***"),
    ("redis://cache/0?pass=hunter2", "redis://cache/0?pass=***"),
    ("kafka://b:9092?sasl.password=hunter2&sasl.username=u", "kafka://b:9092?sasl.password=***&sasl.username=u"),
    ("sqs://q?aws_secret_access_key=hunter2", "sqs://q?aws_secret_access_key=***"),
    ("https://h/x?token=hunter2;secret=hunter2", "https://h/x?token=***"),
    ("https://h/x?X-Amz-Signature=hunter2&X-Amz-Security-Token=hunter2",
     "https://h/x?X-Amz-Signature=***&X-Amz-Security-Token=***"),
    ("redis://cache/0?api_key=hunter2", "redis://cache/0?api_key=***"),
    ("postgresql://db/app;password=hunter2", "postgresql://db/app;password=***"),
    ("postgresql://u:hunter2@db/app?password=hunter2", "postgresql://u:***@db/app?password=***"),
    ("postgresql://db:5432/app?password=hun@ter2", "postgresql://db:***"),  # an @ in the query: masked wide
    ("redis://[::1]:6379/0?password=hunter2", "redis://[::1]:6379/0?password=***"),
    # a libpq keyword DSN, quoted values and spaces around = included
    ("host=db user=app password=hunter2 dbname=app", "host=db user=app password=*** dbname=app"),
    ("host=db password = hunter2", "host=db password = ***"),
    ("host=db password='hun ter\\'2' dbname=app", "host=db password=*** dbname=app"),
    ("host=db password='hunter2 never closed", "host=db password=***"),
    ("PASSWORD=hunter2", "PASSWORD=***"),
    # text that does not parse as a URL at all
    ("postgres:hunter2@db/app", "postgres:***@db/app"),
    ("redis:/:hunter2@cache", "redis:***@cache"),
    ("app:hunter2@db", "app:***@db"),
    ("redis://:hunter2@[::1/0", "redis://:***@[::1/0"),
    ("postgresql://u:hunter2@db:port/app", "postgresql://u:***@db:port/app"),
    ("cannot parse 'postgres:hunter2@db'", "cannot parse 'postgres:***@db'"),  # a message quoting a URL
])
def test_every_form_of_credential_is_masked(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert SECRET not in mask_url(url) and "hunter%32" not in mask_url(url)


@pytest.mark.parametrize("url", [
    "sqlite:////srv/app/jobs.sqlite3", "sqlite:///relative.db", "memory://", "sync://",
    "redis://cache:6379/0", "redis://[::1]:6379/0", "postgresql://app@db:5432/app?application_name=web",
    "kafka://b1:9092,b2:9092", "https://sqs.eu-west-1.amazonaws.com/123/jobs", "sqlite:////home/a@b/jobs.db",
    "redis://user:@cache/0", "postgresql://db/app?password=", "", "@", ":@", "no url here", "http://[::1",
])
def test_what_holds_no_credential_is_left_as_it_is(url: str) -> None:
    assert mask_url(url) == url


def test_mask_is_three_stars_and_never_grows_with_the_secret() -> None:
    assert MASK == "***"
    assert mask_url("redis://:" + "x" * 500 + "@h") == "redis://:***@h"


@pytest.mark.parametrize("key", ["password", "sslpassword", "sasl.password", "PASSWD", "pwd", "secret",
                                 "aws_secret_access_key", "token", "X-Amz-Security-Token", "api_key", "auth",
                                 "sig", "credentials", "private_key", "jwt", "broker_password"])
def test_credential_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["url", "host", "user", "username", "region", "prefix", "reservation",
                                 "queue_url", "brokers", "topic_prefix", "sslmode", "application_name"])
def test_keys_that_are_no_credential(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(("value", "key", "shown"), [
    ("redis://:hunter2@h/0", "", "'redis://:***@h/0'"),
    ("hunter2", "secret", MASK),
    (12345, "sqs_secret", MASK),
    (None, "", "None"),
    (3, "", "3"),
    (["redis://:hunter2@h/0"], "", "['redis://:***@h/0']"),
    ({"url": "postgresql://u:hunter2@h/db"}, "", "{'url': 'postgresql://u:***@h/db'}"),
])
def test_quoted_is_a_repr_with_credentials_masked(value: Any, key: str, shown: str) -> None:
    assert quoted(value, key) == shown


# -- every place that quotes a URL ------------------------------------------------------------


def _error(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises((ConfigurationError, ValueError)) as info:
        call(*args, **kwargs)
    text = str(info.value)
    assert SECRET not in text, text
    return text


def test_driver_for_url_masks_the_url_it_cannot_place() -> None:
    assert "'ftp://u:***@h/x?password=***'" in _error(driver_for_url, "ftp://u:hunter2@h/x?password=hunter2")


def test_the_result_store_masks_the_url_it_cannot_open() -> None:
    text = _error(open_store, "ftp://u:hunter2@h/x", clock=FixedClock(0.0))
    assert "'ftp://u:***@h/x'" in text


@pytest.mark.parametrize("url", ["postgres:hunter2@db/app", "postgresql://u:hunter2@db:port/app",
                                 "oracle://u:hunter2@db/app", "sqlite://:hunter2@/:memory:"])
def test_the_database_url_errors_mask_the_password(url: str) -> None:
    assert "***" in _error(parse_url, url)


def test_the_database_description_masks_the_query_string_too() -> None:
    shown = describe(parse_url("postgresql://app:hunter2@db:5432/app?password=hunter2&application_name=w"))
    assert shown == "postgresql at postgresql://app@db:5432/app?application_name=w&password=***"


def test_the_redis_description_and_settings_mask_the_password() -> None:
    assert redacted("redis://:hunter2@cache:6379/0?password=hunter2") == "redis://:***@cache:6379/0?password=***"
    assert "'http://:***@cache/0'" in _error(parse_settings, {"url": "http://:hunter2@cache/0"})


def test_the_celery_facade_masks_broker_and_backend_urls() -> None:
    from jobbridge.compat.config.backends import results_url
    from jobbridge.compat.config.brokers import check_url, driver_of
    from jobbridge.compat.config.settings import Conf
    from jobbridge.compat.exceptions import ImproperlyConfigured, RefusedFeature

    for call, value in [(driver_of, "librabbitmq://u:hunter2@rabbit//"), (driver_of, "zookeeper://u:hunter2@z/"),
                        (check_url, "redis:hunter2@h"), (check_url, "redis://:hunter2@a;redis://:hunter2@b"),
                        (results_url, "rpc://u:hunter2@h"), (results_url, "couchdb://u:hunter2@h/db")]:
        with pytest.raises((ImproperlyConfigured, RefusedFeature)) as info:
            call(value)
        assert SECRET not in str(info.value), str(info.value)
    conf = Conf()
    for key, value in [("broker_password", "hunter2"), ("broker_read_url", "redis://:hunter2@h/0")]:
        with pytest.raises(RefusedFeature) as refused:
            conf.set(key, value)
        assert SECRET not in str(refused.value) and key in str(refused.value)
    conf.set("broker_url", "redis://:hunter2@cache/0?password=hunter2")
    assert SECRET not in conf.humanize() and "broker_url: 'redis://:***@cache/0?password=***'" in conf.humanize()
