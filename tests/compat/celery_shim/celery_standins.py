"""Stand-ins for Celery internals its integration suite imports but does not test (``-p celery_standins``).

Celery's ``t/integration`` modules import, at the top, names the facade does not
provide under ``install_as_celery()`` (it refuses them by name): the
integration-test ``Manager`` (its conftest), ``celery.backends.base``,
``celery.canvas.StampingVisitor``, ``celery.utils.serialization`` and
``celery.worker.state``. Any one of them stops a whole file from being collected,
so nothing of it would be measured. This plugin, loaded only for that run
(tests/compat/test_celery_integration_suite.py), puts small stand-ins in their
place so that each *test* is judged on its own: the stand-ins that are pure test
helpers (``Manager.join``, ``wait_until_idle``, ``wait_for``) work; the ones that
stand for a Celery feature (stamping, worker state, remote inspection, the
key-value backend base class) only let the import succeed, so a test that uses the
feature fails on its own, with the facade's own refusal where there is one. None
of this is Celery's code, and none of it ships with jobbridge: every stand-in is a
finding, listed in the run's report.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import types
from collections.abc import Callable, Iterable
from typing import Any

#: the stand-in modules and names, reported with the run so the report says what was not the facade's
STOOD_IN = (
    "celery.contrib.testing.manager.Manager",
    "celery.backends.base.BaseKeyValueStoreBackend",
    "celery.canvas.StampingVisitor",
    "celery.utils.serialization.UnpickleableExceptionWrapper",
    "celery.worker.state",
    "start_worker(pool='prefork') run as pool='threads'",
)


class Sentinel(Exception):
    """Raised by `Manager.wait_for` stand-in callers to stop early (Celery's name)."""


class Manager:
    """The integration suite's ``manager`` fixture: the test app and a few waiting helpers.

    Remote inspection (``inspect``, ``assert_accepted``, ...) is Celery's broadcast
    control, which the facade refuses; the stand-in passes the call on to
    ``app.control.inspect`` so the test meets that refusal.
    """

    def __init__(self, app: Any, **kwargs: Any) -> None:
        self.app = app
        self.connerrors = ()
        self.block_timeout = kwargs.get("block_timeout", 30 * 60)

    def remark(self, s: str, sep: str = "-") -> None:
        print(f"{sep}{s}")

    def wait_for(self, fun: Callable[[], Any], catch: Any = (), desc: str = "thing", args: Iterable[Any] = (),
                 kwargs: dict[str, Any] | None = None, errback: Any = None, max_retries: int = 10,
                 interval_start: float = 0.1, interval_step: float = 0.5, interval_max: float = 5.0,
                 emit_warning: Any = None, **options: Any) -> Any:
        """Call ``fun`` until it stops raising one of ``catch`` (or AssertionError), as Celery's retries it."""
        catching = tuple(catch) if isinstance(catch, (list, tuple)) else (catch,) if catch else ()
        interval = interval_start
        for attempt in range(max_retries + 1):
            try:
                return fun(*args, **(kwargs or {}))
            except (AssertionError, *catching):
                if attempt == max_retries:
                    raise
            time.sleep(interval)
            interval = min(interval + interval_step, interval_max)
        return None

    def retry_over_time(self, *args: Any, **kwargs: Any) -> Any:
        return self.wait_for(*args, **kwargs)

    def ensure_not_for_a_while(self, fun: Callable[[], Any], catch: Any, desc: str = "thing",
                               max_retries: int = 20, interval_start: float = 0.1, interval_step: float = 0.02,
                               interval_max: float = 1.0, emit_warning: bool = False, **options: Any) -> None:
        try:
            self.wait_for(fun, catch, desc=desc, max_retries=max_retries, interval_start=interval_start,
                          interval_step=interval_step, interval_max=interval_max)
        except catch:
            return
        raise AssertionError(f"Should not have happened: {desc}")

    def join(self, r: Any, propagate: bool = False, max_retries: int = 10, **kwargs: Any) -> Any:
        """Wait for a group's results; with ``propagate=False`` a failure is returned as its exception."""
        timeout = kwargs.get("timeout", 30)
        if hasattr(r, "results"):
            return [self.join(one, propagate=propagate, timeout=timeout) for one in r.results]
        return r.get(timeout=timeout, propagate=propagate)

    def inspect(self, timeout: float = 3.0) -> Any:
        return self.app.control.inspect(timeout=timeout)

    def assert_accepted(self, ids: Any, interval: float = 0.5, desc: str = "waiting for tasks to be accepted",
                        **policy: Any) -> Any:
        return self.inspect().active()

    def assert_received(self, ids: Any, interval: float = 0.5, desc: str = "waiting for tasks to be received",
                        **policy: Any) -> Any:
        return self.inspect().reserved()

    def assert_result_tasks_in_progress_or_completed(self, async_results: Any, interval: float = 0.5,
                                                     desc: str = "waiting for tasks to be started or completed",
                                                     **policy: Any) -> Any:
        return self.inspect().active()

    def wait_until_idle(self) -> None:
        """Wait until nothing is waiting or running on the app's store (Celery asks the workers instead)."""
        driver = self.app.jobbridge_app().driver()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not any(count.pending for count in driver.counts()):
                return
            time.sleep(0.1)


class BaseKeyValueStoreBackend:
    """Celery's key-value result backend base class: the suite only tests ``isinstance(backend, ...)``."""


class StampingVisitor:
    """Celery's stamping visitor: stamping is not provided, so a test that stamps meets the facade's refusal."""


class UnpickleableExceptionWrapper(Exception):
    """Celery's wrapper for an exception that cannot be pickled (the facade stores JSON, never pickles)."""


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name, f"{name}: a stand-in of tests/compat/celery_shim/celery_standins.py")
    module.__dict__.update(attrs)
    return module


def _threads_for_prefork(start: Callable[..., Any]) -> Callable[..., Any]:
    """The suite's conftest asks for ``pool='prefork'``, which the facade's test worker (a thread) refuses."""

    @functools.wraps(start)
    def start_worker(app: Any, *args: Any, pool: str = "solo", **kwargs: Any) -> Any:
        return start(app, *args, pool="threads" if pool == "prefork" else pool, **kwargs)

    return start_worker


def install() -> None:
    """Put the stand-ins where the suite imports them, over the facade's refusals (and only those)."""
    canvas = sys.modules["celery.canvas"]
    if not hasattr(canvas, "StampingVisitor"):
        canvas.StampingVisitor = StampingVisitor  # type: ignore[attr-defined]
    sys.modules["celery.contrib.testing.manager"] = _module("celery.contrib.testing.manager", Manager=Manager,
                                                            Sentinel=Sentinel)
    sys.modules["celery.backends"] = _module("celery.backends")
    sys.modules["celery.backends.base"] = _module("celery.backends.base",
                                                  BaseKeyValueStoreBackend=BaseKeyValueStoreBackend)
    sys.modules["celery.utils.serialization"] = _module(
        "celery.utils.serialization", UnpickleableExceptionWrapper=UnpickleableExceptionWrapper)
    worker_state = _module("celery.worker.state", active_requests=set(), reserved_requests=set(),
                           total_count={}, revoked=set())
    sys.modules["celery.worker.state"] = worker_state
    sys.modules["celery.worker"].state = worker_state  # type: ignore[attr-defined]
    from jobbridge.compat.contrib.testing import worker

    worker.start_worker = _threads_for_prefork(worker.start_worker)  # type: ignore[assignment]


install()


#: no test of the run waits longer than this (seconds): the suite's own marks allow up to 300 s a test,
#: and a task that never finishes on jobbridge would otherwise hold the whole run
TEST_TIMEOUT = float(os.environ.get("CELERY_SUITE_TEST_TIMEOUT", "20"))


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Cap each test's pytest-timeout mark at `TEST_TIMEOUT` (the suite marks some tests 300 s)."""
    import pytest

    for item in items:
        item.add_marker(pytest.mark.timeout(TEST_TIMEOUT), append=False)
