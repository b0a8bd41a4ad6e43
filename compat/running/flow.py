"""What a task's message says should happen after it: callbacks, the chain's next step, the chord.

Called by the worker (compat/running/runner.py) as the task's attempt ends, before the
attempt is acknowledged, so a worker lost in between runs the task again and
these steps with it (at least once, never zero times):

- success: if the task is a chord header task, its result is stored and it counts
  itself down in the chord's counter; the one that reaches 0 publishes the body
  with every header result, in header order, and notes under the chord's id that it
  did (a run again after a lost worker finds the note). A chord sent from a generator
  has no counter until it is sized: a task that ends before leaves its count to the
  sender (compat/canvas/lazy_header.py). Then each callback (``link``) gets the
  return value, and the chain's next step is published with it.
- failure: each errback runs — in this worker with ``(request, exc, traceback)``
  when its task takes several arguments, else published with the task id, as
  Celery does — and a chord header task takes the chord's failure counter down:
  the first one to reach 0 stores the chord's FAILURE (a ``ChordError`` naming
  it) and runs the chord's errbacks; the body never runs. The chain's later
  steps never run either: each is stored as FAILURE with the same exception and
  traceback, as Celery stores them, so ``get()`` on the chain's result raises it
  (a later step that is a chord member fails its chord, as a failed member would).
- revoked (or expired) chord header task: the chord fails the same way.

On Celery's wire (a store that is `CeleryChords`) each header task's outcome, success or
failure, is counted in Celery's own chord keys instead, and the last one in joins: it
publishes the body, or fails the chord naming the first failed part, as Celery's Redis
backend does, so Celery's workers and jobbridge's count one chord together.
"""

from __future__ import annotations

import logging
from typing import Any

from jobbridge.envelope import new_id
from jobbridge.results import SUCCESS, ResultRecord, UnknownCounter
from jobbridge.results.base import ResultEncodeError
from jobbridge.results.celery_meta import CeleryChords

from .. import states
from ..canvas.chords import FAILED, chord
from ..canvas.lazy_header import joins
from ..canvas.primitives import chain, group
from ..canvas.signature import Signature, maybe_signature
from ..exceptions import ChordError, TaskRevokedError
from ..ports import AppPort, TaskPort
from ..request import Request, add_child, children_of, collecting
from ..results.groupresult import GroupResult
from ..results.remote import exception_of, failure_fields

log = logging.getLogger("jobbridge.compat.task")


def succeeded(task: TaskPort, request: Request, retval: Any) -> None:
    """After a success: the chord's join, then the callbacks, then the chain's next step; then the children."""
    app = task.app
    with collecting(request):
        if request.chord:
            _chord_part_succeeded(task, request, retval)
        for callback in request.callbacks or []:
            _apply(app, callback, (retval,), request)
        if request.chain:
            later = list(request.chain)
            step = later.pop()
            _apply(app, step, (retval,), request, chain=later or None)
    keep_children(app, request)


def failed(task: TaskPort, request: Request, exc: BaseException, traceback: str | None) -> None:
    """After a failure (no retries left): the errbacks, the chord's failure, the chain's later steps.

    A chord's or a chain's task stores its own FAILURE first: whoever reads the chord's or the
    chain's result and then follows its parents finds the failed task already failed.
    """
    if (request.chord or request.chain) and request.id and not request.ignore_result and task.app.backend.enabled:
        _write_failure(task.app, str(request.id), request.task, exc, traceback.rstrip() if traceback else traceback)
    with collecting(request):
        call_errbacks(task.app, request, exc, traceback)
        if request.chord:
            chord_failed(task.app, request, exc, traceback)
        if request.chain:
            chain_failed(task.app, request, exc, traceback)
    keep_children(task.app, request)


def keep_children(app: AppPort, request: Request, task_id: str | None = None) -> None:
    """Store what the task applied as its result's ``children`` (Celery stores them with the result)."""
    children = children_of(request)
    task_id = task_id or request.id
    if not children or not task_id or request.ignore_result or not app.backend.enabled:
        return
    try:
        app.backend.save_children(str(task_id), children)
    except Exception:  # what the task applied ran; only the record of it is missing
        log.exception("could not store the children of task %s", task_id)


def chain_failed(app: AppPort, request: Request, exc: BaseException, traceback: str | None) -> None:
    """The steps after a failed one will never run: each stored as that FAILURE, as Celery stores them.

    Celery's ``mark_as_failure`` does the same for every later step with a task id, so
    the chain's result (its last step's) is ready and raises the failure, even when it
    is read by its id alone. A later step that belongs to a chord fails that chord.
    """
    if not app.backend.enabled:
        return  # nothing can be stored, and nothing reads a result
    traceback = traceback.rstrip() if traceback else traceback  # as the core stores the failed task's own
    # nearest step first, the chain's last (its result) last: a reader woken by that one finds every
    # step between already failed (the message carries the steps last first)
    for step in reversed(list(request.chain or [])):
        sig = maybe_signature(step, app=app)
        for task_id, name in _result_ids(sig):
            _write_failure(app, task_id, name, exc, traceback)
        member = _member(sig)
        if member is not None and member.options.get("chord"):
            chord_failed(app, body_request(member, request), exc, traceback)


def _write_failure(app: AppPort, task_id: str, name: str | None, exc: BaseException, traceback: str | None) -> None:
    try:
        app.backend.write(task_id, states.FAILURE, name=name, exc=exc, traceback=traceback)
    except Exception:  # one step that cannot be written must not keep the others from it
        log.exception("could not store the FAILURE of chain step %s", task_id)


def _member(sig: Signature) -> Signature | None:
    """The task that would have counted in an outer chord: the step, or a chord step's body."""
    if not isinstance(sig, chord):
        return sig
    body = sig.body.clone() if sig.body is not None else None
    if body is not None:
        for key in ("chord", "group_id", "group_index"):
            if sig.options.get(key) is not None:
                body.options[key] = sig.options[key]
    return body


def _result_ids(sig: Signature | None) -> list[tuple[str, str]]:
    """Where a step's result would be: its own id; a chord's body's; a group's members'; a chain's last."""
    if sig is None:
        return []
    if isinstance(sig, chord):
        return _result_ids(sig.body)
    if isinstance(sig, chain):
        return _result_ids(sig.tasks[-1]) if sig.tasks else []
    if isinstance(sig, group):
        return [found for member in sig.tasks for found in _result_ids(member)]
    return [(sig.id, sig.task)] if sig.id is not None else []


def _apply(app: AppPort, step: Any, args: tuple[Any, ...], request: Request, **options: Any) -> Any:
    sig = maybe_signature(step, app=app)
    return sig.apply_async(args, parent_id=request.id, root_id=request.root_id or request.id, **options)


# -- errbacks ---------------------------------------------------------------------------------------

def call_errbacks(app: AppPort, request: Request, exc: BaseException, traceback: str | None) -> None:
    """Celery's two kinds: ``(request, exc, traceback)`` called here, ``(task_id)`` published."""
    by_id: list[Signature] = []
    for found in request.errbacks or []:
        errback = maybe_signature(found, app=app)
        if _takes_request(app, errback):
            try:
                errback(request, exc, traceback)
            except Exception:
                log.exception("the errback %r of task %s raised", errback, request.id)
        else:
            by_id.append(errback)
    published = []
    for errback in by_id:
        try:
            published.append(errback.apply_async((request.id,), parent_id=request.id, add_to_parent=False,
                                                 root_id=request.root_id or request.id))
        except Exception:  # a broken errback must not keep the failure from being recorded
            log.exception("the errback %r of task %s could not be published", errback, request.id)
    if published:  # Celery applies them as one group, a child of the task running now
        add_child(GroupResult(new_id(), published, app=app))


def _takes_request(app: AppPort, errback: Signature) -> bool:
    if errback.subtask_type or errback.task not in app.tasks:
        return False
    return len(app.tasks[errback.task].positional_names()) > 1


# -- chords -----------------------------------------------------------------------------------------

def _chord_part_succeeded(task: TaskPort, request: Request, retval: Any) -> None:
    """Store this header task's result, count it down once, and publish the body if it was the last."""
    backend = task.app.backend
    store = backend.require("a chord")
    group_id = str(request.group)
    try:
        backend.write(str(request.id), SUCCESS, name=task.name, result=retval)
    except ResultEncodeError as exc:
        chord_failed(task.app, request, exc, None)
        return
    if isinstance(store, CeleryChords):
        _celery_part(task.app, request, ResultRecord(str(request.id), SUCCESS, result=retval), None)
        return
    try:
        left = store.counter_decrement(group_id, member=str(request.id))
    except UnknownCounter:
        if backend.sizing(group_id):
            return  # a header still being generated: its sender counts this result once it knows the size
        gone = ChordError(f"the counter of chord {group_id} is gone (it expired after result_expires, or was "
                          "pruned), so its body cannot be started")
        chord_failed(task.app, request, gone, None)
        return
    if left == 0 and joins(task.app, request.chord, group_id, str(request.id)):
        _join(task.app, request)


def _join(app: AppPort, request: Request) -> None:
    """The last header task: read every result in one round trip and publish the body with them."""
    backend = app.backend
    group_id = str(request.group)
    ids = backend.restore_group(group_id)
    records = backend.get_many(ids or [])
    lost = [i for i in ids or [] if i not in records or records[i].state != SUCCESS]
    if ids is None or lost:
        missing = ChordError(f"the results of chord {group_id}'s header tasks {lost or '(all)'} are gone "
                             "(expired after result_expires, or forgotten), so its body cannot be started")
        chord_failed(app, request, missing, None)
        return
    if backend.joined(group_id):
        return  # published before, by a run of this task whose worker was lost before it was acknowledged
    body = maybe_signature(request.chord, app=app)
    _apply(app, body, ([records[i].result for i in ids],), request)
    backend.mark_joined(group_id, body.id)


def chord_failed(app: AppPort, request: Request, exc: BaseException, traceback: str | None) -> None:
    """A header task failed: the first to say so stores the chord's FAILURE and runs its errbacks."""
    store = app.backend.require("a chord")
    if isinstance(store, CeleryChords):  # Celery's wire: the part counts, and the chord fails once all are in
        state = states.REVOKED if isinstance(exc, TaskRevokedError) else states.FAILURE
        _celery_part(app, request, ResultRecord(str(request.id), state, **failure_fields(exc)), traceback)
        return
    try:
        left = store.counter_decrement(f"{request.group}{FAILED}", member=str(request.id))
    except UnknownCounter:
        left = 0  # the chord outlived its counters; report the failure rather than lose it
    if left != 0:
        return
    _fail_chord(app, request, exc, traceback)


def _celery_part(app: AppPort, request: Request, part: ResultRecord, traceback: str | None) -> None:
    """Celery's wire: count this part in Celery's keys; the last one in fails the chord or publishes the body.

    As Celery's Redis backend does: the chord fails only once every part is in, naming the first
    failed one, so a worker of either side may be the one that joins it.
    """
    store = app.backend.require("a chord")
    assert isinstance(store, CeleryChords)
    claim = store.chord_part(str(request.group), part, request.group_index, app.backend.ttl)
    if claim is None:
        return
    failed = next((p for p in claim.parts if p.state in (states.FAILURE, states.REVOKED)), None)
    if failed is not None:
        _fail_chord(app, request, ChordError(f"Dependency {failed.id} raised {exception_of(failed)!r}"), traceback)
    else:
        try:
            _apply(app, maybe_signature(request.chord, app=app), ([p.result for p in claim.parts],), request)
        except Exception as exc:  # the body cannot be published: the chord fails, once, rather than hang
            log.exception("the body of chord %s could not be published", request.group)
            _fail_chord(app, request, ChordError(f"Callback error: {exc!r}"), traceback)
    store.chord_done(claim)  # not reached when storing the failure raised: the claim lapses, a rerun joins


def _fail_chord(app: AppPort, request: Request, exc: BaseException, traceback: str | None) -> None:
    """The chord will not run its body: its errbacks, the body's FAILURE, and what the body was part of."""
    body = maybe_signature(request.chord, app=app)
    error = exc if isinstance(exc, ChordError) else ChordError(f"Dependency {request.id} raised {exc!r}")
    stand_in = body_request(body, request)
    call_errbacks(app, stand_in, error, traceback)
    if body.id is not None:
        keep_children(app, request, body.id)  # as Celery: the failed body's children are the running task's
        app.backend.write(body.id, states.FAILURE, name=body.task, exc=error, traceback=traceback)
    if stand_in.chord:  # the body was itself a member of an outer chord, which fails with it
        chord_failed(app, stand_in, error, traceback)
    if stand_in.chain:  # the steps after the chord will not run either
        chain_failed(app, stand_in, error, traceback)


def body_request(body: Signature, request: Request) -> Request:
    """A request for the body that never ran, as Celery makes one to call the chord's errbacks."""
    options = body.options
    return Request(id=body.id, task=body.task, args=list(body.args), kwargs=body.kwargs,
                   errbacks=options.get("link_error"), chord=options.get("chord"), group=options.get("group_id"),
                   chain=options.get("chain"),
                   group_index=options.get("group_index"), root_id=request.root_id, parent_id=request.id,
                   delivery_info={}, called_directly=False, is_eager=False)


def revoked(task: TaskPort, request: Request, why: str) -> None:
    """A header task that will never run (revoked, expired) fails its chord, so the chord never hangs."""
    if request.chord:
        chord_failed(task.app, request, TaskRevokedError(why), None)


__all__ = ["call_errbacks", "chain_failed", "chord_failed", "failed", "revoked", "succeeded"]
