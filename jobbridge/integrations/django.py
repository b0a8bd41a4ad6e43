"""What a Django project needs of a worker: its apps loaded before task modules, fresh connections per attempt.

Django opens one database connection per thread and keeps it for
``CONN_MAX_AGE`` seconds (0, the default: until the end of the current
request). A web process closes the stale ones when each request starts and
ends (``close_old_connections``). A worker serves no requests, so without
this module a connection the server dropped (a restart, ``pg_terminate_backend``,
a proxy's idle timeout) stays on its thread and fails every later job there,
and with ``CONN_MAX_AGE = 0`` a worker thread would keep its connection open
for good. So:

- `setup` runs ``django.setup()`` once, before any task module is imported
  (``-A`` loading, autodiscovery): models then import in any order, and
  ``AppRegistryNotReady`` never surfaces from a task module;
- `close_connections`, a ``call_next`` middleware, does around each attempt,
  on the thread that runs it, what Django's request cycle does: the query log
  is cleared, and each of the thread's connections that had an error since its
  last commit, or outlived ``CONN_MAX_AGE``, is closed, before the attempt and
  after it. Each worker thread has its own connection (Django keeps them per
  thread), so this touches only the attempt's own. A connection inside an
  atomic block is left alone: that is an attempt run inline inside the
  caller's transaction (a test's, say), which is not ours to end;
- `adopt` puts that middleware first in a bridge's chain (``jobbridge worker
  -A`` and every command taking ``-A`` do it) and closes what loading opened;
- in a child made by ``os.fork()``, the connections inherited from the parent
  are forgotten, never closed: closing one would end the parent's session on
  the socket both hold. Worker processes are started fresh (never forked from
  a loaded app), so they inherit none to begin with.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from django.db import connections, reset_queries

from jobbridge.app import JobBridge
from jobbridge.context import JobContext
from jobbridge.execution import CallNext

__all__ = ["adopt", "close_connections", "installed_app_names", "setup"]

log = logging.getLogger("jobbridge.django")

#: DBAPI connections a forked child inherited; kept referenced so that none is closed by collection
_inherited: list[Any] = []


def setup() -> None:
    """``django.setup()``, unless Django's apps are loaded (or being loaded: a models module imported us)."""
    if apps.ready or apps.loading:
        return
    django.setup()


def installed_app_names() -> list[str]:
    """The installed apps' packages, whose ``tasks`` modules autodiscovery imports; Django is set up first."""
    setup()
    return [config.name for config in apps.get_app_configs()]


def close_connections(ctx: JobContext, call_next: CallNext) -> Any:
    """Middleware: this thread's stale and unusable Django connections closed before and after the attempt."""
    _refresh()
    try:
        return call_next()
    finally:
        _refresh()


def _refresh() -> None:
    """What Django does at each request's start and end; a close that fails is logged, never the attempt's end."""
    try:
        reset_queries()
        for conn in connections.all(initialized_only=True):
            if not conn.in_atomic_block:
                conn.close_if_unusable_or_obsolete()
    except Exception:
        log.warning("closing a stale Django database connection failed", exc_info=True)


def adopt(bridge: JobBridge) -> JobBridge:
    """``bridge`` with `close_connections` first in its middleware, and the loading thread's connections closed.

    Done before the bridge runs anything: its executors are built, with the
    middleware of that moment, when it first runs a job.
    """
    if close_connections not in bridge.middleware:
        bridge.middleware = (close_connections, *bridge.middleware)
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()
    return bridge


def _forget_inherited() -> None:
    """In a forked child: drop the parent's connections unclosed, so the child opens its own."""
    if not settings.configured:
        return
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _inherited.append(conn.connection)
            conn.connection = None


os.register_at_fork(after_in_child=_forget_inherited)
