"""``celery.contrib.testing.worker``: `start_worker`, a real jobbridge worker in a thread of the test process.

A test that calls ``add.delay(2, 2).get()`` needs something that takes the message and
runs it. Celery's fixture runs a Celery worker in a thread; this runs jobbridge's own
`Worker` on the app's JobBridge in a thread, so the test goes through the path
production takes: publish, reserve, run, store the result. With the test app's memory
broker and result store the thread shares them with the test; with a database or Redis
the worker is the same as a `jobbridge worker` process. Before it yields, it sends
``celery.ping`` and waits for ``"pong"``, as Celery's does, so a worker that cannot run
tasks fails at the fixture, not in the middle of a test.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jobbridge import signals as core
from jobbridge.worker import Worker, WorkerOptions
from jobbridge.worker_monitor import WorkerMonitor, registry_for
from jobbridge.worker_process import worked_queues

from ...app import Celery
from ...exceptions import RefusedFeature
from ...signals import Signal, logging_is_configured_by_app
from . import tasks as tasks
from .app import LOGGING_APPS

WORKER_LOGLEVEL = os.environ.get("WORKER_LOGLEVEL", "error")
#: how long the worker thread waits for work before it asks the store again
IDLE_SLEEP = 0.05
#: WorkController options that are about machinery jobbridge's worker does not have: accepted, changing nothing
_WITHOUT = frozenset({"without_heartbeat", "without_mingle", "without_gossip", "ready_callback"})

test_worker_starting = Signal("test_worker_starting")
test_worker_started = Signal("test_worker_started", {"worker", "consumer"})
test_worker_stopped = Signal("test_worker_stopped", {"worker"})


class TestWorkController:
    """What `start_worker` yields: the running worker, its app and host name."""

    __test__ = False  # pytest must not collect it

    def __init__(self, app: Celery, worker: Worker) -> None:
        self.app = app
        self.worker = worker
        self.hostname = worker.options.hostname
        self.concurrency = worker.options.concurrency
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"jobbridge test worker {self.hostname}", daemon=True)

    def _run(self) -> None:
        def started(sender: Any, **kwargs: Any) -> None:
            self._started.set()

        core.worker_started.connect(started, sender=self.worker, weak=False)
        try:
            self.worker.run()
        except BaseException as exc:  # the test thread raises it from ensure_started
            self._error = exc
        finally:
            core.worker_started.disconnect(started, sender=self.worker)
            self._started.set()

    @property
    def stats(self) -> Any:
        """What the worker did so far (`WorkStats`: processed, succeeded, failed, ...)."""
        return self.worker.stats

    def ensure_started(self) -> None:
        """Wait until the worker reserves; re-raise here what stopped it from starting."""
        self._started.wait()
        if self._error is not None:
            raise self._error

    def reload(self, modules: Sequence[str] | None = None, reload: bool = False, reloader: Any = None) -> None:
        """Import ``modules``; a task defined after the worker started is already registered with it."""
        for name in modules or ():
            module = importlib.import_module(name)
            if reload:
                importlib.reload(module)


@contextmanager
def start_worker(app: Celery, concurrency: int = 1, pool: str = "solo", loglevel: str | int = WORKER_LOGLEVEL,
                 logfile: str | None = None, perform_ping_check: bool = True, ping_task_timeout: float = 10.0,
                 shutdown_timeout: float = 10.0, **kwargs: Any) -> Iterator[TestWorkController]:
    """Run a worker for ``app`` in a thread while the block runs; it finishes its tasks and stops after."""
    test_worker_starting.send(sender=app)
    if app in LOGGING_APPS and not logging_is_configured_by_app():  # Celery's app.log.setup(loglevel)
        logging.getLogger().setLevel(loglevel if isinstance(loglevel, int) else str(loglevel).upper())
    controller = None
    try:
        with _worker_thread(app, concurrency, pool, logfile, shutdown_timeout, **kwargs) as controller:
            if perform_ping_check:
                answer = app.tasks["celery.ping"].delay().get(timeout=ping_task_timeout)
                assert answer == "pong", f"the test worker answered {answer!r} to celery.ping"
            yield controller
    finally:
        test_worker_stopped.send(sender=app, worker=controller)


@contextmanager
def _worker_thread(app: Celery, concurrency: int, pool: str, logfile: str | None, shutdown_timeout: float,
                   **kwargs: Any) -> Iterator[TestWorkController]:
    app.finalize()
    app.set_current()
    app.set_default()
    if "celery.ping" not in app.tasks:  # an app made before the ping task was imported
        app.task(name="celery.ping")(tasks.pong)
    worker = Worker(app.jobbridge_app(), _options(app, concurrency, pool, logfile, kwargs))
    controller = TestWorkController(app, worker)
    # its heartbeats, as a jobbridge worker process beats: app.control.ping() and jobbridge workers list it
    monitor = WorkerMonitor(worker, registry_for(app.jobbridge_app(), worker.options.connection))
    monitor.start()
    controller.thread.start()
    controller.ensure_started()
    test_worker_started.send(sender=app, worker=controller, consumer=None)
    try:
        yield controller
    finally:
        monitor.stop()
        worker.stop()
        controller.thread.join(shutdown_timeout)
        if controller.thread.is_alive():
            worker.stop(now=True)
            raise RuntimeError(f"the test worker did not stop within shutdown_timeout={shutdown_timeout:g}s: a "
                               "task is still running; raise shutdown_timeout if your tasks take longer")


def _options(app: Celery, concurrency: int, pool: str, logfile: str | None,
             kwargs: dict[str, Any]) -> WorkerOptions:
    """The jobbridge worker options for Celery's WorkController arguments; one it cannot honour is refused."""
    if pool not in ("solo", "threads"):
        raise RefusedFeature(f"start_worker(pool={pool!r}) is refused: the test worker runs in a thread of the "
                             "test process, its tasks on threads (pool='solo' or 'threads'; concurrency=N)")
    if logfile is not None:
        raise RefusedFeature("start_worker(logfile=...) is refused: the test worker logs through the test "
                             "process's logging; add a handler there (pytest's caplog, log_file)")
    given = kwargs.pop("queues", None) or ()
    hostname = kwargs.pop("hostname", None) or f"gen{os.getpid()}@{socket.gethostname()}"
    unknown = sorted(set(kwargs) - _WITHOUT)
    if unknown:
        raise RefusedFeature(f"start_worker() does not take {', '.join(unknown)}: it honours concurrency, pool "
                             "('solo', 'threads'), queues, hostname, perform_ping_check, ping_task_timeout and "
                             "shutdown_timeout")
    queues = given.split(",") if isinstance(given, str) else list(given)
    bridge = app.jobbridge_app()
    return WorkerOptions(queues=worked_queues(bridge, [q.strip() for q in queues if q.strip()])[0],
                         concurrency=concurrency, sleep=IDLE_SLEEP, hostname=hostname)


__all__ = [
    "WORKER_LOGLEVEL",
    "TestWorkController",
    "start_worker",
    "test_worker_started",
    "test_worker_starting",
    "test_worker_stopped",
]
