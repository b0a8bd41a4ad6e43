"""A Celery task as a jobbridge job, and what its attempt means to the worker.

Each task gets a `Job` class named after the task, whose payload is the call's
``args`` and ``kwargs``. Its ``handle`` rebuilds ``self.request`` from the message
headers, runs the task through the tracer (compat/running/tracing.py) under its soft
time limit, and ends the attempt as Celery would:

=====================  ============================================================
task outcome           jobbridge attempt
=====================  ============================================================
returned               acknowledged (succeeded)
raised (no retry)      failed now: AppPort does not retry an exception by itself
``self.retry()``       released after the countdown (the same message, one attempt on);
                       re-sent as a new message when the retry changes the arguments,
                       asks for more retries than the message's tries, or throw=False
``Ignore``             acknowledged, without a success
``Reject``             ``requeue=True``: released at once; else failed, stored as FAILURE
                       holding the Reject (as Celery stores it)
expired                acknowledged unrun; ``task_revoked(expired=True)``
hard time limit        the core's timeout stops it; failed with TimeLimitExceeded
=====================  ============================================================

``self.request.retries`` is the retries already made: the message's attempt - 1
(plus those of earlier messages of a re-sent retry). A redelivery after a lost
worker therefore counts as a retry here, where Celery would not count it.
"""

from __future__ import annotations

import dataclasses
import socket
from datetime import UTC, datetime
from typing import Any

from jobbridge import AcknowledgeJob, Envelope, FailJob, Job, JobContext, JobTimeout, ReleaseJob
from jobbridge.execution import CallNext
from jobbridge.job import options_of

from .. import codec, signals, states
from ..exceptions import ChordError, Ignore, Reject, Retry, TimeLimitExceeded
from ..ports import TaskPort
from ..request import WORKFLOW_HEADERS, Request, custom_headers
from ..results.groupresult import as_stored
from ..results.remote import qualified
from . import flow, recording, trace_log
from .calling import FOREVER_TRIES, NO_TIME_LIMIT, tries_for
from .softlimit import soft_limit
from .tracing import ExceptionInfo, Traced, on_failure, trace

_worker_hostname: list[str] = []


def hostname() -> str:
    """The running worker's name (``-n``), else this machine's."""
    return _worker_hostname[-1] if _worker_hostname else socket.gethostname()


def set_hostname(name: str) -> None:
    _worker_hostname.append(name)


class TaskFailed(FailJob):
    """The task failed (Celery state FAILURE); its exception is the ``__cause__``; handlers already ran.

    Its message is ``"module.Type: message"`` of that exception, so a reader of the stored
    failure can raise the task's own exception type again (compat/results/remote.py).
    """

    @classmethod
    def of(cls, exc: BaseException, message: str | None = None) -> TaskFailed:
        failed = cls(f"{qualified(exc)}: {exc if message is None else message}")
        failed.__cause__ = exc
        failed.stands_for_cause = message is None  # the core stores the task's own exception
        return failed


class TaskRejected(FailJob):
    """Kept so that failures stored by earlier versions still read: a rejection is now a `TaskFailed`."""


class Replaced(Ignore):
    """``self.replace(sig)``: the task handed its id, and what follows it, to ``sig``."""


class CeleryJob(Job, abstract=True):
    """The jobbridge job of a Celery task: its payload is the call."""

    args: list  # type: ignore[type-arg]
    kwargs: dict  # type: ignore[type-arg]

    celery_task: Any = None

    def handle(self, ctx: JobContext) -> Any:
        """Run the task; its return value is the job's (stored as the result when the task keeps results)."""
        task = type(self).celery_task
        if options_of(type(self)).store_result and _ignores(task, ctx.headers.get("ignore_result")):
            _keep_no_result(self, ctx)
        try:
            return run(task, ctx, codec.decode(self.args), codec.decode(self.kwargs))
        except (AcknowledgeJob, ReleaseJob, FailJob):
            raise
        except Exception as exc:  # the facade's own machinery failed, not the task
            signals.task_internal_error.send(sender=task, task_id=ctx.id, args=self.args, kwargs=self.kwargs,
                                             request=None, exception=exc, traceback=exc.__traceback__,
                                             einfo=ExceptionInfo(exc, internal=True))
            raise

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        """The core gave up without the task having said so (attempts exhausted by lost workers)."""
        if isinstance(error, TaskFailed | TaskRejected):
            return
        task = type(self).celery_task
        request = worker_request(task, ctx, codec.decode(self.args), codec.decode(self.kwargs))
        traced = on_failure(task, request, error)
        flow.failed(task, request, error, traced.einfo.traceback if traced.einfo else None)
        recording.keep(task, ctx, request, states.FAILURE, exc=error)


def _keep_no_result(job: CeleryJob, ctx: JobContext) -> None:
    """This call asked for no result (``apply_async(ignore_result=True)``) though its task keeps them.

    The core stores what the job's class says, so this one attempt runs as the class's twin
    that stores nothing (the same name, payload and options, but ``store_result`` and
    ``track_started`` off), as Celery's worker honours the message's ``ignore_result``.
    A STARTED the core already wrote for it is dropped, so nothing at all is kept.
    """
    cls = type(job)
    twin = _twins.get(cls)
    if twin is None:
        twin = _twins[cls] = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                                         "__qualname__": cls.__qualname__}, abstract=True)
    twin.options = dataclasses.replace(cls.options, store_result=False, track_started=False)  # current options
    job.__class__ = twin
    if cls.options.track_started:
        cls.celery_task.app.backend.forget(str(ctx.headers.get("id") or ctx.id))


_twins: dict[type[CeleryJob], type[CeleryJob]] = {}


def job_class(task: TaskPort) -> type[CeleryJob]:
    """A Job class for ``task``: its name is the task name (options are set per message)."""
    namespace = {"__module__": __name__, "__qualname__": f"CeleryJob[{task.name}]", "celery_task": task}
    return type(f"CeleryJob[{task.name}]", (CeleryJob,), namespace, name=task.name,
                queue=task.queue or "celery", tries=tries_for(task), timeout=declared_limit(task),
                rate_limit=rate_limit_of(task), **recording.result_options(task))


def declared_limit(task: TaskPort) -> float:
    """The task's hard time limit (else ``task_time_limit``), or `NO_TIME_LIMIT`: what a worker checks at start
    against a broker that cuts off a job held too long (each message carries its own limit)."""
    limit = getattr(task, "time_limit", None) or task.app.conf["task_time_limit"]
    return min(float(limit), NO_TIME_LIMIT) if isinstance(limit, int | float) and limit > 0 else NO_TIME_LIMIT


def rate_limit_of(task: TaskPort) -> Any:
    """The task's ``rate_limit`` (else ``task_default_rate_limit``), none with ``worker_disable_rate_limits``.

    A string or number as Celery reads it (``"10/m"``, ``5``), or a jobbridge ``RateLimit``
    for a limit shared by every worker.
    """
    conf = task.app.conf
    if conf["worker_disable_rate_limits"]:
        return None
    own = getattr(task, "rate_limit", None)
    return own if own is not None else conf["task_default_rate_limit"]


def rebind(job: type[CeleryJob], task: TaskPort) -> None:
    """``register_task`` of a new instance under a registered name: the job class runs it from now on.

    The class stays the one the app's JobBridge knows (a name has one class for ever), so
    an app already in use takes the new instance, with its options, as Celery's does.
    """
    job.options = job_class(task).options
    job.celery_task = task


def worker_request(task: TaskPort, ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Request:
    headers = codec.decode(dict(ctx.headers))  # sent encoded (a signature in it may carry bytes, dates)
    limits = headers.get("timelimit") or [None, None]
    return Request(
        id=headers.get("id") or ctx.id, task=task.name, args=args, kwargs=kwargs,
        retries=int(headers.get("retries") or 0) + ctx.attempt - 1, is_eager=False, called_directly=False,
        hostname=hostname(), headers=custom_headers(headers), eta=headers.get("eta"),
        expires=headers.get("expires"), timelimit=tuple(limits), time_limit=limits[0], soft_time_limit=limits[1],
        root_id=headers.get("root_id"), parent_id=headers.get("parent_id"), origin=headers.get("origin"),
        ignore_result=_ignores(task, headers.get("ignore_result")), correlation_id=headers.get("id") or ctx.id,
        delivery_info={"exchange": "", "routing_key": ctx.queue, "priority": None, "redelivered": ctx.attempt > 1},
        properties={"correlation_id": headers.get("id") or ctx.id, "delivery_mode": 2,
                    **(headers.get("properties") or {})},
        argsrepr=headers.get("argsrepr"), kwargsrepr=headers.get("kwargsrepr"),
        max_attempts=ctx.max_attempts, attempt=ctx.attempt, connection=ctx.connection,
        **{key: headers.get(key) for key in WORKFLOW_HEADERS},
    )


def message_request(task: TaskPort, env: Envelope) -> Request:
    """The request of a message that is not running (a revoked one), from its envelope."""
    ctx = JobContext(id=env.id, name=env.name, queue=env.queue, attempt=max(1, env.attempts),
                     max_attempts=env.tries, timeout=env.timeout, headers=env.headers)
    payload = env.payload or {}
    return worker_request(task, ctx, codec.decode(list(payload.get("args") or [])),
                          codec.decode(dict(payload.get("kwargs") or {})))


def _ignores(task: TaskPort, said: Any) -> bool:
    """The message's ignore_result; a message that does not say (send_task) follows the task."""
    return recording.ignores_result(task) if said is None else bool(said)


def run(task: TaskPort, ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """One attempt of a task in a worker: its return value, or it raises what the worker should do."""
    request = worker_request(task, ctx, args, kwargs)
    trace_log.received(request)
    skipped = recording.skip(task, ctx, request)
    if skipped is not None:
        raise AcknowledgeJob(skipped)
    signals.task_received.send(sender=None, request=request)
    soft = request.soft_time_limit or task.soft_time_limit or task.app.conf["task_soft_time_limit"]
    with soft_limit(soft):
        traced = trace(task, request, args, kwargs, eager=False)
    return _conclude(task, ctx, request, traced)


def _conclude(task: TaskPort, ctx: JobContext, request: Request, traced: Traced) -> Any:
    if traced.state == states.SUCCESS:
        value = as_stored(traced.retval)  # a returned AsyncResult is kept as its as_tuple(), as Celery keeps it
        flow.succeeded(task, request, value)
        recording.keep(task, ctx, request, states.SUCCESS, result=value)
        return value
    if traced.state == states.IGNORED:
        if request.chord and not isinstance(traced.exc, Replaced):
            flow.chord_failed(task.app, request, ChordError(f"header task {request.id} raised Ignore, so it "
                                                            "has no result to give the chord"), None)
        raise AcknowledgeJob(f"task {task.name}[{request.id}] ignored")
    if traced.state == states.REJECTED and isinstance(traced.exc, Reject):
        if traced.exc.requeue:
            raise ReleaseJob(0.0, f"rejected with requeue: {traced.exc.reason}")
        _rejected(task, ctx, request, traced.exc, traced.einfo)
    if traced.state == states.RETRY and isinstance(traced.exc, Retry):
        _retry(task, ctx, request, traced.exc)
    exc = traced.exc or RuntimeError(f"task ended in state {traced.state}")
    flow.failed(task, request, exc, traced.einfo.traceback if traced.einfo else None)
    recording.keep(task, ctx, request, states.FAILURE, exc=exc)
    raise TaskFailed.of(exc)


def _rejected(task: TaskPort, ctx: JobContext, request: Request, exc: Reject, einfo: ExceptionInfo | None) -> None:
    """``Reject(requeue=False)``: the message never runs again, so it ends as a FAILURE, as Celery ends it.

    Celery's worker stores the ``Reject`` itself as the FAILURE, with no traceback, sends
    ``task_failure`` and treats it as any failure (errbacks, chord, chain) without calling
    the task's ``on_failure``; ``get()`` raises the ``Reject``. The message goes to the
    failed store, jobbridge's dead-letter queue, with that reason.
    """
    signals.task_failure.send(sender=task, task_id=request.id, exception=exc, args=request.args,
                              kwargs=request.kwargs, traceback=exc.__traceback__, einfo=einfo)
    exc.__traceback__ = None
    flow.failed(task, request, exc, None)
    recording.keep(task, ctx, request, states.FAILURE, exc=exc)
    raise TaskFailed.of(exc)


def _retry(task: TaskPort, ctx: JobContext, request: Request, retry: Retry) -> None:
    """Release the message for its retry, or, when it cannot carry the retry, send a new one."""
    delay = retry_delay(task, retry.when)
    if retry.resend is None and ctx.attempt < ctx.max_attempts:
        retry.delay = delay
        if retry.exc is not None:  # the RETRY result holds the task's exception, as Celery's mark_as_retry
            retry.__cause__, retry.stands_for_cause = retry.exc, True
        raise retry
    send_retry(task, request, retry)
    if not request.ignore_result:
        recording.keep_anyway(task, request, states.RETRY, retry.exc or retry)
    raise AcknowledgeJob(f"task {task.name}[{request.id}] re-sent for retry {request.retries + 1}")


def retry_delay(task: TaskPort, when: Any) -> float:
    if isinstance(when, datetime):
        moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return max(0.0, moment.timestamp() - task.app.jobbridge_app().clock.now())
    return max(0.0, float(when or 0.0))


def send_retry(task: TaskPort, request: Request, retry: Retry) -> None:
    """Publish the retry as a new message carrying the task id and the retry count (as Celery does)."""
    plan = retry.resend or {}
    args, kwargs = list(plan.get("args", request.args or [])), dict(plan.get("kwargs", request.kwargs or {}))
    options = dict(plan.get("options") or {})
    bridge = task.app.jobbridge_app()
    now = bridge.clock.now()
    sent_args, sent_kwargs = codec.encode_call(task.name, args, kwargs, task.positional_names())
    delay = retry_delay(task, retry.when)
    headers = {**(request.headers or {}), "lang": "py", "task": task.name, "id": request.id,
               "retries": request.retries + 1, "timelimit": list(request.timelimit or (None, None)),
               "root_id": request.root_id, "parent_id": request.parent_id, "origin": request.origin,
               "eta": datetime.fromtimestamp(now + delay, UTC).isoformat(), "expires": request.expires,
               "argsrepr": repr(tuple(args)), "kwargsrepr": repr(kwargs), "ignore_result": request.ignore_result,
               **{key: request.get(key) for key in WORKFLOW_HEADERS if request.get(key) is not None}}
    tries = FOREVER_TRIES if retry.max_retries is None else max(1, retry.max_retries - request.retries)
    queue = options.get("queue") or (request.delivery_info or {}).get("routing_key") or task.queue
    env = Envelope.new(task.name, str(queue or task.app.conf["task_default_queue"]),
                       {"args": sent_args, "kwargs": sent_kwargs}, tries=tries,
                       timeout=float(request.time_limit or NO_TIME_LIMIT), now=now, available_at=now + delay,
                       headers=codec.encode(headers, "a header", task.name))
    bridge.push([env], connection=request.get("connection"))


def middleware(ctx: JobContext, call_next: CallNext) -> Any:
    """Around every attempt: a task stopped at its hard time limit is failed, as Celery fails it."""
    job = ctx.job
    if not isinstance(job, CeleryJob):
        return call_next()
    try:
        return call_next()
    except JobTimeout as exc:
        task = type(job).celery_task
        limit = TimeLimitExceeded(f"TimeLimitExceeded({ctx.timeout:g})")
        limit.__cause__ = exc
        request = worker_request(task, ctx, codec.decode(job.args), codec.decode(job.kwargs))
        traced = on_failure(task, request, limit)  # no task_postrun: AppPort's pool kills the process
        flow.failed(task, request, limit, traced.einfo.traceback if traced.einfo else None)
        recording.keep(task, ctx, request, states.FAILURE, exc=limit)
        raise TaskFailed.of(limit, f"hard time limit ({ctx.timeout:g}s) exceeded") from exc


__all__ = ["CeleryJob", "ExceptionInfo", "Replaced", "TaskFailed", "TaskRejected", "hostname", "job_class",
           "middleware", "rebind", "run", "send_retry", "worker_request"]
