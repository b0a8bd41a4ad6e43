"""``celery.app.trace``: the log lines a worker writes for each task, as Celery writes them.

Celery logs a task's receipt on ``celery.worker.strategy`` and how it ended on
``celery.app.trace``, each with one of the format strings below and the values
both as the ``%`` arguments and as the record's ``data`` (``extra={'data': ...}``),
so log handlers and tests read ``record.data["id"]``, ``record.data["args"]``.
The formats are read when a line is written, from ``celery.app.trace`` under
`install_as_celery` (else from this module), so code that sets, say,
``celery.app.trace.LOG_SUCCESS`` to shorten the success line changes this worker's
lines as it changes Celery's.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from ..exceptions import Ignore, Reject
from ..ports import TaskPort
from ..request import Request

LOG_RECEIVED = "Task %(name)s[%(id)s] received"
LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"
LOG_FAILURE = "Task %(name)s[%(id)s] %(description)s: %(exc)s"
LOG_INTERNAL_ERROR = "Task %(name)s[%(id)s] %(description)s: %(exc)s"
LOG_IGNORED = "Task %(name)s[%(id)s] %(description)s"
LOG_REJECTED = "Task %(name)s[%(id)s] %(exc)s"
LOG_RETRY = "Task %(name)s[%(id)s] retry: %(exc)s"

logger = logging.getLogger("celery.app.trace")
received_logger = logging.getLogger("celery.worker.strategy")
#: how long a repr in a log line may be (Celery's saferepr cuts results at 1024 characters)
REPR_MAX = 1024


def _format(name: str) -> str:
    """The format ``name``: celery.app.trace's, when the facade is installed and it was set there."""
    view = sys.modules.get("celery.app.trace")
    found = getattr(view, name, None) if getattr(view, "__jobbridge__", False) else None
    return str(found) if found is not None else str(globals()[name])


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {type(value).__name__}: {exc!r}>"
    return text if len(text) <= REPR_MAX else text[:REPR_MAX] + "..."


def _call(request: Request) -> dict[str, Any]:
    return {"id": request.id, "name": request.shadow or request.task,
            "args": request.get("argsrepr") or _short_repr(request.args),
            "kwargs": request.get("kwargsrepr") or _short_repr(request.kwargs)}


def _log(log: logging.Logger, level: int, name: str, context: dict[str, Any], exc: BaseException | None = None) -> None:
    log.log(level, _format(name), context, exc_info=exc, extra={"data": context})


def received(request: Request) -> None:
    """``Task name[id] received``, before the worker looks at whether it was revoked or has expired."""
    if received_logger.isEnabledFor(logging.INFO):
        _log(received_logger, logging.INFO, "LOG_RECEIVED", {**_call(request), "eta": request.eta})


def succeeded(request: Request, retval: Any, runtime: float) -> None:
    if logger.isEnabledFor(logging.INFO):
        _log(logger, logging.INFO, "LOG_SUCCESS", {**_call(request), "return_value": _short_repr(retval),
                                                   "runtime": runtime})


def retried(request: Request, reason: BaseException) -> None:
    _log(logger, logging.INFO, "LOG_RETRY", {"id": request.id, "name": request.shadow or request.task,
                                             "exc": str(reason)})


def failed(task: TaskPort, request: Request, exc: BaseException, traceback: str, internal: bool = False) -> None:
    """A failure, a rejection or an ``Ignore``, at Celery's level for each (``throws``: expected, INFO)."""
    if isinstance(exc, Reject):
        name, description, level, with_tb = "LOG_REJECTED", "rejected", logging.WARNING, True
    elif isinstance(exc, Ignore):
        name, description, level, with_tb = "LOG_IGNORED", "ignored", logging.INFO, False
    elif internal:
        name, description, level, with_tb = "LOG_INTERNAL_ERROR", "INTERNAL ERROR", logging.CRITICAL, True
    elif isinstance(exc, tuple(getattr(task, "throws", None) or ())):
        name, description, level, with_tb = "LOG_FAILURE", "raised expected", logging.INFO, False
    else:
        name, description, level, with_tb = "LOG_FAILURE", "raised unexpected", logging.ERROR, True
    context = {**_call(request), "hostname": request.hostname, "exc": _short_repr(exc), "traceback": traceback,
               "description": description, "internal": internal}
    _log(logger, level, name, context, exc if with_tb else None)


__all__ = ["LOG_FAILURE", "LOG_IGNORED", "LOG_INTERNAL_ERROR", "LOG_RECEIVED", "LOG_REJECTED", "LOG_RETRY",
           "LOG_SUCCESS", "failed", "logger", "received", "retried", "succeeded"]
