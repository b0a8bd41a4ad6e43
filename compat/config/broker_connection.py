"""Celery's broker connection settings, per broker: each honoured as the driver's own setting, or refused.

Celery reads ``broker_heartbeat``, ``broker_heartbeat_checkrate``, ``broker_login_method``,
``broker_use_ssl`` and ``broker_pool_limit`` for its AMQP connection; on jobbridge they
configure the amqp driver's connection, and on any other driver only a value that changes
nothing passes: a heartbeat set on a redis broker would look set and be no heartbeat.

``broker_connection_retry_on_startup`` (with ``broker_connection_max_retries`` as its bound)
is honoured on every driver as the ``start_retries`` setting: a worker that cannot reach its
store at start tries again with backoff, that many times, before it exits. Unset, a worker
exits at once when its store is down at start. Once running, a worker never gives up on its
store, so a bound without ``broker_connection_retry_on_startup = True`` is refused.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Mapping
from typing import Any

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured, RefusedFeature

#: the settings read here (each only when the app set it)
NAMES = ("broker_heartbeat", "broker_heartbeat_checkrate", "broker_login_method", "broker_use_ssl",
         "broker_pool_limit", "broker_connection_retry_on_startup", "broker_connection_max_retries")
#: Celery's broker_connection_max_retries when unset; None or 0 retries for ever
DEFAULT_MAX_RETRIES = 100
#: "for ever": more start retries than a worker can live through at the longest backoff
FOREVER = 1_000_000
#: the login methods py-amqp speaks
LOGIN_METHODS = ("AMQPLAIN", "PLAIN", "EXTERNAL")
#: broker_use_ssl keys, as Celery writes them, and the amqp driver's settings they set
_TLS_KEYS = {"ca_certs": "tls_ca_file", "certfile": "tls_cert_file", "keyfile": "tls_key_file",
             "cert_reqs": "tls_verify", "server_hostname": "tls_server_hostname"}
_CERT_REQS = {ssl.CERT_REQUIRED: True, ssl.CERT_NONE: False, "required": True, "none": False,
              "CERT_REQUIRED": True, "CERT_NONE": False}


def given(conf: Any) -> dict[str, Any]:
    """The connection settings the app set (a default left alone is not read)."""
    return {name: conf[name] for name in NAMES if conf.value_set_for(name)}


def start_retries(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``start_retries`` from broker_connection_retry_on_startup and broker_connection_max_retries (any driver)."""
    on = settings.get("broker_connection_retry_on_startup")
    if "broker_connection_max_retries" in settings:
        bound = settings["broker_connection_max_retries"]
        if bound not in (None, 0) and on is not True:
            raise RefusedFeature(
                f"Celery setting broker_connection_max_retries = {quoted(bound)} is refused without "
                "broker_connection_retry_on_startup = True: a running worker never gives up on its store (it retries "
                "with backoff for as long as it runs), so the bound applies only to the retries at start. Set "
                "broker_connection_retry_on_startup = True, or remove it")
    else:
        bound = DEFAULT_MAX_RETRIES
    if on is None:
        return {}
    if not isinstance(on, bool):
        raise ImproperlyConfigured(f"broker_connection_retry_on_startup is True or False, not {quoted(on)}")
    if not on:
        return {"start_retries": 0}
    if bound in (None, 0):
        return {"start_retries": FOREVER}
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise ImproperlyConfigured(f"broker_connection_max_retries is a whole number of retries, not {quoted(bound)}")
    return {"start_retries": bound}


def amqp_connection(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The amqp driver's settings that the connection settings set."""
    out: dict[str, Any] = {}
    if "broker_heartbeat" in settings:
        beat = settings["broker_heartbeat"]
        out["heartbeat"] = 0.0 if beat in (None, 0, False) else _seconds("broker_heartbeat", beat, 3600)
    if "broker_heartbeat_checkrate" in settings:
        # the driver checks (and sends) heartbeats at each reserve, at least once a second, and at each
        # lease renewal: more often than any check rate asks of a heartbeat of a second or more
        _seconds("broker_heartbeat_checkrate", settings["broker_heartbeat_checkrate"], math.inf)
    method = settings.get("broker_login_method")
    if method is not None:
        if str(method).upper() not in LOGIN_METHODS:
            raise RefusedFeature(f"Celery setting broker_login_method = {quoted(method)} is refused: the amqp driver "
                                 f"logs in with {', '.join(LOGIN_METHODS)}. Write one of those, or remove it")
        out["login_method"] = str(method).upper()
    limit = settings.get("broker_pool_limit")
    if limit is not None and limit != 0 and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
        raise RefusedFeature(
            f"Celery setting broker_pool_limit = {quoted(limit)} is refused on RabbitMQ: each jobbridge process keeps "
            "two connections (one to push, one to reserve), and a cap below two cannot be kept. Write 2 or more, "
            "None, or remove it")
    out.update(_tls(settings.get("broker_use_ssl")))
    return out


def refused_elsewhere(settings: Mapping[str, Any], driver: str) -> None:
    """On a driver that is not amqp: only values that change nothing pass."""
    for name, values in _HARMLESS.items():
        if name in settings and settings[name] not in values:
            raise RefusedFeature(
                f"Celery setting {name} = {quoted(settings[name], name)} is refused on the jobbridge {driver} driver: "
                f"{_WHY[name]}. Remove it")


_HARMLESS: dict[str, tuple[Any, ...]] = {
    "broker_heartbeat": (None, 0, False), "broker_heartbeat_checkrate": (None, 2, 2.0), "broker_login_method": (None,),
    "broker_use_ssl": (None, False, {}), "broker_pool_limit": (None,)}
_WHY = {
    "broker_heartbeat": "heartbeats belong to an AMQP connection; this driver finds a store that stopped answering "
                        "by its connect and answer timeouts",
    "broker_heartbeat_checkrate": "heartbeats belong to an AMQP connection, and this driver sends none",
    "broker_login_method": "it names how an AMQP connection logs in; this driver logs in with the URL's credentials",
    "broker_use_ssl": "TLS is chosen by the URL: rediss://host:6380/0?ssl_cert_reqs=required on redis, the "
                      "database URL's own options on a database",
    "broker_pool_limit": "jobbridge does not cap its connections to the store by a setting: each process holds a few "
                         "(redis: one per thread that talks at once; a database: SQLAlchemy's pool, 5 kept and 10 "
                         "more at a peak)",
}


def _seconds(name: str, value: Any, most: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most:
        raise ImproperlyConfigured(f"{name} is a positive number of seconds (at most {most:g}), not {quoted(value)}")
    return float(value)


def _tls(value: Any) -> dict[str, Any]:
    """broker_use_ssl: True (TLS, the server's certificate verified) or Celery's dict of certificate options."""
    if value in (None, False, {}):
        return {}
    if value is True:
        return {"tls": True}
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"broker_use_ssl is True or a dict of TLS options, not {quoted(value)}")
    out: dict[str, Any] = {"tls": True}
    for key, option in value.items():
        if key not in _TLS_KEYS:
            raise RefusedFeature(f"broker_use_ssl[{key!r}] is not honoured by the jobbridge amqp driver; it reads "
                                 f"{', '.join(_TLS_KEYS)}. Remove it")
        if key == "cert_reqs":
            if option not in _CERT_REQS:
                raise RefusedFeature("broker_use_ssl['cert_reqs'] is ssl.CERT_REQUIRED or ssl.CERT_NONE on the "
                                     f"jobbridge amqp driver, not {quoted(option)}")
            out["tls_verify"] = _CERT_REQS[option]
        else:
            out[_TLS_KEYS[key]] = str(option)
    return out
