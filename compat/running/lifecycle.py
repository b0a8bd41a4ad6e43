"""Celery's worker signals, fired from jobbridge's worker events in each worker process.

On the core's ``worker_started`` (sent by a worker whose JobBridge is a facade
app's): ``celeryd_init``, ``worker_init``, ``worker_process_init``,
``celeryd_after_setup``, ``after_setup_logger`` / ``after_setup_task_logger``
(unless the app configures logging itself through ``setup_logging``), then
``worker_ready``. On ``worker_stopping``: ``worker_shutting_down``. When the
worker's process ends (the core's ``worker_stopped`` where it exists, else at
interpreter exit): ``worker_process_shutdown``, then ``worker_shutdown``. On
``message_discarded``: ``task_unknown`` (no such task) or ``task_rejected``. On
``job_cancelled`` (a revoked task skipped, or stopped with terminate=True):
``task_revoked``, and a chord it belonged to fails.

jobbridge sends its worker events in every worker process, so with
``--processes N`` the once-per-worker Celery signals fire once per process.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal as os_signals
import threading
import weakref
from typing import Any

from jobbridge import JobBridge
from jobbridge import signals as core

from .. import signals
from ..exceptions import InvalidTaskError, NotRegistered
from ..ports import AppPort
from . import flow, runner

_apps: weakref.WeakKeyDictionary[JobBridge, AppPort] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_running: list[WorkerInfo] = []


class WorkerInfo:
    """The ``sender`` / ``instance`` of the worker signals: what Celery's worker object offers."""

    def __init__(self, worker: Any, app: AppPort) -> None:
        self.worker = worker
        self.app = app
        self.options = worker.options
        self.hostname: str = worker.options.hostname
        self.concurrency: int = worker.options.concurrency
        self.pid = os.getpid()

    def __repr__(self) -> str:
        return f"<Worker: {self.hostname} (jobbridge)>"


def adopt(bridge: JobBridge, app: AppPort) -> None:
    """Remember that ``bridge`` is ``app``'s, so its workers fire the app's Celery signals."""
    _apps[bridge] = app


def _app_of(worker: Any) -> AppPort | None:
    bridge = getattr(worker, "bridge", None)
    return _apps.get(bridge) if isinstance(bridge, JobBridge) else None


def _options(worker: Any) -> dict[str, Any]:
    opts = worker.options
    return {"queues": list(opts.queues), "concurrency": opts.concurrency, "processes": opts.processes,
            "hostname": opts.hostname, "max_tasks_per_child": opts.max_jobs}


def on_worker_started(sender: Any, **kwargs: Any) -> None:
    app = _app_of(sender)
    if app is None:
        return
    info = WorkerInfo(sender, app)
    runner.set_hostname(info.hostname)
    with _lock:
        _running.append(info)
    signals.celeryd_init.send(sender=info.hostname, instance=info, conf=app.conf, options=_options(sender))
    signals.worker_init.send(sender=info)
    signals.worker_process_init.send(sender=None)
    signals.celeryd_after_setup.send(sender=info.hostname, instance=info, conf=app.conf)
    if not signals.logging_is_configured_by_app():
        root = logging.getLogger()
        for signal, logger in ((signals.after_setup_logger, root),
                               (signals.after_setup_task_logger, logging.getLogger("celery.task"))):
            signal.send(sender=None, logger=logger, loglevel=root.getEffectiveLevel(), logfile=None,
                        format=None, colorize=False)
    signals.worker_ready.send(sender=info)


def on_worker_stopping(sender: Any, **kwargs: Any) -> None:
    app = _app_of(sender)
    if app is None:
        return
    reason = str(kwargs.get("reason") or "")
    sig = reason.removeprefix("received ") if reason.startswith("received SIG") else None
    signals.worker_shutting_down.send(sender=sender.options.hostname, sig=sig, how="Warm", exitcode=0)


def on_worker_stopped(sender: Any, **kwargs: Any) -> None:
    with _lock:
        found = [info for info in _running if info.worker is sender]
        for info in found:
            _running.remove(info)
    for info in found:
        _shutdown(info)


def _shutdown(info: WorkerInfo) -> None:
    exitcode = getattr(info.worker, "exit_code", 0)
    signals.worker_process_shutdown.send(sender=None, pid=os.getpid(), exitcode=exitcode)
    signals.worker_shutdown.send(sender=info)


def _at_exit() -> None:
    with _lock:
        left = list(_running)
        _running.clear()
    for info in left:
        _shutdown(info)


def on_message_discarded(sender: Any, envelope: Any = None, reason: str = "", **kwargs: Any) -> None:
    """A message no worker can run: AppPort's task_unknown (no such task) or task_rejected (unreadable)."""
    if envelope is None:
        return
    if reason.startswith("UnknownJob"):
        signals.task_unknown.send(sender=None, message=envelope, exc=NotRegistered(envelope.name),
                                  name=envelope.name, id=envelope.id)
    else:
        signals.task_rejected.send(sender=None, message=envelope, exc=InvalidTaskError(reason))


def on_job_cancelled(sender: Any, envelope: Any = None, terminated: bool = False, **kwargs: Any) -> None:
    """A revoked task was skipped, or stopped (terminate=True): AppPort's task_revoked; its chord fails."""
    task = getattr(sender, "celery_task", None)
    if task is None or envelope is None:
        return
    request = runner.message_request(task, envelope)
    signals.task_revoked.send(sender=task, request=request, terminated=terminated,
                              signum=os_signals.SIGTERM if terminated else None, expired=False)
    flow.revoked(task, request, "terminated" if terminated else "revoked")


core.job_cancelled.connect(on_job_cancelled, weak=False)
core.worker_started.connect(on_worker_started, weak=False)
core.message_discarded.connect(on_message_discarded, weak=False)
def on_configure_logging(sender: Any, loglevel: str = "INFO", **kwargs: Any) -> bool:
    """The CLI asks before it sets up logging: an app that connected setup_logging does it instead."""
    return signals.configure_logging(loglevel)


core.worker_stopping.connect(on_worker_stopping, weak=False)
core.worker_stopped.connect(on_worker_stopped, weak=False)
core.worker_configure_logging.connect(on_configure_logging, weak=False)
atexit.register(_at_exit)
