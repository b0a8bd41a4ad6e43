"""What follows a task run inline (``apply()``, ``task_always_eager``), and ``Task.replace``.

Inline, as in Celery: callbacks (``link``) are applied with the return value and
errbacks called on a failure (``apply_async``, so they run inline too under
``task_always_eager``); with ``task_store_eager_result`` the outcome is stored in the
result backend. A chain, group or chord applied eagerly runs its steps itself
(compat/canvas/primitives.py, compat/canvas/chords.py).
"""

from __future__ import annotations

from typing import Any

from jobbridge.envelope import new_id

from .. import states
from ..canvas.chords import chord
from ..canvas.primitives import chain, group
from ..canvas.signature import Signature, maybe_signature
from ..exceptions import ImproperlyConfigured
from ..ports import TaskPort
from ..request import Request
from . import calling, flow
from .runner import Replaced
from .tracing import Traced


def after(task: TaskPort, request: Request, traced: Traced) -> None:
    """An eager run ended: its callbacks or errbacks, and its result kept if the app asks."""
    app = task.app
    if traced.state == states.SUCCESS:
        for callback in request.callbacks or []:
            maybe_signature(callback, app=app).apply_async((traced.retval,), parent_id=request.id,
                                                           root_id=request.root_id or request.id)
    elif traced.state == states.FAILURE and traced.exc is not None:
        flow.call_errbacks(app, request, traced.exc, traced.einfo.traceback if traced.einfo else None)
    if traced.state not in (states.SUCCESS, states.FAILURE) or request.ignore_result:
        return
    if app.conf["task_store_eager_result"] and app.backend.enabled:
        if traced.state == states.SUCCESS:
            app.backend.write(str(request.id), states.SUCCESS, name=task.name, result=traced.retval)
        elif traced.exc is not None:
            app.backend.write(str(request.id), states.FAILURE, name=task.name, exc=traced.exc,
                              traceback=traced.einfo.traceback if traced.einfo else None)


def replace(task: TaskPort, sig: Any) -> Any:
    """``self.replace(sig)``: ``sig`` takes this task's id and what follows it; this run ends (Ignore)."""
    request = task.request
    replacement = maybe_signature(sig, app=task.app).clone()
    if isinstance(replacement, chain) and not replacement.tasks:
        raise ImproperlyConfigured("Cannot replace with an empty chain")  # Celery's words, checked first
    if request.is_eager or request.called_directly:
        return replacement.apply().get()
    if isinstance(replacement, group):  # as in Celery: a chord whose body gives back the group's results
        task.app.finalize()
        replacement = chord(replacement, Signature("celery.accumulate", kwargs={"index": 0}, app=task.app),
                            app=task.app)
    if isinstance(replacement, chain) and len(replacement.tasks) == 1:
        replacement = replacement.tasks[0]
    # this task's callbacks and errbacks join the replacement's own (Celery links each onto it)
    for callback in request.callbacks or ():
        replacement.link(callback)
    for errback in request.errbacks or ():
        replacement.link_error(errback)
    carried = {"chain": request.chain, "chord": request.chord, "group_id": request.group,
               "group_index": request.group_index, "root_id": request.root_id, "parent_id": request.parent_id}
    carried = {k: v for k, v in carried.items() if v is not None}
    if isinstance(replacement, chain | chord):  # its last step is published later, under this task's id
        replacement.apply_async(task_id=request.id, **carried)
    else:
        _publish_now(task, replacement, str(request.id), carried)
    raise Replaced("Replaced by new task")


def _publish_now(task: TaskPort, sig: Signature, task_id: str, carried: dict[str, Any]) -> None:
    """This task's message is still held, so the replacement gets a message id of its own."""
    target = task.app.tasks.get(sig.task)
    options = {**sig.options, **carried, "task_id": task_id}
    calling.publish(task.app, sig.task, sig.args, sig.kwargs, options, task=target, message_id=new_id())


__all__ = ["after", "replace"]
