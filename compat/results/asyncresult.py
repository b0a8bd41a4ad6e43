"""Results: ``AsyncResult`` (a published task, read from the result store) and ``EagerResult``.

``AsyncResult(id)`` reads the record the task's worker stored: ``state`` (PENDING
while nothing is stored, as in Celery), ``result`` / ``info`` (the return value,
the exception of a failure, or the ``meta`` of a custom state), ``traceback``.
``get(timeout=)`` blocks on the store's own wake-up (``bridge.wait``: NOTIFY, a
Redis list, a condition variable) in slices, so it returns as soon as the task is
over and raises ``TimeoutError`` once ``timeout`` passes, whatever the store does
meanwhile. A failure is raised again as the task's own exception type when this
process can import it, else as a stand-in naming it (compat/results/remote.py).

Without a ``result_backend`` every read raises `ResultsNotEnabled`, naming the
setting. ``GroupResult`` and ``ResultSet`` are in compat/results/groupresult.py.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from jobbridge.errors import DriverError
from jobbridge.results import ResultRecord

from .. import states
from ..exceptions import IncompleteStream, RefusedFeature, TaskRevokedError, TimeoutError
from ..ports import AppPort, BackendPort
from ..request import current_request
from ..shared import get_current_app
from .backend import extended_of, info_of, meta_of

#: the longest single wait on the store while ``get(timeout=None)`` waits for ever
SLICE = 10.0
#: ``info``, ``result`` and ``traceback`` read this soon after ``state`` describe the record ``state`` read
PAIRED = 1.0
#: Celery's ``result_from_tuple``, which makes a GroupResult too: groupresult.py (built on this module) puts it here
FROM_TUPLE: list[Callable[[Any, Any], Any]] = []
log = logging.getLogger("jobbridge.compat")


class AsyncResult:
    """A published task, by id; its state and value come from the result store at each read."""

    supports_native_join = True

    def __init__(self, id: str, backend: Any = None, task_name: str | None = None,
                 app: AppPort | None = None, parent: Any = None) -> None:
        self.id = str(id)
        self.task_name = task_name
        self._app = app
        self.parent = parent
        self._ready_record: ResultRecord | None = None
        self._state_read: tuple[float, ResultRecord | None] | None = None
        #: set when the call asked for no result (``apply_async(ignore_result=True)``): get() is None at once
        self.ignored: bool | None = False

    @property
    def app(self) -> AppPort:
        if self._app is None:
            self._app = get_current_app()
        return self._app

    @property
    def backend(self) -> BackendPort:
        return self.app.backend

    @property
    def task_id(self) -> str:
        return self.id

    def __str__(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.id}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AsyncResult):
            return other.id == self.id
        return other == self.id if isinstance(other, str) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.id)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.id, None, self.task_name, None, self.parent)

    def as_tuple(self) -> tuple[Any, ...]:
        parent = self.parent.as_tuple() if self.parent is not None else None
        return (self.id, parent), None

    # -- reading -----------------------------------------------------------------------------

    @property
    def ready_record(self) -> ResultRecord | None:
        """The record once this result was read ready (it cannot change then), else None: not read yet."""
        return self._ready_record

    def _record(self) -> ResultRecord | None:
        """The stored record; once it is ready it cannot change, so it is kept."""
        if self._ready_record is not None:
            return self._ready_record
        found = self.backend.get(self.id, f"AsyncResult({self.id!r})")
        if found is not None and found.state in states.READY_STATES:
            self._ready_record = found
        return found

    def _paired(self) -> ResultRecord | None:
        """The record ``state`` read less than `PAIRED` seconds ago, else a fresh one.

        So a view reading ``state`` then ``info`` describes one record, never the state of
        one moment and the value of the next (PROGRESS with the SUCCESS return value).
        """
        if self._state_read is not None and time.monotonic() - self._state_read[0] < PAIRED:
            return self._state_read[1]
        return self._record()

    def _get_task_meta(self) -> dict[str, Any]:
        found = self._record()
        return meta_of(self.id, found, extended_of(self.app, self.id) if found is not None else None)

    @property
    def state(self) -> str:
        found = self._record()
        self._state_read = (time.monotonic(), found)
        return found.state if found is not None else states.PENDING

    status = state

    @property
    def result(self) -> Any:
        return info_of(self._paired())

    info = result

    @property
    def traceback(self) -> str | None:
        found = self._paired()
        return found.traceback if found is not None else None

    @property
    def name(self) -> str | None:
        found = self._record()
        return found.name if found is not None else self.task_name

    @property
    def date_done(self) -> Any:
        return self._get_task_meta()["date_done"]

    @property
    def children(self) -> list[Any] | None:
        """The results the task applied (its callbacks, chain step, errbacks too), as Celery stores them;
        ``[]`` for a task that is over and applied none, None while nothing is known."""
        if not self.backend.enabled:
            return None  # nothing is stored, so nothing is known
        found = self.backend.children(self.id)
        if found is not None:
            return [FROM_TUPLE[0](child, self.app) for child in found]
        record = self._record()
        return [] if record is not None and record.state in states.READY_STATES else None

    # result_extended: what the task was called with, kept beside its result (None without it, as in Celery)
    @property
    def args(self) -> Any:
        return self._get_task_meta().get("args")

    @property
    def kwargs(self) -> Any:
        return self._get_task_meta().get("kwargs")

    @property
    def worker(self) -> Any:
        return self._get_task_meta().get("worker")

    @property
    def queue(self) -> Any:
        return self._get_task_meta().get("queue")

    @property
    def retries(self) -> Any:
        return self._get_task_meta().get("retries")

    def ready(self) -> bool:
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    # -- waiting -----------------------------------------------------------------------------

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
            no_ack: bool = True, follow_parents: bool = True, callback: Callable[..., Any] | None = None,
            on_message: Any = None, on_interval: Callable[[], Any] | None = None,
            disable_sync_subtasks: bool = True, **kwargs: Any) -> Any:
        """Wait until the task is over and return its value (or raise its exception, with ``propagate``)."""
        if on_message is not None:
            raise RefusedFeature("get(on_message=...) is refused: state changes are not streamed; poll "
                                 "AsyncResult(id).state and .info for progress")
        if self.ignored:
            return None  # the call asked for no result: nothing will be stored, so nothing is waited for
        if disable_sync_subtasks:
            assert_not_in_task()
        check = on_interval
        follow = follow_parents and propagate and self.parent is not None
        if follow:
            self._raise_failed_parent()
            check = self._parents_then(on_interval)
        record = self._wait(timeout, check, float(interval) if check is not on_interval else SLICE)
        value = info_of(record)
        if callback is not None:
            callback(self.id, value)
        if propagate and record.state in states.PROPAGATE_STATES:
            if follow:  # a chord failed by its header while the parents were read: the header's own failure
                self._raise_failed_parent()
            raise value
        return value

    wait = get

    def _wait(self, timeout: float | None, on_interval: Callable[[], Any] | None,
              step: float = SLICE) -> ResultRecord:
        """Wait on the store in slices until the record is ready; TimeoutError once ``timeout`` passes.

        ``on_interval`` runs after each slice of at most ``step`` seconds (a chain's result checks
        its parents there, so a failed parent is raised while the wait goes on, as in Celery).
        A store that cannot be reached meanwhile (a Redis restart) is tried again until the
        deadline; only the first read fails at once, so a misconfigured store says so.
        """
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        step = min(SLICE, max(0.05, step))
        found, unreachable = self._record(), None
        while found is None or found.state not in states.READY_STATES:
            left = step if deadline is None else deadline - time.monotonic()
            if left <= 0:
                why = (f"the result store could not be reached ({unreachable})" if unreachable is not None else
                       f"its state is {found.state if found else states.PENDING}")
                raise TimeoutError(f"The operation timed out: task {self.id} did not finish within {timeout}s "
                                   f"({why})") from unreachable
            try:
                found, unreachable = self.backend.wait(self.id, min(left, step)), None
            except DriverError as exc:
                unreachable = exc
                log.warning("waiting for task %s: the result store cannot be reached (%s); trying again",
                            self.id, exc)
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic() if deadline else 1.0)))
            if on_interval is not None:
                on_interval()
        self._ready_record = found
        return found

    def _raise_failed_parent(self) -> None:
        """Raise the failure of the earliest failed parent (Celery walks them first to last)."""
        parents: list[Any] = []
        node = self.parent
        while node is not None and len(parents) < 10_000:
            parents.append(node)
            node = getattr(node, "parent", None)
        for parent in reversed(parents):
            parent.maybe_throw()

    def _parents_then(self, on_interval: Callable[[], Any] | None) -> Callable[[], Any]:
        def check() -> None:
            self._raise_failed_parent()
            if on_interval is not None:
                on_interval()

        return check

    def maybe_throw(self, propagate: bool = True, callback: Callable[..., Any] | None = None) -> None:
        found = self._record()
        if propagate and found is not None and found.state in states.PROPAGATE_STATES:
            raise info_of(found)

    throw = maybe_throw

    def get_leaf(self) -> Any:
        return self.get()

    # -- acting --------------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop the stored result now."""
        self._ready_record = self._state_read = None
        self.backend.forget(self.id)

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: float | None = None) -> None:
        """Cancel the task, durably (``app.control.revoke``); ``terminate=True`` stops it if running."""
        self.app.control.revoke(self.id, terminate=terminate, signal=signal)
        if wait:
            self._wait(timeout, None)

    def then(self, *args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature("AsyncResult.then() is refused: promises are not provided; link a callback "
                             "task instead (apply_async(link=...))")

    def collect(self, intermediate: bool = False, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
        """``(result, value)`` for this result and every child, depth first as Celery's ``collect`` walks
        them; `IncompleteStream` at a node not ready yet unless ``intermediate`` (``get()`` waits then)."""
        for _, node in self.iterdeps(intermediate=intermediate):
            yield node, node.get(**kwargs)

    def iterdeps(self, intermediate: bool = False) -> Iterator[tuple[Any, Any]]:
        """``(parent, result)`` for this result and its children, read from the store as each is reached."""
        stack: deque[tuple[Any, Any]] = deque([(None, self)])
        while stack:
            parent, node = stack.popleft()
            yield parent, node
            if node.ready():
                stack.extend((node, child) for child in node.children or [])
            elif not intermediate:
                raise IncompleteStream()

    def build_graph(self, *args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature("AsyncResult.build_graph() is refused: no dependency graph is drawn; walk "
                             "AsyncResult.collect() or .children instead")


def assert_not_in_task() -> None:
    """Celery's guard: waiting for a result inside a worker's task can deadlock the worker."""
    request = current_request()
    if request is not None and not request.is_eager and not request.called_directly:
        raise RuntimeError("Never call result.get() within a task! Waiting for another task inside a task can "
                           "deadlock the worker; use a chain, a chord or a callback (link=) instead, or pass "
                           "disable_sync_subtasks=False if you must")


class EagerResult(AsyncResult):
    """The result of a task run inline (``apply()``, or ``delay`` under task_always_eager)."""

    def __init__(self, id: str, ret_value: Any, state: str, traceback: Any = None,
                 name: str | None = None, parent: Any = None, app: AppPort | None = None) -> None:
        super().__init__(id, task_name=name, app=app, parent=parent)
        self._result = ret_value
        self._state = state
        self._traceback = traceback

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
            no_ack: bool = True, follow_parents: bool = True, callback: Callable[..., Any] | None = None,
            on_message: Any = None, on_interval: Callable[[], Any] | None = None,
            disable_sync_subtasks: bool = True, **kwargs: Any) -> Any:
        if propagate and self._state in states.PROPAGATE_STATES:
            raise self.result
        return self.result

    wait = get

    @property
    def state(self) -> str:
        return self._state

    status = state

    @property
    def result(self) -> Any:
        if self._state == states.REVOKED and not isinstance(self._result, BaseException):
            return TaskRevokedError("revoked")
        return self._result

    info = result

    @property
    def traceback(self) -> str | None:
        return None if self._traceback is None else str(self._traceback)

    @property
    def name(self) -> str | None:
        return self.task_name

    def _get_task_meta(self) -> dict[str, Any]:
        return {"task_id": self.id, "status": self._state, "result": self.result, "traceback": self.traceback,
                "children": [], "name": self.task_name, "date_done": None}

    @property
    def children(self) -> list[Any] | None:
        return []  # run here, now: nothing of it is stored, as the meta above says

    def forget(self) -> None:
        return None

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: float | None = None) -> None:
        self._state = states.REVOKED

    def maybe_throw(self, propagate: bool = True, callback: Callable[..., Any] | None = None) -> None:
        if propagate and self._state in states.PROPAGATE_STATES:
            raise self.result

    throw = maybe_throw

    def __repr__(self) -> str:
        return f"<EagerResult: {self.id}>"


__all__ = ["AsyncResult", "EagerResult", "assert_not_in_task"]
