"""A Celery ``result_backend`` (and ``result_expires``) as jobbridge's ``results`` and ``result_ttl``.

==========================================  ==================================================
Celery result_backend                       jobbridge ``results``
==========================================  ==================================================
``redis://``, ``rediss://``                 the same URL (the redis result store)
``db+<database URL>``                       ``<database URL>``: tables beside the jobs
``sqlite://``, ``postgresql://``, ...       the same URL
``database`` (old style) + ``database_url`` ``database_url``
``cache+memory://``, ``memory://``          ``memory://`` (this process only: tests)
``rpc://``, ``amqp://``                     refused: results would travel over AMQP
``django://ALIAS``                          the same: a database of Django's ``DATABASES``
``django-db``, ``django-cache``             refused: write ``django://default``
anything else                               refused, naming the backends that work
==========================================  ==================================================

When the URL is the broker's own store, ``results`` is left unset, so the store
is opened with the broker connection's settings (its redis prefix, its timeouts).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobbridge.redaction import quoted

from ..exceptions import ImproperlyConfigured, RefusedFeature
from .brokers import scheme_of

#: ``result_expires = None`` (never expire) is kept this long: ten years
NEVER = 10 * 365 * 86400.0
_WORKING = ("redis://host:6379/1, db+postgresql://user@host/db, db+mysql://user@host/db, "
            "db+sqlite:///results.sqlite3")
_DATABASE = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "django")
_SAME_STORE = ("write result_backend = the store your broker_url names (the same redis:// URL, or "
               "db+<the database URL>): jobbridge keeps results, revokes and chord counters there")
_REFUSED = {
    "rpc": "rpc:// sends results back over AMQP, which jobbridge does not have; " + _SAME_STORE,
    "amqp": "amqp:// keeps results in RabbitMQ, which jobbridge does not have; " + _SAME_STORE,
    "django-db": ("django-celery-results' tables are not used; write result_backend = 'django://default' "
                  "(results go to the jobbridge_results table of that Django database)"),
    "django-cache": "Django's cache is not a result store here; " + _SAME_STORE,
    "sentinel": "Redis Sentinel is not supported; point result_backend at the master (redis://host:6379/1)",
}


def results_url(backend: Any, database_url: Any = None) -> str:
    """The jobbridge store URL for a Celery result_backend value; refused ones raise, saying why."""
    if not isinstance(backend, str) or not backend:
        raise ImproperlyConfigured(f"result_backend must be a URL such as {_WORKING}, not {quoted(backend)}")
    name = backend.strip()
    if name.lower() in ("database", "db"):
        if not database_url:
            raise ImproperlyConfigured("result_backend = 'database' needs database_url (CELERY_RESULT_DBURI); "
                                       f"or write the URL in result_backend itself: {_WORKING}")
        return str(database_url)
    scheme = scheme_of(name) if "://" in name else name.lower()
    base, _, inner = scheme.partition("+")
    if scheme in _REFUSED or base in _REFUSED:
        raise RefusedFeature(f"result_backend {quoted(name)} is refused: {_REFUSED.get(scheme) or _REFUSED[base]}")
    if base in ("redis", "rediss") or base in _DATABASE:
        return name
    if base == "memory" or scheme == "cache+memory":
        return "memory://"
    if base in ("db", "sqla") and inner.split("+", 1)[0] in _DATABASE:
        return name.split("+", 1)[1]
    raise RefusedFeature(f"result_backend {quoted(name)} is refused: jobbridge keeps results in redis or a "
                         f"database (the ones its drivers use). Use one of {_WORKING}")


def ttl(expires: Any) -> float:
    """``result_expires`` (seconds, a timedelta, or None for never) as seconds."""
    if expires is None:
        return NEVER
    seconds = expires.total_seconds() if isinstance(expires, timedelta) else expires
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ImproperlyConfigured(f"result_expires must be seconds or a timedelta (or None), not {expires!r}")
    return float(seconds) if seconds > 0 else NEVER


__all__ = ["NEVER", "results_url", "ttl"]
