"""The result store and durable cancellation: job states, return values, cancels and chord counters.

`open_store` picks a backend by URL scheme and imports it lazily, so a client
library is needed only when its backend is used:

- ``memory://`` — this process only (`MemoryResultStore`);
- ``sqlite:///path``, ``postgresql://...``, ``mysql://...`` / ``mariadb://...`` —
  tables ``jobbridge_results``, ``jobbridge_cancelled``, ``jobbridge_counters``
  (`jobbridge.results.database.metadata`); PostgreSQL wakes waiters by NOTIFY;
- ``redis://...`` / ``rediss://...`` — keys under ``prefix``; waiters woken by a
  per-waiter list and BLPOP;
- ``celery+redis://...`` — task results in Celery's own Redis layout
  (``celery-task-meta-<id>``), so Celery and jobbridge read each other's
  (`jobbridge.results.celery_redis`);
- ``celery+db+<database URL>`` — task results in Celery's database backend tables
  (``celery_taskmeta``, JSON only: a pickled row is refused, never loaded)
  (`jobbridge.results.celery_database`).

Expiry is always judged by the injected clock. docs/results.md says what the
store is for and which of Celery's failures it prevents.
"""

from __future__ import annotations

from typing import Any

from jobbridge.clock import Clock
from jobbridge.drivers import SCHEMES as DRIVER_SCHEMES
from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted
from jobbridge.results.base import (
    DEFAULT_TTL,
    FAILURE,
    PENDING,
    READY_STATES,
    RETRY,
    REVOKED,
    STARTED,
    SUCCESS,
    ResultEncodeError,
    ResultRecord,
    ResultStore,
    UnknownCounter,
)

__all__ = [
    "DEFAULT_TTL", "FAILURE", "PENDING", "READY_STATES", "RETRY", "REVOKED", "SCHEMES", "STARTED", "SUCCESS",
    "ResultEncodeError", "ResultRecord", "ResultStore", "UnknownCounter", "open_store",
]

#: URL scheme -> backend: the drivers' own schemes, for the stores that can hold results
SCHEMES: dict[str, str] = {s: d for s, d in DRIVER_SCHEMES.items() if d in ("memory", "database", "redis")}


def open_store(url: str, *, clock: Clock, prefix: str = "jobbridge:", **options: Any) -> ResultStore:
    """A result store for ``url``; ``prefix`` names Redis keys, ``options`` are the backend's settings.

    Database stores create their tables if missing. Redis options are the redis
    driver's connection settings (``reconnect``, timeouts, ...).
    """
    if url.lower().startswith(("celery+redis://", "celery+rediss://")):
        from jobbridge.results.celery_redis import open_celery_redis_store

        return open_celery_redis_store(url.split("+", 1)[1], clock=clock, prefix=prefix, **options)
    if url.lower().startswith("celery+db+"):
        from jobbridge.results.celery_database import open_celery_database_store

        return open_celery_database_store(url[len("celery+db+"):], clock=clock, **options)
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    backend = SCHEMES.get(scheme)
    if backend is None:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(
            f"no result store handles the URL scheme {quoted(scheme)} in {quoted(url)}; use one of {known}")
    if backend == "memory":
        if options:
            raise ConfigurationError(f"the memory result store takes no settings, got {', '.join(sorted(options))}")
        from jobbridge.results.memory import MemoryResultStore

        return MemoryResultStore(clock=clock)
    if backend == "database":
        from jobbridge.results.database import open_database_store

        return open_database_store(url, clock=clock, **options)
    try:
        from jobbridge.results.redis import open_redis_store
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("jobbridge"):
            raise
        raise ConfigurationError(f"the redis result store needs {exc.name!r}: pip install 'jobbridge[redis]'") from exc
    return open_redis_store(url, clock=clock, prefix=prefix, **options)
