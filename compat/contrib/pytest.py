"""``celery.contrib.pytest``: Celery's pytest fixtures, with a real jobbridge worker behind ``celery_worker``.

Not loaded by itself: a project asks for it, as Celery's plugin is asked for, with
``pytest_plugins = ("celery.contrib.pytest",)`` in a conftest that calls
``install_as_celery()`` first, or ``pytest_plugins = ("jobbridge.compat.contrib.pytest",)``
(``-p jobbridge.compat.contrib.pytest``). jobbridge's own pytest plugin never loads
it, so a process where the real Celery is installed too keeps Celery's fixtures
for the projects that use Celery's. The fixtures and what they mean are Celery's:
``celery_app`` is a new test app per test (memory broker and result store unless
``celery_config`` says otherwise), ``celery_worker`` a worker running in a thread
for that app until the test returns; the session variants live for the session.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from ..app import Celery
from .testing import worker
from .testing.app import TestApp, setup_default_app

#: set (to anything) to get the apps without starting workers, as with Celery's fixtures
NO_WORKER = os.environ.get("NO_WORKER")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``celery`` marker: ``@pytest.mark.celery(task_always_eager=True)`` overrides settings."""
    config.addinivalue_line("markers", "celery(**overrides): override celery configuration for a test case")


@contextmanager
def _create_app(enable_logging: bool = False, use_trap: bool = False, parameters: Mapping[str, Any] | None = None,
                **config: Any) -> Iterator[Celery]:
    app = TestApp(set_as_current=False, enable_logging=enable_logging, config=config, **dict(parameters or {}))
    with setup_default_app(app, use_trap=use_trap):
        yield app


def _marked(request: pytest.FixtureRequest, config: Mapping[str, Any]) -> dict[str, Any]:
    mark = request.node.get_closest_marker("celery")
    return {**config, **(mark.kwargs if mark else {})}


@pytest.fixture(scope="session")
def use_celery_app_trap() -> bool:
    """Override to return True: then code that falls back to the current app fails the test."""
    return False


@pytest.fixture(scope="session")
def celery_enable_logging() -> bool:
    return False


@pytest.fixture(scope="session")
def celery_includes() -> Sequence[str]:
    """Override: modules the worker fixtures import first (task modules, signal receivers)."""
    return ()


@pytest.fixture(scope="session")
def celery_worker_pool() -> str:
    """Override with ``"threads"`` for tasks on several threads (with ``concurrency`` in the parameters)."""
    return "solo"


@pytest.fixture(scope="session")
def celery_config() -> Mapping[str, Any]:
    """Override: settings of the test app (``broker_url``, ``result_backend``, ``task_always_eager``...)."""
    return {}


@pytest.fixture(scope="session")
def celery_parameters() -> Mapping[str, Any]:
    """Override: keyword arguments of ``Celery(...)`` for the test app."""
    return {}


@pytest.fixture(scope="session")
def celery_worker_parameters() -> Mapping[str, Any]:
    """Override: keyword arguments of `start_worker` (``queues``, ``concurrency``, ``shutdown_timeout``...)."""
    return {}


@pytest.fixture(scope="session")
def celery_class_tasks() -> Sequence[Any]:
    """Override: class-based tasks to register with the session app."""
    return []


@pytest.fixture(scope="session")
def celery_session_app(request: pytest.FixtureRequest, celery_config: Mapping[str, Any],
                       celery_parameters: Mapping[str, Any], celery_enable_logging: bool,
                       use_celery_app_trap: bool) -> Iterator[Celery]:
    """One test app for the whole session."""
    with _create_app(celery_enable_logging, use_celery_app_trap, celery_parameters,
                     **_marked(request, celery_config)) as app:
        if not use_celery_app_trap:
            app.set_default()
            app.set_current()
        yield app


@pytest.fixture(scope="session")
def celery_session_worker(celery_session_app: Celery, celery_includes: Sequence[str],
                          celery_class_tasks: Sequence[Any], celery_worker_pool: str,
                          celery_worker_parameters: Mapping[str, Any]) -> Iterator[Any]:
    """A worker thread for `celery_session_app`, running for the whole session."""
    if NO_WORKER:
        yield None
        return
    for module in celery_includes:
        importlib.import_module(module)
    for task in celery_class_tasks:
        celery_session_app.register_task(task)
    with worker.start_worker(celery_session_app, pool=celery_worker_pool, **celery_worker_parameters) as running:
        yield running


@pytest.fixture()
def celery_app(request: pytest.FixtureRequest, celery_config: Mapping[str, Any],
               celery_parameters: Mapping[str, Any], celery_enable_logging: bool,
               use_celery_app_trap: bool) -> Iterator[Celery]:
    """A new test app for each test; the ``celery`` marker overrides its settings."""
    with _create_app(celery_enable_logging, use_celery_app_trap, celery_parameters,
                     **_marked(request, celery_config)) as app:
        yield app


@pytest.fixture()
def celery_worker(celery_app: Celery, celery_includes: Sequence[str], celery_worker_pool: str,
                  celery_worker_parameters: Mapping[str, Any]) -> Iterator[Any]:
    """A worker thread for `celery_app`, started before the test and stopped when it returns."""
    if NO_WORKER:
        yield None
        return
    for module in celery_includes:
        importlib.import_module(module)
    with worker.start_worker(celery_app, pool=celery_worker_pool, **celery_worker_parameters) as running:
        yield running


@pytest.fixture()
def depends_on_current_app(celery_app: Celery) -> None:
    """Make `celery_app` the current app, for code that uses ``current_app``."""
    celery_app.set_current()


__all__ = ["celery_app", "celery_class_tasks", "celery_config", "celery_enable_logging", "celery_includes",
           "celery_parameters", "celery_session_app", "celery_session_worker", "celery_worker",
           "celery_worker_parameters", "celery_worker_pool", "depends_on_current_app", "pytest_configure",
           "use_celery_app_trap"]
