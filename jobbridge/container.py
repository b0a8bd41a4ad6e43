"""A small service container: what a running job resolves instead of capturing.

Bindings are instances, factories (a new object per resolve) or scoped
factories (one object per job, dropped when the job ends, so one job cannot
leak per-request-shaped state into the next).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")

_scope: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar("jobbridge_scope", default=None)


class Container:
    """Instances, factories and scoped factories, keyed by type (or any hashable key)."""

    def __init__(self) -> None:
        self._instances: dict[Any, Any] = {}
        self._factories: dict[Any, Callable[[Container], Any]] = {}
        self._scoped: dict[Any, Callable[[Container], Any]] = {}

    def instance(self, key: type[T], value: T) -> None:
        """Always resolve ``key`` to this one object."""
        self._instances[key] = value

    def factory(self, key: type[T], make: Callable[[Container], T]) -> None:
        """Build a new object on every resolve."""
        self._factories[key] = make

    def scoped(self, key: type[T], make: Callable[[Container], T]) -> None:
        """Build one object per job (per `scope()`), dropped when the job ends."""
        self._scoped[key] = make

    def resolve(self, key: type[T]) -> T:
        if key in self._instances:
            return cast(T, self._instances[key])
        if key in self._scoped:
            cache = _scope.get()
            if cache is None:
                raise LookupError(f"{_name(key)} is scoped to a job; resolve it inside a running job")
            if key not in cache:
                cache[key] = self._scoped[key](self)
            return cast(T, cache[key])
        if key in self._factories:
            return cast(T, self._factories[key](self))
        raise LookupError(f"nothing is bound for {_name(key)}; bind it with container.instance/factory/scoped")

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """One job's scope: scoped bindings built inside it are flushed when it exits."""
        token = self.enter_scope()
        try:
            yield
        finally:
            self.exit_scope(token)

    # `scope` in two calls, for the executor's every attempt (no generator context manager per attempt):
    #     token = container.enter_scope()
    #     try: ...
    #     finally: container.exit_scope(token)

    def enter_scope(self) -> contextvars.Token[dict[Any, Any] | None]:
        """Open one job's scope (`scope`'s first half); pass what it returns to `exit_scope`."""
        return _scope.set({})

    def exit_scope(self, token: contextvars.Token[dict[Any, Any] | None]) -> None:
        """Close the scope `enter_scope` opened: its scoped objects are closed and dropped."""
        cache = _scope.get() or {}
        _scope.reset(token)
        for value in cache.values():
            close = getattr(value, "close", None)
            if callable(close):
                close()

    def flush_scoped(self) -> None:
        """Drop this scope's scoped objects now (the worker does it between jobs)."""
        cache = _scope.get()
        if cache is not None:
            cache.clear()


def _name(key: Any) -> str:
    return getattr(key, "__qualname__", repr(key))
