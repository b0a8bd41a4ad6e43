"""Which results a task stores, the ones the facade writes itself, and the messages a worker skips.

A task stores its result when the app has a ``result_backend`` and the task does not
ignore results (``ignore_result`` on the task, else ``task_ignore_result``), as in
Celery; ``track_started`` (else ``task_track_started``) adds STARTED. These are the
options of the task's jobbridge job, so the core's executor stores STARTED, RETRY,
SUCCESS and FAILURE under the message's id, and REVOKED for a cancelled message.

The facade writes a record itself only where the core cannot know it should:

- the call asked for the result (``apply_async(ignore_result=False)``) but the task
  ignores results, or the task ignores results but ``task_store_errors_even_if_ignored``;
- a retry re-sent as a new message (``self.retry(args=...)``): the new message has an
  id of its own, and the result belongs under the task id the caller holds.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from jobbridge import JobContext
from jobbridge.errors import JobBridgeError
from jobbridge.job import options_of
from jobbridge.results.base import ResultEncodeError

from .. import signals, states
from ..config import settings
from ..exceptions import TaskRevokedError
from ..ports import TaskPort
from ..request import Request
from . import flow

log = logging.getLogger("jobbridge.compat.task")


def ignores_result(task: TaskPort) -> bool:
    found = task.ignore_result
    return bool(task.app.conf["task_ignore_result"] if found is None else found)


def result_options(task: TaskPort) -> dict[str, Any]:
    """The job options for ``task``'s results: ``store_result`` and ``track_started``."""
    if not settings.results_enabled(task.app.conf):
        return {"store_result": False, "track_started": False}
    track = task.track_started if task.track_started is not None else task.app.conf["task_track_started"]
    return {"store_result": not ignores_result(task), "track_started": bool(track)}


def keep(task: TaskPort, ctx: JobContext, request: Request, state: str, *, result: Any = None,
         exc: BaseException | None = None) -> None:
    """Write ``state`` under the task id when the core will not (see the module docstring)."""
    conf = task.app.conf
    if not settings.results_enabled(conf):
        return
    wanted = not request.ignore_result or (state == states.FAILURE and conf["task_store_errors_even_if_ignored"])
    core_writes = options_of(type(ctx.job)).store_result and ctx.id == request.id
    if not wanted or core_writes:
        return
    backend = task.app.backend
    try:
        try:
            backend.write(str(request.id), state, name=task.name, result=result, exc=exc)
        except ResultEncodeError as bad:
            backend.write(str(request.id), states.FAILURE, name=task.name, exc=bad)
    except JobBridgeError:
        log.exception("could not store the %s of task %s[%s]", state, task.name, request.id)


def skip(task: TaskPort, ctx: JobContext, request: Request) -> str | None:
    """Why this message is acknowledged unrun (expired, revoked retry, already done), or None to run it."""
    if _expired(task, request):
        signals.task_revoked.send(sender=task, request=request, terminated=False, signum=None, expired=True)
        _revoked(task, ctx, request, "expired")
        return f"task {task.name}[{request.id}] expired at {request.expires}"
    if ctx.id != request.id and _cancelled(task, str(request.id)):
        signals.task_revoked.send(sender=task, request=request, terminated=False, signum=None, expired=False)
        _revoked(task, ctx, request, "revoked")
        return f"task {task.name}[{request.id}] was revoked"
    if task.app.conf["worker_deduplicate_successful_tasks"] and _succeeded(task, str(request.id)):
        return f"task {task.name}[{request.id}] already succeeded"
    return None


def _expired(task: TaskPort, request: Request) -> bool:
    if not request.expires:
        return False
    now = task.app.jobbridge_app().clock.now()
    return datetime.fromisoformat(str(request.expires)).timestamp() <= now


def _cancelled(task: TaskPort, task_id: str) -> bool:
    """A retry re-sent as a new message is revoked by its task id, which is not its message's id."""
    store = task.app.jobbridge_app().results
    return store is not None and task_id in store.cancelled([task_id])


def _succeeded(task: TaskPort, task_id: str) -> bool:
    if not settings.results_enabled(task.app.conf):
        return False
    found = task.app.jobbridge_app().result(task_id)
    return found is not None and found.state == states.SUCCESS


def _revoked(task: TaskPort, ctx: JobContext, request: Request, why: str) -> None:
    flow.revoked(task, request, why)
    if not request.ignore_result:
        keep_anyway(task, request, states.REVOKED, TaskRevokedError(why))


def keep_anyway(task: TaskPort, request: Request, state: str, exc: BaseException) -> None:
    """A state the core would not store (the message is acknowledged as ignored), under the task id."""
    if not settings.results_enabled(task.app.conf):
        return
    try:
        task.app.backend.write(str(request.id), state, name=task.name, exc=exc)
    except JobBridgeError:
        log.exception("could not store the %s of task %s[%s]", state, task.name, request.id)


__all__ = ["ignores_result", "keep", "keep_anyway", "result_options", "skip"]
