"""The app's result backend (``app.backend``): the jobbridge result store, as the facade uses it.

An app has a result backend when ``result_backend`` is set, as in Celery: its tasks
then store their results, and ``AsyncResult`` reads them. Without one, reading a
result raises `ResultsNotEnabled` naming the setting, rather than answering
PENDING for ever. Revokes need only a store, which the broker's own (database,
redis, memory) is even without ``result_backend``.

Everything goes through the app's `JobBridge`: ``bridge.result``, ``bridge.wait``,
``bridge.store_state`` and, for what the facade keeps itself (a chord's header
results and counters, a saved group), ``bridge.results`` with ``result_ttl``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobbridge import JobBridge
from jobbridge.errors import JobBridgeError
from jobbridge.redaction import mask_url
from jobbridge.results import ResultRecord, ResultStore
from jobbridge.results.base import round_trip

from .. import states
from ..config import settings
from ..exceptions import ResultsNotEnabled, TaskRevokedError
from ..ports import AppPort, TaskPort
from ..request import Request
from .remote import exception_of, failure_fields

#: where a saved group's member ids are kept (Celery keeps them apart from task results too)
GROUP_META = "celery-group-meta:"
#: where a chord's join notes that it published the body (keyed on the chord's header group, not the body)
JOINED = "celery-chord-joined:"
#: a chord whose header is a generator, still being sent: its size is not known yet
SIZING = "celery-chord-sizing:"
#: the results a task applied (Celery's ``children``), kept beside its result as their ``as_tuple()``
CHILDREN = "celery-task-children:"
#: a ``meta`` that is not a mapping is stored under this key, and given back unwrapped
WRAPPED = "__celery_meta__"
#: with result_extended, what a task was called with is kept under this key beside its result
EXTENDED = "celery-task-meta-extended:"
log = logging.getLogger("jobbridge.compat.task")
_SET_IT = ("set result_backend (CELERY_RESULT_BACKEND) to the store the broker uses — the same redis:// "
           "URL, or db+<database URL> — as Celery needs a result backend for this too")


class ResultBackend:
    """The facade's view of the result store for one app (Celery's ``app.backend``)."""

    def __init__(self, app: AppPort) -> None:
        self.app = app

    def __repr__(self) -> str:
        return f"<ResultBackend of {self.app!r}: {mask_url(str(self.app.conf['result_backend'] or 'none'))}>"

    # -- access ------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return settings.results_enabled(self.app.conf)

    @property
    def bridge(self) -> JobBridge:
        return self.app.jobbridge_app()

    def require(self, what: str) -> ResultStore:
        """The store, for ``what``; `ResultsNotEnabled` when the app has no result backend."""
        if not self.enabled:
            raise ResultsNotEnabled(f"{what} needs a result backend, and this app has none: {_SET_IT}")
        store = self.bridge.results
        if store is None:  # pragma: no cover - the settings always open one when result_backend is set
            raise ResultsNotEnabled(f"{what}: the result store could not be opened")
        return store

    def ensure_chords_allowed(self) -> None:
        """Celery's check before a chord: NotImplementedError, as Celery raises it, without a result backend."""
        if not self.enabled:
            raise NotImplementedError(f"a chord (and a group chained with a task, which is one) needs a result "
                                      f"backend, and this app has none: {_SET_IT}")

    @property
    def ttl(self) -> float:
        return float(self.bridge.settings.result_ttl)

    def get(self, task_id: str, what: str = "reading a result") -> ResultRecord | None:
        self.require(what)
        return self.bridge.result(task_id)

    def wait(self, task_id: str, timeout: float) -> ResultRecord | None:
        self.require("waiting for a result")
        return self.bridge.wait(task_id, timeout)

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        return self.require("reading results").get_many(list(ids))

    # -- writing -----------------------------------------------------------------------------

    def write(self, task_id: str, state: str, *, name: str | None = None, result: Any = None,
              meta: Any = None, exc: BaseException | None = None, traceback: str | None = None) -> None:
        """Store one record now (raising when the store fails or a value is not JSON)."""
        fields = failure_fields(exc) if exc is not None else {}
        if traceback is not None:
            fields["traceback"] = traceback
        record = ResultRecord(id=task_id, state=state, name=name, result=result, meta=wrap(meta), **fields)
        self.require(f"storing the {state} of {task_id}").store(record, self.ttl)

    def store_state(self, task_id: str, state: str, meta: Any, name: str | None) -> None:
        """A custom state (``update_state``): checked as JSON here, so a bad ``meta`` raises in the task."""
        self.require("update_state()")
        wrapped = wrap(meta)
        round_trip(wrapped, "meta", task_id)
        self.bridge.store_state(task_id, state, meta=wrapped, name=name)

    def forget(self, task_id: str) -> None:
        self.require("forget()")
        self.bridge.forget(task_id)
        if self.app.conf["result_extended"]:
            self.bridge.forget(EXTENDED + task_id)

    def save_group(self, group_id: str, ids: Sequence[str]) -> None:
        """Keep a group's member ids, in order (``GroupResult.save()``; every chord does it)."""
        record = ResultRecord(id=GROUP_META + group_id, state="GROUP", result=list(ids))
        self.require("saving a group").store(record, self.ttl)

    def restore_group(self, group_id: str) -> list[str] | None:
        found = self.require("GroupResult.restore()").get(GROUP_META + group_id)
        return None if found is None else [str(i) for i in found.result or []]

    def forget_group(self, group_id: str) -> None:
        self.require("GroupResult.forget()").forget(GROUP_META + group_id)

    def save_children(self, task_id: str, children: Sequence[Any]) -> None:
        """Keep the results task ``task_id`` applied (before its own result is stored, as Celery does)."""
        record = ResultRecord(id=CHILDREN + task_id, state="CHILDREN", result=[c.as_tuple() for c in children])
        self.require("a task's children").store(record, self.ttl)

    def children(self, task_id: str) -> list[Any] | None:
        """The ``as_tuple()`` of each result task ``task_id`` applied; None when it kept none."""
        found = self.require("AsyncResult.children").get(CHILDREN + task_id)
        return None if found is None else list(found.result or [])

    def mark_joined(self, group_id: str, body_id: str | None) -> None:
        """Note that chord ``group_id`` published its body (after the publish: a lost worker runs it again)."""
        record = ResultRecord(id=JOINED + group_id, state="JOINED", result=body_id)
        self.require("a chord").store(record, self.ttl)

    def joined(self, group_id: str) -> bool:
        """Whether chord ``group_id``'s body was published, by a run whose worker was lost before its ack.

        Keyed on the chord, not the body's id: one frozen task may be the body of two chords in turn
        (a result under its id says nothing about this chord).
        """
        return self.require("a chord").get(JOINED + group_id) is not None

    def mark_sizing(self, group_id: str) -> None:
        """Note that chord ``group_id``'s header is sent as a generator yields it: no join counter yet."""
        self.require("a chord").store(ResultRecord(id=SIZING + group_id, state="SIZING"), self.ttl)

    def sizing(self, group_id: str) -> bool:
        """Whether chord ``group_id`` was sent from a generator: a header task that finds no counter
        leaves its count to the sender, which counts every result already in once it knows the size."""
        return self.require("a chord").get(SIZING + group_id) is not None

    # -- Celery's backend methods --------------------------------------------------------------

    def get_task_meta(self, task_id: str, cache: bool = True) -> dict[str, Any]:
        """Celery's meta dict: ``task_id``, ``status``, ``result``, ``traceback``, ``date_done``, ``name``
        (and with result_extended ``args``, ``kwargs``, ``worker``, ``queue``, ``retries``)."""
        record = self.get(task_id)
        return meta_of(task_id, record, extended_of(self.app, task_id) if record is not None else None)

    def get_state(self, task_id: str) -> str:
        return str(self.get_task_meta(task_id)["status"])

    get_status = get_state

    def get_result(self, task_id: str) -> Any:
        return self.get_task_meta(task_id)["result"]

    def get_traceback(self, task_id: str) -> str | None:
        found: str | None = self.get_task_meta(task_id)["traceback"]
        return found

    def store_result(self, task_id: str, result: Any, state: str, traceback: Any = None, request: Any = None,
                     **kwargs: Any) -> Any:
        if isinstance(result, BaseException):
            self.write(task_id, state, exc=result)
        elif state in (states.SUCCESS,):
            self.write(task_id, state, result=result)
        else:
            self.write(task_id, state, meta=result)
        return result

    def mark_as_done(self, task_id: str, result: Any, request: Any = None, **kwargs: Any) -> None:
        self.write(task_id, states.SUCCESS, result=result)

    def mark_as_failure(self, task_id: str, exc: BaseException, traceback: Any = None, request: Any = None,
                        **kwargs: Any) -> None:
        self.write(task_id, states.FAILURE, exc=exc)


def wrap(meta: Any) -> Mapping[str, Any] | None:
    """``meta`` as the store holds it: a mapping as it is, anything else wrapped."""
    if meta is None or isinstance(meta, Mapping):
        return meta
    return {WRAPPED: meta}


def unwrap(meta: Mapping[str, Any] | None) -> Any:
    if isinstance(meta, Mapping) and len(meta) == 1 and WRAPPED in meta:
        return meta[WRAPPED]
    return meta


def info_of(record: ResultRecord | None) -> Any:
    """Celery's ``result`` / ``info`` for a record: the value, the exception, or the progress meta."""
    if record is None:
        return None
    if record.state == states.SUCCESS:
        return record.result
    if record.state == states.FAILURE or (record.state == states.RETRY and record.exception_type):
        return exception_of(record)
    if record.state == states.REVOKED:
        return TaskRevokedError(record.error or "revoked")
    return unwrap(record.meta)


def meta_of(task_id: str, record: ResultRecord | None,
            extended: Mapping[str, Any] | None = None) -> dict[str, Any]:
    done = record is not None and record.state in states.READY_STATES
    return {
        "task_id": task_id, "status": record.state if record is not None else states.PENDING,
        "result": info_of(record), "traceback": record.traceback if record is not None else None,
        "children": [], "name": record.name if record is not None else None,
        "date_done": datetime.fromtimestamp(record.updated_at, UTC) if done and record is not None else None,
        **(extended or {}),
    }


def keep_call(task: TaskPort, request: Request, eager: bool) -> None:
    """result_extended: keep what this attempt was called with (name, args, kwargs, worker, queue, retries).

    Celery writes them into every state it stores for the task; here they are written once per
    attempt as it starts, beside the result, and read back with it (`extended_of`) only while a
    state is stored, so a task that stores nothing still shows none, as in Celery.
    """
    conf = task.app.conf
    if not conf["result_extended"] or not settings.results_enabled(conf) or request.ignore_result:
        return
    if eager and not conf["task_store_eager_result"]:
        return
    delivery = request.delivery_info or {}
    fields = {"name": request.task or task.name, "args": list(request.args or ()),
              "kwargs": dict(request.kwargs or {}), "worker": request.hostname, "retries": request.retries,
              "queue": None if delivery.get("is_eager") else delivery.get("routing_key")}  # eager: none, as in Celery
    backend = task.app.backend
    try:
        record = ResultRecord(id=EXTENDED + str(request.id), state="EXTENDED", name=task.name, result=fields)
        backend.require("result_extended").store(record, backend.ttl)
    except JobBridgeError:  # a store that fails, or arguments that are not JSON: the task runs all the same
        log.exception("could not keep the call of task %s[%s] (result_extended)", task.name, request.id)


def extended_of(app: AppPort, task_id: str) -> dict[str, Any]:
    """What `keep_call` kept for ``task_id``; with result_extended off, nothing (Celery's meta has none)."""
    if not app.conf["result_extended"]:
        return {}
    found = app.backend.require("reading a result").get(EXTENDED + task_id)
    return dict(found.result) if found is not None and isinstance(found.result, Mapping) else {}


__all__ = ["EXTENDED", "GROUP_META", "ResultBackend", "extended_of", "info_of", "keep_call", "meta_of", "unwrap",
           "wrap"]
