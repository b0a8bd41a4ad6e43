"""A Celery broker URL (and its transport options) as jobbridge settings: which driver, which URL.

==========================================  ==================================================
Celery broker URL                           jobbridge
==========================================  ==================================================
``redis://``, ``rediss://``                 driver redis, ``redis_url``
``sqla+<db-url>``, ``db+<db-url>``          driver database, ``database_url`` = ``<db-url>``
``sqlite://``, ``postgresql://``, ...       driver database, ``database_url``
``django://ALIAS``                          driver database on a database of Django's ``DATABASES``
``memory://``                               driver memory (this process only)
``sqs://``                                  driver sqs; the queue URL from predefined_queues
``confluentkafka://``, ``kafka://``          driver kafka, ``kafka_brokers``
``amqp://``, ``amqps://``, ``pyamqp://``      driver amqp on RabbitMQ, ``url``; its failed store and
                                            unique locks in the result_backend's store (redis or a
                                            database), which it therefore needs
``librabbitmq://``, ``qpid://``             refused: use amqp:// (the same RabbitMQ)
anything else                               refused, naming the schemes that work
==========================================  ==================================================

Its transport options, and ``broker_connection_timeout``, become the driver's
own settings, or are refused saying why (compat/config/transport_options.py);
so do the broker connection settings (heartbeat, login, TLS, pool, retries at
start: compat/config/broker_connection.py).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured, RefusedFeature
from . import broker_connection, transport_options

_DATABASE = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "django")
_WORKING = ("redis://host:6379/0, rediss://..., amqp://user:password@host:5672/vhost, sqla+postgresql://user@host/db "
            "(or any SQLAlchemy URL; sqla+sqlite:///jobs.sqlite3), sqs://, memory://")
_AMQP = ("jobbridge speaks AMQP 0-9-1 to RabbitMQ through kombu's py-amqp transport only; write the same "
         "broker as amqp://user:password@host:5672/vhost (amqps:// for TLS)")
_REFUSED_SCHEMES = {
    "librabbitmq": _AMQP, "qpid": _AMQP,
    "sentinel": "Redis Sentinel is not supported by the redis driver; point broker_url at the master "
                "(redis://host:6379/0)",
}

#: each driver's setting for how long connecting may take, which broker_connection_timeout (seconds) sets
_CONNECT_TIMEOUT: dict[str, tuple[str, float, bool]] = {
    "redis": ("redis_connect_timeout_ms", 1000, True), "database": ("database_connect_timeout", 1, True),
    "sqs": ("sqs_connect_timeout", 1, False), "kafka": ("kafka_connect_timeout", 1, False),
    "amqp": ("connect_timeout", 1, False),
}


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def check_url(url: Any) -> None:
    """Refuse a broker URL at once (when it is set), before anything is built from it."""
    if not isinstance(url, str) or "://" not in url:
        raise ImproperlyConfigured(f"broker_url must be a URL (scheme://...), not {quoted(url)}; use one of {_WORKING}")
    if ";" in url:
        raise RefusedFeature(f"broker_url {quoted(url)} lists several brokers for failover; jobbridge connects to "
                             "one store per connection: give one URL")
    driver_of(url)


def driver_of(url: str) -> str:
    scheme = scheme_of(url)
    base = scheme.split("+", 1)[0]
    if scheme in _REFUSED_SCHEMES:
        raise RefusedFeature(f"broker_url {quoted(url)} is refused: {_REFUSED_SCHEMES[scheme]}")
    if base in ("sqla", "db") or base in _DATABASE:
        return "database"
    simple = {"redis": "redis", "rediss": "redis", "memory": "memory", "sqs": "sqs",
              "confluentkafka": "kafka", "kafka": "kafka", "amqp": "amqp", "amqps": "amqp", "pyamqp": "amqp"}
    if base in simple:
        return simple[base]
    raise RefusedFeature(f"broker_url {quoted(url)} is refused: no jobbridge driver stores jobs in "
                         f"{scheme}://. Use one of {_WORKING}")


def jobbridge_backend(url: str, options: Mapping[str, Any] | None,
                      connect_timeout: Any = None, shared_store: str | None = None,
                      connection: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The jobbridge settings that name the backend for ``url``, with its transport options and
    ``broker_connection_timeout`` (``connect_timeout``, seconds; a transport option's own wins).

    ``shared_store`` is the result backend's store URL: on RabbitMQ it also holds the failed jobs
    and unique locks (`_amqp`). ``connection`` holds the broker connection settings the app set
    (`broker_connection.given`): the amqp driver's heartbeat, login and TLS, and on every driver
    the retries at a worker's start; another driver refuses what it cannot honour."""
    check_url(url)
    driver = driver_of(url)
    opts = dict(options or {})
    given = dict(connection or {})
    retries = broker_connection.start_retries(given)
    if driver == "amqp":
        return {**_amqp(url, opts, connect_timeout, shared_store, given), **retries}
    broker_connection.refused_elsewhere(given, driver)
    if driver == "redis":
        backend = {"driver": "redis", "redis_url": url, **_options(opts, transport_options.REDIS, "redis")}
    elif driver == "database":
        scheme = scheme_of(url)
        inner = url.split("+", 1)[1] if scheme.split("+", 1)[0] in ("sqla", "db") else url
        backend = {"driver": "database", "database_url": inner, **_options(opts, transport_options.COMMON, driver)}
    elif driver == "memory":
        backend = {"driver": "memory", **_options(opts, transport_options.COMMON, "memory")}
    elif driver == "kafka":
        hosts = url.split("://", 1)[1].strip("/")
        backend = {"driver": "kafka", "kafka_brokers": [h for h in hosts.split(",") if h],
                   **_options(opts, transport_options.COMMON, "kafka")}
    else:
        backend = _sqs(url, opts)
    return {**_connect_timeout(backend, connect_timeout), **backend, **retries}


def _amqp(url: str, opts: Mapping[str, Any], connect_timeout: Any, shared_store: str | None,
          connection: Mapping[str, Any]) -> dict[str, Any]:
    """RabbitMQ as connection ``broker``, its failed store and unique locks in connection ``shared``.

    RabbitMQ cannot list or retry failed jobs nor hold a lock, so the amqp driver keeps them in a
    redis or database store: the one result_backend names. Without one, boot is refused here,
    naming what to write, rather than a failed job having nowhere to go.
    """
    if not shared_store or shared_store == "memory://":
        raise ImproperlyConfigured(
            f"broker_url {quoted(url)} is RabbitMQ, which cannot keep failed jobs or unique-job locks; jobbridge "
            "keeps them in the result backend's store, so set result_backend to redis://host:6379/1 or a database "
            "URL (sqla+postgresql://user@host/db)")
    broker: dict[str, Any] = {"driver": "amqp", "url": url, "locks": "shared", **_options(opts, transport_options.AMQP,
                                                                                          "amqp")}
    broker.update(_connect_timeout({"driver": "amqp"}, connect_timeout))
    broker.update(broker_connection.amqp_connection(connection))
    store = "redis" if scheme_of(shared_store).startswith("redis") else "database"
    return {"connections": {"default": "broker", "broker": broker, "shared": {"driver": store, "url": shared_store}}}


def _connect_timeout(backend: Mapping[str, Any], seconds: Any) -> dict[str, Any]:
    """broker_connection_timeout as the driver's connect timeout; SQLite and memory have nothing to connect to."""
    target = _CONNECT_TIMEOUT.get(str(backend["driver"]))
    on_sqlite = str(backend.get("database_url", "")).lower().startswith("sqlite")
    if seconds is None or target is None or on_sqlite:
        return {}
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < math.inf:
        raise ImproperlyConfigured(f"broker_connection_timeout is a positive number of seconds, not {quoted(seconds)}")
    key, scale, whole = target
    return {key: math.ceil(seconds * scale) if whole else float(seconds)}


def _options(opts: Mapping[str, Any], known: Mapping[str, transport_options.Option], driver: str) -> dict[str, Any]:
    """The settings the transport options set; one jobbridge cannot honour is refused, saying why."""
    out: dict[str, Any] = {}
    for key, value in opts.items():
        option = known.get(key)
        if option is None:
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            honoured, accepted = transport_options.known_options(known)
            raise RefusedFeature(
                f"broker_transport_options[{key!r}] is not honoured by the jobbridge {driver} driver{hint}; "
                f"it reads {', '.join(honoured) or 'none of them'} and accepts "
                f"{', '.join(accepted)} (those that change nothing, or only some values). Remove it")
        if option.ok is not None and not option.ok(value):
            raise RefusedFeature(f"broker_transport_options[{key!r}] = {quoted(value, key)} is refused on the "
                                 f"jobbridge {driver} driver: {option.why}. Write instead: {option.instead}")
        if option.to is not None:
            out.update(option.to(value))
    return out


def _sqs(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    out = _options(opts, transport_options.SQS, "sqs")
    queues = opts.get("predefined_queues") or {}
    if not isinstance(queues, Mapping) or len(queues) != 1:
        raise RefusedFeature(
            "broker_url sqs:// needs the queue's URL: jobbridge's sqs driver uses one SQS queue, given by "
            "URL. Write broker_transport_options = {'predefined_queues': {'celery': {'url': "
            "'https://sqs.<region>.amazonaws.com/<account>/<queue>'}}, 'region': '<region>'} with exactly "
            "one queue (or set JOBBRIDGE_SQS_QUEUE_URL)")
    (entry,) = queues.values()
    if not isinstance(entry, Mapping) or "url" not in entry:
        raise ImproperlyConfigured("each predefined_queues entry needs a 'url'")
    out["sqs_queue_url"] = entry["url"]
    parts = urlsplit(url)
    key = entry.get("access_key_id") or (unquote(parts.username) if parts.username else None)
    secret = entry.get("secret_access_key") or (unquote(parts.password) if parts.password else None)
    if key:
        out["sqs_key"] = key
    if secret:
        out["sqs_secret"] = secret
    return {"driver": "sqs", **out}
