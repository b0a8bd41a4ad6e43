"""Results: ``EagerResult`` (complete: the task ran inline) and ``AsyncResult`` (its id, for now).

jobbridge has no result store yet; it arrives with issue 6. Until then an
``AsyncResult`` carries the task id (``.id``, ``.task_id``, ``str()``), and reading
its state or value (``.get()``, ``.state``, ``.result``, ``.ready()``, ...) raises
`ResultsNotEnabled`, saying so: it never answers PENDING for ever, as a Celery
app without a result backend would. A task that produces something a caller
needs stores it itself until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from . import states
from .exceptions import RefusedFeature, ResultsNotEnabled

if TYPE_CHECKING:
    from .app import Celery

_WHY = ("jobbridge keeps no task results yet: the result store arrives with issue 6. Until then a task "
        "that produces something its caller needs stores it itself (a database row keyed by the task id), "
        "and tests run tasks with task_always_eager (or task.apply()), whose EagerResult holds the value")


class AsyncResult:
    """A published task: its id now; its state and value when the result store exists (issue 6)."""

    def __init__(self, id: str, backend: Any = None, task_name: str | None = None,
                 app: Celery | None = None, parent: Any = None) -> None:
        self.id = str(id)
        self.task_name = task_name
        self.app = app
        self.parent = parent

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

    def _refuse(self, what: str) -> NoReturn:
        raise ResultsNotEnabled(f"AsyncResult({self.id!r}).{what}: {_WHY}")

    def get(self, timeout: float | None = None, propagate: bool = True, **kwargs: Any) -> Any:
        self._refuse("get()")

    wait = get

    @property
    def state(self) -> str:
        self._refuse("state")

    status = state

    @property
    def result(self) -> Any:
        self._refuse("result")

    info = result

    @property
    def traceback(self) -> Any:
        self._refuse("traceback")

    def ready(self) -> bool:
        self._refuse("ready()")

    def successful(self) -> bool:
        self._refuse("successful()")

    def failed(self) -> bool:
        self._refuse("failed()")

    def forget(self) -> None:
        self._refuse("forget()")

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: Any = None) -> None:
        raise RefusedFeature(f"AsyncResult({self.id!r}).revoke() is refused: jobbridge has no remote "
                             "control; to stop a task that has not run, give it expires= when you call it")

    def then(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("then()")


class EagerResult(AsyncResult):
    """The result of a task run inline (``apply()``, or ``delay`` under task_always_eager)."""

    def __init__(self, id: str, ret_value: Any, state: str, traceback: Any = None,
                 name: str | None = None) -> None:
        super().__init__(id, task_name=name)
        self._result = ret_value
        self._state = state
        self._traceback = traceback

    def get(self, timeout: float | None = None, propagate: bool = True, disable_sync_subtasks: bool = True,
            **kwargs: Any) -> Any:
        if self._state in states.PROPAGATE_STATES and propagate and isinstance(self._result, BaseException):
            raise self._result
        return self._result

    wait = get

    @property
    def state(self) -> str:
        return self._state

    status = state

    @property
    def result(self) -> Any:
        return self._result

    info = result

    @property
    def traceback(self) -> Any:
        return None if self._traceback is None else str(self._traceback)

    def ready(self) -> bool:
        return True

    def successful(self) -> bool:
        return self._state == states.SUCCESS

    def failed(self) -> bool:
        return self._state == states.FAILURE

    def forget(self) -> None:
        return None

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: Any = None) -> None:
        self._state = states.REVOKED

    def then(self, *args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature("EagerResult.then() is refused: promises are not provided")

    def __repr__(self) -> str:
        return f"<EagerResult: {self.id}>"
