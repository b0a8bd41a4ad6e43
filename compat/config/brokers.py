"""A Celery broker URL (and its transport options) as jobbridge settings: which driver, which URL.

==========================================  ==================================================
Celery broker URL                           jobbridge
==========================================  ==================================================
``redis://``, ``rediss://``                 driver redis, ``redis_url``
``sqla+<db-url>``, ``db+<db-url>``          driver database, ``database_url`` = ``<db-url>``
``sqlite://``, ``postgresql://``, ...       driver database, ``database_url``
``memory://``                               driver memory (this process only)
``sqs://``                                  driver sqs; the queue URL from predefined_queues
``confluentkafka://``, ``kafka://``          driver kafka, ``kafka_brokers``
``amqp://``, ``pyamqp://``, ...             refused: jobbridge has no AMQP driver
anything else                               refused, naming the schemes that work
==========================================  ==================================================
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured, RefusedFeature

_DATABASE = ("sqlite", "postgresql", "postgres", "mysql", "mariadb")
_WORKING = ("redis://host:6379/0, rediss://..., sqla+postgresql://user@host/db (or any SQLAlchemy URL; "
            "sqla+sqlite:///jobs.sqlite3), sqs://, memory://")
_AMQP = ("jobbridge has no AMQP driver, so RabbitMQ cannot hold its jobs. Point broker_url at another "
         "store: " + _WORKING + "; the database driver gives the same at-least-once delivery with no broker "
         "to run")
_REFUSED_SCHEMES = {
    "amqp": _AMQP, "amqps": _AMQP, "pyamqp": _AMQP, "librabbitmq": _AMQP, "qpid": _AMQP,
    "sentinel": "Redis Sentinel is not supported by the redis driver; point broker_url at the master "
                "(redis://host:6379/0)",
}

# Transport options per driver: honoured as a jobbridge key, or accepted (changing nothing), with why.
_REDIS_OPTIONS: dict[str, str | None] = {
    "global_keyprefix": "redis_prefix",
    "visibility_timeout": None,  # the reservation is a short lease renewed while the task runs
    "fanout_prefix": None, "fanout_patterns": None,  # no broadcast queues
    "queue_order_strategy": None,  # queues are always tried in the order the worker lists them
    "max_connections": None, "health_check_interval": None, "retry_on_timeout": None,
    "socket_keepalive": None, "socket_timeout": None, "socket_connect_timeout": None,
    "max_retries": None, "interval_start": None, "interval_step": None, "interval_max": None,
}
_SQS_OPTIONS: dict[str, str | None] = {
    "region": "sqs_region", "predefined_queues": None, "visibility_timeout": None,
    "wait_time_seconds": None, "polling_interval": None, "queue_name_prefix": None,
    "max_retries": None, "interval_start": None, "interval_step": None, "interval_max": None,
}
_COMMON_OPTIONS: dict[str, str | None] = {
    "max_retries": None, "interval_start": None, "interval_step": None, "interval_max": None,
    "visibility_timeout": None, "polling_interval": None,
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
              "confluentkafka": "kafka", "kafka": "kafka"}
    if base in simple:
        return simple[base]
    raise RefusedFeature(f"broker_url {quoted(url)} is refused: no jobbridge driver stores jobs in "
                         f"{scheme}://. Use one of {_WORKING}")


def jobbridge_backend(url: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The jobbridge settings that name the backend for ``url`` and its transport options."""
    check_url(url)
    driver = driver_of(url)
    opts = dict(options or {})
    if driver == "redis":
        return {"driver": "redis", "redis_url": url, **_options(opts, _REDIS_OPTIONS, "redis")}
    if driver == "database":
        _options(opts, _COMMON_OPTIONS, "database")
        scheme = scheme_of(url)
        inner = url.split("+", 1)[1] if scheme.split("+", 1)[0] in ("sqla", "db") else url
        return {"driver": "database", "database_url": inner}
    if driver == "memory":
        _options(opts, _COMMON_OPTIONS, "memory")
        return {"driver": "memory"}
    if driver == "kafka":
        _options(opts, _COMMON_OPTIONS, "kafka")
        hosts = url.split("://", 1)[1].strip("/")
        return {"driver": "kafka", "kafka_brokers": [h for h in hosts.split(",") if h]}
    return _sqs(url, opts)


def _options(opts: Mapping[str, Any], known: Mapping[str, str | None], driver: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise RefusedFeature(
                f"broker_transport_options[{key!r}] is not honoured by the jobbridge {driver} driver{hint}; "
                f"it reads {', '.join(sorted(k for k, v in known.items() if v)) or 'none of them'} and accepts "
                f"{', '.join(sorted(k for k, v in known.items() if not v))} (which change nothing). Remove it")
        target = known[key]
        if target is not None:
            out[target] = value
    return out


def _sqs(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    out = _options(opts, _SQS_OPTIONS, "sqs")
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
