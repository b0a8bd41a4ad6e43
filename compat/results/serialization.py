"""``celery.utils.serialization``: the stand-in for a task's exception that cannot be rebuilt where it is read.

A failure is stored as text (its type and message, compat/results/remote.py). Read
back, it becomes the task's own exception type again when that type can be built
from its arguments. When it cannot (its ``__init__`` wants other arguments than
the ones it passed to ``Exception``, so it does not survive a pickle round trip
either), Celery's worker stores an `UnpickleableExceptionWrapper` instead, and
``get()`` raises that: the original type's module, name and arguments, and its
repr as the text. The facade reads such a failure back as the same wrapper, so
``except UnpickleableExceptionWrapper`` and its ``exc_cls_name`` / ``exc_args``
work as with Celery.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any


def ensure_serializable(items: Sequence[Any], encoder: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``items`` with each one ``encoder`` refuses replaced by its repr (Celery's helper of that name)."""
    safe: list[Any] = []
    for item in items:
        try:
            encoder(item)
        except Exception:
            safe.append(repr(item))
        else:
            safe.append(item)
    return tuple(safe)


def _round_trips(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


class UnpickleableExceptionWrapper(Exception):
    """Stands for an exception that cannot be rebuilt from its arguments; `restore` makes a look-alike."""

    exc_module: str | None = None
    exc_cls_name: str | None = None
    exc_args: tuple[Any, ...] | None = None

    def __init__(self, exc_module: str, exc_cls_name: str, exc_args: Sequence[Any], text: str | None = None) -> None:
        safe = ensure_serializable(exc_args, _round_trips)
        self.exc_module, self.exc_cls_name, self.exc_args, self.text = exc_module, exc_cls_name, safe, text
        super().__init__(exc_module, exc_cls_name, safe, text)

    def restore(self) -> Exception:
        """An exception of a new class named after the original one, with its arguments."""
        cls: type[Exception] = type(str(self.exc_cls_name), (Exception,), {"__module__": self.exc_module})
        return cls(*(self.exc_args or ()))

    def __str__(self) -> str:
        return str(self.text)

    @classmethod
    def from_exception(cls, exc: BaseException) -> UnpickleableExceptionWrapper:
        wrapper = cls(type(exc).__module__, type(exc).__name__, getattr(exc, "args", ()), repr(exc))
        return wrapper.with_traceback(exc.__traceback__)


def get_pickleable_exception(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else its `UnpickleableExceptionWrapper`."""
    try:
        _round_trips(exc)
    except Exception:
        return UnpickleableExceptionWrapper.from_exception(exc)
    return exc


def get_pickled_exception(exc: BaseException) -> BaseException:
    """The reverse of `get_pickleable_exception`: a wrapper's `restore`, any other exception itself."""
    return exc.restore() if isinstance(exc, UnpickleableExceptionWrapper) else exc


__all__ = ["UnpickleableExceptionWrapper", "ensure_serializable", "get_pickleable_exception",
           "get_pickled_exception"]
