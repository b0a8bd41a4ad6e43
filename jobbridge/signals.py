"""Worker and dispatch events as blinker signals; the sender is the job class.

``job_failed.connect(receiver, sender=SendInvoice)`` listens to one job type.
Failure signals carry ``error`` (the stored string) and ``exception`` (the
exception object, traceback attached). A receiver that raises is logged and
never breaks the worker or the dispatch.
"""

from __future__ import annotations

import logging
from typing import Any

from blinker import ANY, NamedSignal, Namespace

_signals = Namespace()
log = logging.getLogger("jobbridge.signals")

job_dispatched = _signals.signal("job_dispatched", doc="a job was pushed: id, envelope, connection")
job_processing = _signals.signal("job_processing", doc="before each attempt: ctx, envelope")
job_processed = _signals.signal("job_processed", doc="an attempt succeeded: ctx, envelope, duration")
job_released = _signals.signal("job_released", doc="an attempt failed, tries left: ctx, delay, error, exception")
job_failed = _signals.signal("job_failed", doc="attempts exhausted: ctx, error, exception")
worker_started = _signals.signal("worker_started", doc="a worker began reserving: worker")
worker_stopping = _signals.signal("worker_stopping", doc="a worker takes no new jobs: worker, stats, reason")
worker_stopped = _signals.signal("worker_stopped", doc="a worker's loop has ended, jobs settled: worker, stats")
worker_configure_logging = _signals.signal(
    "worker_configure_logging",
    doc="the CLI is about to set up logging: loglevel; a receiver returning True has done it instead",
)
job_cancelled = _signals.signal(
    "job_cancelled", doc="a cancelled job was skipped, or stopped while running: envelope, terminated")
job_expired = _signals.signal(
    "job_expired", doc="a job not started by its expires_at was acknowledged unrun: envelope")
message_discarded = _signals.signal("message_discarded", doc="a message that could not be run was failed: reason")
queue_operation_failed = _signals.signal("queue_operation_failed", doc="a store call failed: operation, error")
scheduler_starting = _signals.signal(
    "scheduler_starting",
    doc="a scheduler is about to read its app's entries (sender: the JobBridge): embedded (a worker's thread, "
        "or a scheduler alone), options (its command line's scheduler options); a receiver that raises stops "
        "it from starting, one that returns a number caps its wait between looks at that many seconds")
schedules_listing = _signals.signal(
    "schedules_listing",
    doc="`jobbridge schedules` is about to read the app's entries to list them or run one by hand (sender: the "
        "JobBridge): an app adds entries from a source of its own here, as at scheduler_starting; nothing fires")

ALL: tuple[NamedSignal, ...] = (
    job_dispatched, job_processing, job_processed, job_released, job_failed, job_cancelled, job_expired,
    worker_started, worker_stopping, worker_stopped, worker_configure_logging, message_discarded,
    queue_operation_failed, scheduler_starting, schedules_listing,
)


def send(signal: NamedSignal, sender: Any, **kwargs: Any) -> None:
    """Call every receiver; one that raises is logged and the rest still run."""
    if not signal.receivers:
        return
    for receiver in signal.receivers_for(sender if sender is not None else ANY):
        try:
            receiver(sender, **kwargs)
        except Exception:
            log.exception("a receiver of %s raised; the worker goes on", signal.name)
