"""Stand-ins for Celery internals its integration suite imports but does not test (``-p celery_standins``).

Celery's ``t/integration`` modules import, at the top, names the facade does not
provide under ``install_as_celery()`` (it refuses them by name): the
integration-test ``Manager`` (its conftest), ``celery.backends.base`` and
``celery.worker.state``. Any one of them stops a whole file from being collected,
so nothing of it would be measured. This plugin, loaded only for that run
(tests/compat/test_celery_integration_suite.py), puts small stand-ins in their
place so that each *test* is judged on its own: the stand-ins that are pure test
helpers (``Manager.join``, ``wait_until_idle``, ``wait_for``) work; the ones that
stand for a Celery feature (worker state, remote inspection, the
key-value backend base class) only let the import succeed, so a test that uses the
feature fails on its own, with the facade's own refusal where there is one. None
of this is Celery's code, and none of it ships with jobbridge: every stand-in is a
finding, listed in the run's report.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Iterable
from typing import Any

#: the stand-in modules and names, reported with the run so the report says what was not the facade's
STOOD_IN = (
    "celery.contrib.testing.manager.Manager",
    "celery.backends.base.BaseKeyValueStoreBackend",
    "celery.worker.state",
    "start_worker(pool='prefork') run as pool='threads'",
    "redis.StrictRedis with no socket timeout (redis-py 8's default is 5 s)",
)


#: how long a test's teardown waits for the tasks it left running (well under a test's `TEST_TIMEOUT`)
IDLE_WAIT = 5.0


class Sentinel(Exception):
    """Raised by `Manager.wait_for` stand-in callers to stop early (Celery's name)."""


class Manager:
    """The integration suite's ``manager`` fixture: the test app and a few waiting helpers.

    Remote inspection (``inspect``, ``assert_accepted``, ...) is Celery's broadcast
    control: the stand-in passes the call on to ``app.control.inspect``, whose
    ``ping()`` the facade answers from the workers' heartbeats and whose other
    inspections it refuses, so a test meets that answer or that refusal.
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
        """Celery's: purge what waits, then wait (here at most `IDLE_WAIT` s) until no task is running.

        Celery's purge leaves the messages a worker holds for their eta (a retry's countdown);
        jobbridge keeps those in the store, so they go too: a retry left by one test would
        otherwise keep every later test's teardown waiting for it.
        """
        driver = self.app.jobbridge_app().driver()
        driver.purge([count.queue for count in driver.counts()])
        deadline = time.monotonic() + IDLE_WAIT
        while time.monotonic() < deadline:
            if not any(count.reserved for count in driver.counts()):
                return
            time.sleep(0.1)


class BaseKeyValueStoreBackend:
    """Celery's key-value result backend base class: the suite only tests ``isinstance(backend, ...)``."""


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


def _waiting_redis() -> None:
    """The suite's own Redis client (``t/integration/tasks.py``: ``StrictRedis(host=..., port=...)``) waits
    as long as a command asks.

    redis-py 8 gives a client a 5 s socket timeout unless told otherwise; the suite's ``await_redis_echo``
    blocks in ``BLPOP`` for 10 s (to see that a chord's body did *not* run) and more, which ends in
    ``redis.exceptions.TimeoutError`` on any worker, Celery's included: its CI ran on a redis-py whose
    clients wait for ever. Not a finding about jobbridge; the environment's, so the stand-in is here.
    """
    import redis

    class SuiteRedis(redis.Redis):
        def __init__(self, *args: Any, socket_timeout: float | None = None, **kwargs: Any) -> None:
            super().__init__(*args, socket_timeout=socket_timeout, **kwargs)

    redis.StrictRedis = SuiteRedis  # type: ignore[misc,assignment]


def install() -> None:
    """Put the stand-ins where the suite imports them, over the facade's refusals (and only those)."""
    _waiting_redis()
    sys.modules["celery.contrib.testing.manager"] = _module("celery.contrib.testing.manager", Manager=Manager,
                                                            Sentinel=Sentinel)
    sys.modules["celery.backends"] = _module("celery.backends")
    sys.modules["celery.backends.base"] = _module("celery.backends.base",
                                                  BaseKeyValueStoreBackend=BaseKeyValueStoreBackend)
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


#: the tests that need longer by design, on Celery too: test_retry waits out two tasks' three 5 s countdowns;
#: the three on task_allow_error_cb_on_chord_header wait 10 s per header (6 or 7 of them) to see that the
#: body did not run, and the one that turns it off 10 s more to see that no second errback came;
#: test_nested_chord_header_link_error waits 10 s for each of the two
LONGER = {"test_retry": 45.0, "test_enabling_flag_allow_error_cb_on_chord_header": 120.0,
          "test_flag_allow_error_cb_on_chord_header_on_upgraded_chord": 110.0,
          "test_disabling_flag_allow_error_cb_on_chord_header": 180.0, "test_nested_chord_header_link_error": 40.0}


class SuiteTimeout(Exception):
    """A test ran past its cap (its message says which)."""


_armed: dict[str, Any] = {"cap": TEST_TIMEOUT, "expired": False}


def _cap(item: Any) -> float:
    _armed["cap"], _armed["expired"] = LONGER.get(item.name, TEST_TIMEOUT), False
    return float(_armed["cap"])


#: pytest's own reporting: an exception raised inside it (its ast.parse of a failure's source, a
#: subtest's report) would break pytest itself (an INTERNALERROR ends the whole run); the deadline waits
_REPORTING = ("/_pytest/_code/", "/_pytest/reports.py", "/_pytest/subtests.py", "/_pytest/terminal.py",
              "/_pytest/junitxml.py", "/ast.py")


def _in_reporting(frame: Any) -> bool:
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in _REPORTING):
            return True
        frame = frame.f_back
    return False


def _expired(signum: int, frame: Any) -> None:
    if _in_reporting(frame):
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # again once pytest has written its report
        return
    _armed["expired"] = True
    raise SuiteTimeout(f"the test ran past its {_armed['cap']:g} s cap (celery_standins.py)")


def _no_subtest_after_the_cap() -> None:
    """A subtest records the deadline's failure as its own and the test goes on to the next subtest,
    which waits its own 60 s: so once the cap has passed, entering a subtest ends the test."""
    from _pytest import subtests

    enter = subtests._SubTestContextManager.__enter__

    def guarded(self: Any) -> None:
        if _armed["expired"]:
            raise SuiteTimeout(f"the test ran past its {_armed['cap']:g} s cap (celery_standins.py)")
        enter(self)

    subtests._SubTestContextManager.__enter__ = guarded  # type: ignore[method-assign]


def pytest_configure(config: Any) -> None:
    """Each test's call runs under a SIGALRM deadline of `_cap` seconds (run with ``-p no:timeout``)."""
    import pytest

    _no_subtest_after_the_cap()

    class Deadline:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item: Any) -> Any:
            previous = signal.signal(signal.SIGALRM, _expired)
            signal.setitimer(signal.ITIMER_REAL, _cap(item))
            try:
                yield
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

    config.pluginmanager.register(Deadline(), "celery-suite-deadline")
