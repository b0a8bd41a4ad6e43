"""``celery.contrib.testing.app``: the app Celery's test fixtures make, with Celery's test defaults.

Celery's fixtures default to an in-memory broker and result backend, so a test needs no
server; on the facade those are jobbridge's memory driver and memory result store, which
a worker thread of the same process (`start_worker`) reads. `setup_default_app` puts
the process's current app back afterwards, so one test's app never leaks into the next.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from ... import shared
from ...app import Celery
from ...ports import AppPort
from . import tasks as tasks

#: Celery's defaults for a test app (celery/contrib/testing/app.py), which the facade accepts
DEFAULT_TEST_CONFIG: dict[str, Any] = {
    "worker_hijack_root_logger": False,
    "worker_log_color": False,
    "accept_content": {"json"},
    "enable_utc": True,
    "timezone": "UTC",
    "broker_url": "memory://",
    "result_backend": "cache+memory://",
    "broker_heartbeat": 0,
}


#: the test apps made with ``enable_logging=True``: their test worker sets the root logger's level
LOGGING_APPS: weakref.WeakSet[Celery] = weakref.WeakSet()


class Trap:
    """Stands for the current app when a test asks for the trap: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        if name in ("_is_coroutine", "__func__"):  # what unittest.mock looks up
            return None
        raise RuntimeError(f"Test depends on current_app (it read current_app.{name}); pass the app explicitly")


def TestApp(name: str | None = None, config: Mapping[str, Any] | None = None,
            enable_logging: bool = False, set_as_current: bool = False, log: Any = None,
            backend: str | None = None, broker: str | None = None, **kwargs: Any) -> Celery:
    """A Celery app for a test: Celery's test defaults, overridden by ``config``, ``broker`` and ``backend``.

    ``enable_logging=True`` does what it does in Celery: `start_worker` then sets the root
    logger's level to its ``loglevel`` (``WORKER_LOGLEVEL``, ``error`` by default), unless
    the project connected ``setup_logging``; otherwise the worker thread logs through the
    test process's logging as it is. ``log`` changes nothing.
    """
    settings = {**DEFAULT_TEST_CONFIG, **(config or {})}
    if broker is not None:
        settings.pop("broker_url", None)
    if backend is not None:
        settings.pop("result_backend", None)
    app = Celery(name or "celery.tests", set_as_current=set_as_current, broker=broker, backend=backend, **kwargs)
    app.conf.update(settings)
    if enable_logging:
        LOGGING_APPS.add(app)
    return app


TestApp.__test__ = False  # type: ignore[attr-defined]  # pytest must not collect it


@contextmanager
def set_trap(app: Celery) -> Iterator[None]:
    """While inside, the current app is a `Trap`: code that falls back to it fails the test."""
    previous = shared.peek_current()
    shared.restore_current(cast(AppPort, Trap()))
    try:
        yield
    finally:
        shared.restore_current(previous)


@contextmanager
def setup_default_app(app: Celery, use_trap: bool = False) -> Iterator[None]:
    """Run the block with ``app`` available; afterwards the current app is the one before, ``app`` closed."""
    previous = shared.peek_current()
    try:
        if use_trap:
            with set_trap(app):
                yield
        else:
            yield
    finally:
        shared.restore_current(previous)
        if app is not previous:
            app.close()


__all__ = ["DEFAULT_TEST_CONFIG", "LOGGING_APPS", "TestApp", "Trap", "set_trap", "setup_default_app"]
