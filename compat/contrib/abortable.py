"""``celery.contrib.abortable``: a task that stops when its caller asks, on jobbridge's cancellation.

Celery's ``AbortableAsyncResult.abort()`` writes ABORTED in the result backend and the
task polls ``self.is_aborted()`` between steps. Here ``abort()`` is a revoke without
``terminate`` (``bridge.cancel``): kept in the result store, so a task that has not
started never runs, on any worker (it ends REVOKED), and a running one goes on until it
sees ``is_aborted()`` and returns. Nothing is stopped from outside, which is the contract
of an abortable task: it decides where it is safe to stop.
"""

from __future__ import annotations

from typing import Any

from ..result import AsyncResult
from ..states import REVOKED
from ..task import Task

#: the state Celery writes for an aborted task; a task aborted here reads as aborted through it too
ABORTED = "ABORTED"


def _cancelled(result: AsyncResult) -> bool:
    store = result.app.jobbridge_app().results
    return store is not None and result.id in store.cancelled([result.id])


class AbortableAsyncResult(AsyncResult):
    """An `AsyncResult` with ``abort()`` and ``is_aborted()``."""

    def is_aborted(self) -> bool:
        """Whether the task was asked to stop (aborted, or revoked by any other means)."""
        return _cancelled(self) or self.state in (ABORTED, REVOKED)

    def abort(self) -> None:
        """Ask the task to stop: it never starts if it has not, else it stops at its next ``is_aborted()``."""
        self.app.control.revoke(self.id)


class AbortableTask(Task):
    """Base of tasks that call ``self.is_aborted()`` between steps and return when it is true."""

    abstract = True

    def AsyncResult(self, task_id: str, **kwargs: Any) -> AbortableAsyncResult:
        return AbortableAsyncResult(task_id, app=self.app, task_name=self.name)

    def is_aborted(self, **kwargs: Any) -> bool:
        """Whether this run (or ``task_id=``'s) was asked to stop; one round trip to the result store."""
        task_id = kwargs.get("task_id", self.request.id)
        if task_id is None:
            return False
        return self.AsyncResult(task_id).is_aborted()


__all__ = ["ABORTED", "AbortableAsyncResult", "AbortableTask"]
