"""``ResultSet`` and ``GroupResult``: many results read and waited on together.

A group's results are read in one round trip (``get_many``) for ``ready()``,
``completed_count()``, ``successful()`` and friends, and waited on one after
the other by ``get()`` / ``join()``, within one overall ``timeout``. A
``GroupResult`` can be saved in the store and restored by its id, as in Celery.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .. import states
from ..exceptions import TimeoutError
from ..ports import AppPort
from ..shared import get_current_app
from .asyncresult import FROM_TUPLE, AsyncResult, EagerResult, assert_not_in_task


class ResultSet:
    """Several results, as one."""

    supports_native_join = True

    def __init__(self, results: Iterable[Any], app: AppPort | None = None, ready_barrier: Any = None,
                 **kwargs: Any) -> None:
        self.results: list[Any] = list(results)
        self._app = app

    @property
    def app(self) -> AppPort:
        if self._app is None:
            self._app = get_current_app()
        return self._app

    def add(self, result: Any) -> None:
        if result not in self.results:
            self.results.append(result)

    def remove(self, result: Any) -> None:
        if isinstance(result, str):
            result = AsyncResult(result, app=self._app)
        self.results.remove(result)

    def discard(self, result: Any) -> None:
        with contextlib.suppress(ValueError):
            self.remove(result)

    def update(self, results: Iterable[Any]) -> None:
        self.results.extend(r for r in results if r not in self.results)

    def clear(self) -> None:
        self.results[:] = []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.results)

    def __getitem__(self, index: int) -> Any:
        return self.results[index]

    def __len__(self) -> int:
        return len(self.results)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResultSet) and other.results == self.results

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: [{', '.join(str(r.id) for r in self.results)}]>"

    # -- states, in one round trip --------------------------------------------------------------

    def _states(self) -> list[str | None]:
        """Each member's state (None for a nested set: ask it), reading stored ones together."""
        stored = [r for r in self.results if type(r) is AsyncResult and r.ready_record is None]
        found = self.app.backend.get_many([r.id for r in stored]) if stored else {}
        out: list[str | None] = []
        for r in self.results:
            if isinstance(r, ResultSet):
                out.append(None)
            elif type(r) is AsyncResult and r.ready_record is None:
                record = found.get(r.id)
                out.append(record.state if record is not None else states.PENDING)
            else:
                out.append(r.state)
        return out

    def _each(self, test: Callable[[str], bool], nested: Callable[[ResultSet], bool]) -> list[bool]:
        return [nested(r) if state is None else test(state) for r, state in zip(self.results, self._states(),
                                                                                 strict=True)]

    def ready(self) -> bool:
        return all(self._each(lambda s: s in states.READY_STATES, lambda r: r.ready()))

    def successful(self) -> bool:
        return all(self._each(lambda s: s == states.SUCCESS, lambda r: r.successful()))

    def failed(self) -> bool:
        return any(self._each(lambda s: s == states.FAILURE, lambda r: r.failed()))

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(self._each(lambda s: s == states.SUCCESS, lambda r: r.successful()))

    def maybe_throw(self, callback: Any = None, propagate: bool = True) -> None:
        for result in self.results:
            result.maybe_throw(propagate=propagate)

    throw = maybe_throw

    # -- acting --------------------------------------------------------------------------------

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: float | None = None) -> None:
        """Cancel every member, in one call to the store."""
        ids = [r.id for r in self._leaves() if not isinstance(r, EagerResult)]
        if ids:
            self.app.control.revoke(ids, terminate=terminate, signal=signal)
        if wait:
            self.join(timeout=timeout, propagate=False)

    def forget(self) -> None:
        for result in self.results:
            result.forget()

    def _leaves(self) -> list[AsyncResult]:
        out: list[AsyncResult] = []
        for result in self.results:
            out.extend(result._leaves() if isinstance(result, ResultSet) else [result])
        return out

    # -- waiting -------------------------------------------------------------------------------

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
            callback: Callable[..., Any] | None = None, no_ack: bool = True, on_message: Any = None,
            disable_sync_subtasks: bool = True, on_interval: Callable[[], Any] | None = None,
            **kwargs: Any) -> list[Any] | None:
        """Every member's value, in order (``join``)."""
        return self.join(timeout=timeout, propagate=propagate, interval=interval, callback=callback,
                         on_message=on_message, disable_sync_subtasks=disable_sync_subtasks,
                         on_interval=on_interval)

    def join(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
             callback: Callable[..., Any] | None = None, no_ack: bool = True, on_message: Any = None,
             on_interval: Callable[[], Any] | None = None, disable_sync_subtasks: bool = True,
             **kwargs: Any) -> list[Any] | None:
        """Wait for each member in turn, all within ``timeout``; a failure is raised with ``propagate``."""
        if disable_sync_subtasks:
            assert_not_in_task()
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        values: list[Any] = []
        for result in self.results:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"The operation timed out: {type(self).__name__} not ready within {timeout}s")
            value = result.get(timeout=left, propagate=propagate, interval=interval, on_message=on_message,
                               on_interval=on_interval, disable_sync_subtasks=False)
            if callback is not None:
                callback(result.id, value)
            else:
                values.append(value)
        return None if callback is not None else values

    join_native = join
    wait = get

    def iterate(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for result in self.results:
            yield result.get(*args, **kwargs)


class GroupResult(ResultSet):
    """The results of a group, under the group's id; ``save()`` keeps the member ids in the store."""

    def __init__(self, id: str | None = None, results: Iterable[Any] | None = None, parent: Any = None,
                 app: AppPort | None = None, **kwargs: Any) -> None:
        super().__init__(results or [], app=app)
        self.id = id
        self.parent = parent

    @property
    def children(self) -> list[Any]:
        return self.results

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GroupResult):
            return other.id == self.id and other.results == self.results
        return other == self.id if isinstance(other, str) else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(str(r.id) for r in self.results)}]>"

    def __str__(self) -> str:
        return str(self.id)

    def as_tuple(self) -> tuple[Any, ...]:
        parent = self.parent.as_tuple() if self.parent is not None else None
        return (self.id, parent), [r.as_tuple() for r in self.results]

    def save(self, backend: Any = None) -> GroupResult:
        """Keep the member ids under the group's id, for ``GroupResult.restore(id)``."""
        self.app.backend.save_group(str(self.id), [r.id for r in self.results])
        return self

    def delete(self, backend: Any = None) -> None:
        self.app.backend.forget_group(str(self.id))

    @classmethod
    def restore(cls, id: str, backend: Any = None, app: AppPort | None = None) -> GroupResult | None:
        """The saved group ``id`` (None when it was never saved, or expired)."""
        if app is None:
            app = get_current_app()
        ids = app.backend.restore_group(id)
        return None if ids is None else cls(id, [AsyncResult(i, app=app) for i in ids], app=app)


def bound_group_result(app: AppPort) -> type[GroupResult]:
    """``app.GroupResult``: made and restored with ``app`` unless told another."""

    class AppGroupResult(GroupResult):
        def __init__(self, id: str | None = None, results: Any = None, parent: Any = None,
                     app: AppPort | None = app, **kwargs: Any) -> None:
            super().__init__(id, results, parent=parent, app=app, **kwargs)

        @classmethod
        def restore(cls, id: str, backend: Any = None, app: AppPort | None = app) -> GroupResult | None:
            return GroupResult.restore(id, backend, app)

    AppGroupResult.__name__ = AppGroupResult.__qualname__ = "GroupResult"
    return AppGroupResult


def results_of(ids: Sequence[str], app: AppPort) -> list[AsyncResult]:
    return [AsyncResult(i, app=app) for i in ids]


def as_stored(value: Any) -> Any:
    """What a task returned, as Celery's backend stores it: a result as its ``as_tuple()``, else as it is."""
    return value.as_tuple() if isinstance(value, AsyncResult | GroupResult) else value


def result_from_tuple(value: Any, app: AppPort | None = None) -> Any:
    """An ``as_tuple()`` back as a result (Celery's ``result_from_tuple``)."""
    (rid, parent), nodes = value
    if nodes is not None:
        return GroupResult(rid, [result_from_tuple(n, app) for n in nodes], app=app,
                           parent=result_from_tuple(parent, app) if parent else None)
    return AsyncResult(rid, app=app, parent=result_from_tuple(parent, app) if parent else None)


FROM_TUPLE[:] = [result_from_tuple]  # AsyncResult.children reads its stored children with it

__all__ = ["GroupResult", "ResultSet", "as_stored", "bound_group_result", "result_from_tuple", "results_of"]
