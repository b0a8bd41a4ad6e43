"""``jobbridge_wire``: whether the facade speaks Celery's own wire on the broker, beside a Celery fleet.

Unset (or ``"jobbridge"``), the broker URL picks jobbridge's native driver for it, as
everywhere else. ``jobbridge_wire = "celery"`` (``CELERY_JOBBRIDGE_WIRE`` in a Django
project's settings) keeps the broker as Celery uses it instead: jobs are Celery's
protocol-2 messages in kombu's layout (the ``celery_wire`` driver), and results are
written where Celery's Redis or database backend writes them (``celery+redis://``,
``celery+db+...``), so Celery
processes and jobbridge processes share the queues and read each other's results
while a fleet moves over one process at a time (docs/celery-wire.md).

==========================================  ==================================================
with ``jobbridge_wire = "celery"``          jobbridge
==========================================  ==================================================
``broker_url = redis://...``                connection ``broker``: driver celery_wire on that
                                            URL, its failed store and unique locks in
                                            connection ``shared`` (the result backend's
                                            Redis, else the broker's own), keys ``jobbridge:``
``broker_transport_options``                ``visibility_timeout`` read (kombu's, 3600 s
                                            unset, as in Celery); any other refused
``result_backend = redis://...``            ``results = celery+redis://...``: Celery's keys
``result_backend = db+<database URL>``      ``results = celery+db+<database URL>``: Celery's
                                            tables (celery_taskmeta), JSON only
``broker_url = amqp://...``                 connection ``broker``: driver celery_wire on
                                            RabbitMQ (Celery's classic durable queues); its
                                            failed store and locks in the result backend's
                                            Redis or database; any broker_transport_options
                                            refused
``broker_url`` anything else                refused, naming why
``result_backend`` anything else            refused: Celery reads results from its own backend
==========================================  ==================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured, RefusedFeature
from .brokers import scheme_of

CELERY = "celery"
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
#: the result backends Celery's database backend runs on, as jobbridge's database store URLs name them
DATABASES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb")
VALUES = (None, "jobbridge", CELERY)


def speaks_celery(value: Any) -> bool:
    """Whether the setting asks for Celery's wire; a value it does not know is refused, naming the ones it does."""
    if value not in VALUES:
        raise ImproperlyConfigured(f"jobbridge_wire is 'celery' (Celery's own messages on the broker, beside a "
                                   f"Celery fleet) or 'jobbridge' (the native driver, the default), not "
                                   f"{quoted(value)}")
    return bool(value == CELERY)


def backend(url: str, options: Mapping[str, Any] | None, shared_store: str | None,
            connect_timeout: Any = None) -> dict[str, Any]:
    """The jobbridge connections for Celery's wire on ``url``: the broker, and the shared store beside it.

    ``connect_timeout`` is ``broker_connection_timeout`` when the app set it (seconds): the
    broker connection's ``connect_timeout``.
    """
    scheme = scheme_of(url)
    if scheme.startswith("redis"):
        found = _redis(url, options, shared_store)
    elif scheme in AMQP_SCHEMES:
        found = _amqp(url, options, shared_store)
    else:
        raise RefusedFeature(
            f"jobbridge_wire = 'celery' with broker_url {quoted(url)}: Celery's wire is spoken on Redis (redis://, "
            "rediss://) and RabbitMQ (amqp://, amqps://, pyamqp://) brokers; for any other, remove jobbridge_wire")
    if connect_timeout is not None:
        found["connections"]["broker"]["connect_timeout"] = float(connect_timeout)
    return found


def _redis(url: str, options: Mapping[str, Any] | None, shared_store: str | None) -> dict[str, Any]:
    broker: dict[str, Any] = {"driver": "celery_wire", "url": url, "locks": "shared"}
    for key, value in dict(options or {}).items():
        if key != "visibility_timeout":
            raise RefusedFeature(
                f"broker_transport_options[{key!r}] is not honoured by jobbridge's celery wire, which reads only "
                "visibility_timeout (kombu's default layout otherwise: no key prefix, the default priority "
                "steps). Remove it")
        broker["visibility_timeout"] = value
        broker["reservation"] = min(60.0, float(value))
    store = shared_store if shared_store and scheme_of(shared_store).startswith("redis") else url
    return {"connections": {"default": "broker", "broker": broker, "shared": {"driver": "redis", "url": store}}}


def _amqp(url: str, options: Mapping[str, Any] | None, shared_store: str | None) -> dict[str, Any]:
    """RabbitMQ keeps neither failed jobs nor locks: those go to the result backend's Redis."""
    if options:
        key = next(iter(dict(options)))
        raise RefusedFeature(
            f"broker_transport_options[{key!r}] is not honoured by jobbridge's celery wire on RabbitMQ, which "
            "declares Celery's default queues (classic, durable) and holds a job while its connection lives "
            "(no visibility timeout there). Remove broker_transport_options")
    kind = _store_kind(shared_store)
    if shared_store is None or kind is None:
        raise RefusedFeature(
            f"jobbridge_wire = 'celery' with broker_url {quoted(url)} needs a result backend on Redis or a database "
            "(result_backend = redis://host:6379/1, or db+postgresql://...): RabbitMQ cannot keep failed jobs or "
            "unique-job locks, so jobbridge keeps them in the result backend's store, where Celery's side reads "
            "the results too")
    broker = {"driver": "celery_wire", "url": url, "locks": "shared"}
    return {"connections": {"default": "broker", "broker": broker, "shared": {"driver": kind, "url": shared_store}}}


def _store_kind(url: str | None) -> str | None:
    """The jobbridge driver that can keep failed jobs and locks on a result backend's store, if any."""
    if not url:
        return None
    scheme = scheme_of(url)
    if scheme.startswith("redis"):
        return "redis"
    return "database" if scheme.split("+", 1)[0] in DATABASES else None


def results_url(url: str) -> str:
    """The results of Celery's wire: Celery's Redis layout, or Celery's database tables, on the result backend."""
    scheme = scheme_of(url)
    if scheme.startswith("redis"):
        return "celery+" + url
    if scheme.split("+", 1)[0] in DATABASES:
        return "celery+db+" + url
    raise RefusedFeature(
        f"jobbridge_wire = 'celery' with result_backend {quoted(url)}: Celery's side reads results from its own "
        "backend's layout, which jobbridge writes on Redis (result_backend = redis://host:6379/1) and in Celery's "
        "database tables (result_backend = db+postgresql://..., db+mysql://..., db+sqlite:///...); remove "
        "result_backend, or point it at one of those")


__all__ = ["CELERY", "backend", "results_url", "speaks_celery"]
