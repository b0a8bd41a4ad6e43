"""Running one task call the way Celery's tracer does, in a worker and in eager mode alike.

Order of events, as in Celery:

- success: ``task_prerun``, ``before_start``, the task, ``on_success``, ``task_success``,
  ``after_return(SUCCESS)``, ``task_postrun(state=SUCCESS)``;
- failure: ... the task raised, ``on_failure``, ``task_failure``, ``after_return(FAILURE)``,
  ``task_postrun(state=FAILURE)``;
- retry: ... ``on_retry``, ``task_retry``, ``task_postrun(state=RETRY)``;
- ``Ignore`` / ``Reject``: ``task_postrun(state=IGNORED / REJECTED)``.

``autoretry_for`` is applied around the call: a matching exception becomes
``self.retry(exc=..., countdown=<Celery's backoff>)``. What the outcome means for the
jobbridge attempt (acknowledge, release, fail) is decided by the caller.
"""

from __future__ import annotations

import logging
import random
import time
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .. import signals, states
from ..exceptions import Ignore, Reject, Retry, TaskPredicate
from ..ports import TaskPort
from ..request import Request, task_stack
from ..results.backend import keep_call
from . import trace_log

log = logging.getLogger("jobbridge.compat.task")


class ExceptionInfo:
    """An exception with its traceback, as Celery hands it to ``on_failure`` and ``task_failure``."""

    def __init__(self, exc: BaseException, internal: bool = False) -> None:
        self.type: type[BaseException] = type(exc)
        self.exception = exc
        self.tb: TracebackType | None = exc.__traceback__
        self.internal = internal
        self.traceback = "".join(traceback.format_exception(exc))

    @property
    def exc_info(self) -> tuple[type[BaseException], BaseException, TracebackType | None]:
        return self.type, self.exception, self.tb

    def __str__(self) -> str:
        return self.traceback

    def __repr__(self) -> str:
        return f"<ExceptionInfo: {self.exception!r}>"


@dataclass
class Traced:
    """How one call ended: its Celery state, its return value (or exception) and the exception info."""

    state: str
    retval: Any
    exc: BaseException | None = None
    einfo: ExceptionInfo | None = None
    runtime: float = 0.0


def backoff_countdown(task: TaskPort, retries: int) -> int:
    """Celery's autoretry backoff: factor x 2^retries, capped at retry_backoff_max, full jitter if set."""
    factor = int(max(1.0, float(task.retry_backoff)))
    countdown = min(int(task.retry_backoff_max), factor * int(2 ** max(0, retries)))
    if task.retry_jitter:
        countdown = random.randrange(countdown + 1)
    return max(0, countdown)


def _call(task: TaskPort, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The task's body (its own ``__call__`` when it has one), with autoretry_for applied."""
    fun = task.jobbridge_body()
    try:
        return fun(*args, **kwargs)
    except TaskPredicate:
        raise
    except Exception as exc:
        if not _autoretries(task, exc):
            raise
        options = dict(task.retry_kwargs or {})
        if task.retry_backoff:
            options["countdown"] = backoff_countdown(task, task.request.retries)
        raise task.retry(exc=exc, **options) from None


def _autoretries(task: TaskPort, exc: Exception) -> bool:
    wanted = tuple(task.autoretry_for or ())
    unwanted = tuple(task.dont_autoretry_for or ())
    return bool(wanted) and isinstance(exc, wanted) and not (unwanted and isinstance(exc, unwanted))


def trace(task: TaskPort, request: Request, args: list[Any], kwargs: dict[str, Any], *, eager: bool) -> Traced:
    """Run the task once under ``request`` and report how it ended; hooks and signals as Celery's."""
    task.request_stack.push(request)
    task_stack().append(task)
    try:
        signals.task_prerun.send(sender=task, task_id=request.id, task=task, args=args, kwargs=kwargs)
        keep_call(task, request, eager)  # result_extended: the call, kept beside the result
        traced = _run(task, request, args, kwargs, eager)
        if traced.state in (states.SUCCESS, states.FAILURE):
            _hook(eager, task.after_return, traced.state, traced.retval, request.id, args, kwargs, traced.einfo)
        signals.task_postrun.send(sender=task, task_id=request.id, task=task, args=args, kwargs=kwargs,
                                  retval=traced.retval, state=traced.state)
        return traced
    finally:
        task_stack().pop()
        task.request_stack.pop()


def _run(task: TaskPort, request: Request, args: list[Any], kwargs: dict[str, Any], eager: bool) -> Traced:
    started = time.monotonic()
    try:
        task.before_start(request.id, args, kwargs)
        retval = _call(task, args, kwargs)
    except (Reject, Ignore) as exc:
        einfo = ExceptionInfo(exc, internal=True)
        trace_log.failed(task, request, exc, einfo.traceback)
        return Traced(states.REJECTED if isinstance(exc, Reject) else states.IGNORED, exc, exc, einfo)
    except Retry as exc:
        return on_retry(task, request, exc)
    except Exception as exc:
        return on_failure(task, request, exc)
    runtime = time.monotonic() - started
    _hook(eager, task.on_success, retval, request.id, args, kwargs)
    signals.task_success.send(sender=task, result=retval, runtime=runtime)
    trace_log.succeeded(request, retval, runtime)
    return Traced(states.SUCCESS, retval, runtime=runtime)


def on_retry(task: TaskPort, request: Request, exc: Retry) -> Traced:
    einfo = ExceptionInfo(exc)
    _hook(False, task.on_retry, exc.exc, request.id, request.args, request.kwargs, einfo)
    signals.task_retry.send(sender=task, request=request, reason=exc, einfo=einfo)
    trace_log.retried(request, exc)
    return Traced(states.RETRY, exc, exc, einfo)


def on_failure(task: TaskPort, request: Request, exc: BaseException) -> Traced:
    einfo = ExceptionInfo(exc)
    _hook(False, task.on_failure, exc, request.id, request.args, request.kwargs, einfo)
    signals.task_failure.send(sender=task, task_id=request.id, exception=exc, args=request.args,
                              kwargs=request.kwargs, traceback=exc.__traceback__, einfo=einfo)
    trace_log.failed(task, request, exc, einfo.traceback)
    return Traced(states.FAILURE, exc, exc, einfo)


def _hook(eager: bool, hook: Any, *args: Any) -> None:
    """A task's handler; one that raises is logged (raised in eager mode), and the outcome stands."""
    try:
        hook(*args)
    except Exception:
        if eager:
            raise
        log.exception("the handler %s raised; the task's outcome stands", getattr(hook, "__qualname__", hook))
