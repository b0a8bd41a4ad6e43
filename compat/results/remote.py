"""A stored failure as an exception again, and an exception as the fields a result record stores.

The store keeps a failure as text: ``error`` (``"Type: message"``), ``traceback`` and
``exception_type`` (``"module.QualName"``). A reader gets the task's own exception type
back when it can import it and build it from the message (``ValueError("boom")``), so
``except ValueError`` around ``.get()`` works as with Celery; otherwise a stand-in,
a `RemoteTaskError` subclass named after the original type, whose message says which
type it stands for and why it is not the real one.
"""

from __future__ import annotations

import ast
import importlib
import threading
import traceback as tb
from typing import Any

from jobbridge.results import ResultRecord

from ..exceptions import CeleryError
from .serialization import UnpickleableExceptionWrapper

_lock = threading.Lock()
_stand_ins: dict[str, type[RemoteTaskError]] = {}
#: exception types the facade raises to end an attempt (compat/running/runner.py); a record naming one holds
#: the task's own error inside. Their earlier module path stays listed: records stored before it moved name it.
_WRAPPERS = ("jobbridge.compat.running.runner.TaskFailed", "jobbridge.compat.running.runner.TaskRejected",
             "jobbridge.compat.runner.TaskFailed", "jobbridge.compat.runner.TaskRejected")


class RemoteTaskError(CeleryError):
    """Stands for a task's exception whose type cannot be imported (or built) in this process."""

    exc_type: str = ""
    exc_message: str = ""

    def __init__(self, exc_type: str, message: str) -> None:
        self.exc_type, self.exc_message = exc_type, message
        super().__init__(f"{message} (the task raised {exc_type}, which cannot be imported or built here, "
                         "so this stand-in is raised instead)")


def stand_in(exc_type: str, message: str) -> RemoteTaskError:
    """A `RemoteTaskError` whose class is named after ``exc_type`` (one class per type name)."""
    module, _, qualname = exc_type.rpartition(".")
    with _lock:
        cls = _stand_ins.get(exc_type)
        if cls is None:
            name = qualname or exc_type or "RemoteTaskError"
            cls = type(name, (RemoteTaskError,), {"__module__": module or __name__, "__qualname__": name})
            _stand_ins[exc_type] = cls
    return cls(exc_type, message)


def split_error(record: ResultRecord) -> tuple[str, str]:
    """``(exception type, message)`` of a stored failure, unwrapping the facade's own wrapper."""
    exc_type = record.exception_type or ""
    error = (record.error or "").split("\n", 1)[0]
    if exc_type in _WRAPPERS:  # "TaskFailed: module.Type: message"
        error = error.split(": ", 1)[1] if ": " in error else error
        inner, sep, message = error.partition(": ")
        if sep and "." in inner and " " not in inner:
            return inner, message
        return exc_type, error
    name = exc_type.rpartition(".")[2]
    for prefix in (f"{name}: ", f"{exc_type}: "):
        if error.startswith(prefix):
            return exc_type, error[len(prefix):]
    if error in (name, exc_type):
        return exc_type, ""
    return exc_type, error


def exception_of(record: ResultRecord) -> BaseException:
    """The exception a FAILURE (or RETRY) record stands for: the real type where possible."""
    exc_type, message = split_error(record)
    cls = _importable(exc_type)
    if cls is not None:
        for args in (_several(message), (message,) if message else ()):
            if args is None:
                continue
            try:
                return cls(*args)
            except Exception:  # a constructor that wants other arguments
                pass
        return _wrapped(cls, message)
    return stand_in(exc_type or "builtins.Exception", message)


def _wrapped(cls: type[BaseException], message: str) -> UnpickleableExceptionWrapper:
    """What Celery's worker stores for an exception that cannot be rebuilt from its arguments."""
    args = _several(message) or ((message,) if message else ())
    text = f"{cls.__qualname__}({', '.join(repr(arg) for arg in args)})"
    return UnpickleableExceptionWrapper(cls.__module__, cls.__qualname__, args, text)


def _several(message: str) -> tuple[Any, ...] | None:
    """The arguments of an exception made with several (``Reject("why", False)``), from their text.

    Such an exception's message is the repr of its ``args``; Celery's result keeps the
    arguments themselves, so the exception read back is built from them, not from the text.
    """
    if not (message.startswith("(") and message.endswith(")")):
        return None
    try:
        found = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return found if isinstance(found, tuple) and len(found) > 1 else None


def _importable(exc_type: str) -> type[BaseException] | None:
    module, _, qualname = exc_type.rpartition(".")
    if not module:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def qualified(exc: BaseException) -> str:
    """``module.QualName`` of an exception's type, as the store keeps it."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def failure_fields(exc: BaseException) -> dict[str, Any]:
    """``error``, ``traceback`` and ``exception_type`` for ``exc``, as the core's executor stores them."""
    text = "".join(tb.format_exception(exc)).rstrip() if exc.__traceback__ is not None else None
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": text, "exception_type": qualified(exc)}


__all__ = ["RemoteTaskError", "exception_of", "failure_fields", "qualified", "split_error", "stand_in"]
