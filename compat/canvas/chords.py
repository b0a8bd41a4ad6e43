"""``chord(header, body)``: a group whose results, once all are in, go to one body task.

Applying a chord fixes every id first — the body's (the chord's result), the
header group's and each header task's — then keeps the header ids in order under
the group id, sets the join counter (one per header task) and the failure counter
(one) in the result store, and publishes the header tasks carrying the body. The
worker side is compat/running/flow.py: each header task, as it ends, counts itself down
once (by its own id, so a task run again after its worker was lost does not count
twice); the one that reaches 0 publishes the body with all the results, read in
one round trip. The first header task to fail takes the failure counter to 0:
it runs the chord's errbacks and stores the body's FAILURE, once. On Celery's wire the
store joins chords in Celery's own keys instead (`jobbridge.results.celery_meta.CeleryChords`),
so header tasks run by Celery workers and by jobbridge workers count in one place.
A header that is a generator is sent as it is generated (compat/canvas/lazy_header.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import GeneratorType
from typing import Any

from jobbridge.envelope import new_id
from jobbridge.results.celery_meta import CeleryChords

from ..exceptions import ChordError
from ..ports import AppPort
from ..request import add_child
from ..results.asyncresult import EagerResult
from ..results.groupresult import GroupResult
from .lazy_header import FAILED, send_lazily
from .primitives import Canvas, chain, group, link_parent, tasks_of, whole
from .signature import TYPES, Signature, maybe_signature


class chord(Canvas):
    """A group whose results, once all are in, go to one body task (as its first argument)."""

    kind = "chord"

    def __init__(self, header: Any = None, body: Any = None, task: str = "celery.chord", args: Any = None,
                 kwargs: Mapping[str, Any] | None = None, app: AppPort | None = None, **options: Any) -> None:
        if isinstance(header, group):
            members = header
        elif isinstance(header, GeneratorType):  # sent as it is generated, as Celery does (#3021)
            members = group(header, app=app)
        else:
            members = group(*tasks_of((header or [],)), app=app)
        body = whole(maybe_signature(body, app=app)) if body else None
        # a generator's header stays one object until it is applied (a dict of it would hold no task yet)
        parts = {"header": members if members.lazy else dict(members), "body": dict(body) if body else None}
        Signature.__init__(self, task, (), {**dict(kwargs or {}), **parts}, options, subtask_type="chord",
                           app=app)

    @property
    def tasks(self) -> tuple[Signature, ...]:
        return self.header.tasks

    @property
    def header(self) -> group:
        """The header group, one object from its first read (as `body`), its tasks too."""
        stored = self["kwargs"]["header"]
        found: group = maybe_signature(stored, app=self.bound_app)
        assert isinstance(found, group)
        if found is not stored:
            self["kwargs"]["header"] = found
        return found

    @property
    def body(self) -> Signature | None:
        """The body, one object from its first read: ``chord.body.freeze()`` fixes the chord's id, as in Celery."""
        stored = self["kwargs"].get("body")
        found: Signature | None = maybe_signature(stored, app=self.bound_app)
        if found is not None and found is not stored:
            self["kwargs"]["body"] = found
        return found

    def _set_body(self, body: Signature) -> None:
        self["kwargs"]["body"] = dict(body)

    def __call__(self, body: Any = None, **options: Any) -> Any:
        """``chord(header)(body)``: apply with that body."""
        return self.apply_async((), {"body": body} if body is not None else {}, **options)

    def __or__(self, other: Any) -> Any:
        if isinstance(other, Signature):
            return chain(self, other, app=self.bound_app)
        return NotImplemented

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, task_id: str | None = None, **options: Any) -> Any:
        """Publish the header; the body follows once every header task succeeded. The body's result."""
        kwargs = dict(kwargs or {})
        body = maybe_signature(kwargs.pop("body", None), app=self.bound_app) or self.body
        if body is None:
            raise TypeError("a chord needs a body: chord(header, body), or chord(header)(body)")
        options = {**self.options, **options}
        task_id = task_id or options.pop("task_id", None)  # the chord's id is its body's, never its header's
        if self.always_eager():
            return self.apply(args, kwargs, body=body, task_id=task_id, **options)
        backend = self.app.backend
        store = backend.require("a chord")
        to_parent = bool(options.pop("add_to_parent", True))
        body = body.clone()
        _carry(body, options)
        body_result = body.freeze(task_id or body.id)
        header = self.header
        group_id = str(header.id or new_id())
        if header.lazy and not isinstance(store, CeleryChords):  # each sent as the generator yields it
            results = send_lazily(self.app, header, body, group_id, args, kwargs, options)
            return _header_result(self.bound_app, body_result, group_id, results, to_parent)
        members = [member.clone() for member in header.tasks]  # the chord itself may be applied again
        results = [m.freeze(group_id=group_id, group_index=i) for i, m in enumerate(members)]
        backend.save_group(group_id, [r.id for r in results])
        if isinstance(store, CeleryChords):  # Celery's wire: counted in Celery's own keys, by either side
            store.chord_start(group_id, len(members), backend.ttl)
        else:
            store.counter_init(group_id, len(members), backend.ttl)
            store.counter_init(group_id + FAILED, 1, backend.ttl)
        if not members:
            body.apply_async(([],))
        for index, member in enumerate(members):
            member.apply_async(args, kwargs, **{**options, "group_id": group_id, "group_index": index,
                                                "chord": dict(body), "add_to_parent": False})
        return _header_result(self.bound_app, body_result, group_id, results, to_parent)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              body: Signature | None = None, task_id: str | None = None, **options: Any) -> Any:
        """Run the header here, now, then the body with its results (or fail as a worker would)."""
        body = body or self.body
        if body is None:
            raise TypeError("a chord needs a body: chord(header, body), or chord(header)(body)")
        header = self.header.apply(args, kwargs)
        failed = [r for r in _leaves(header) if not r.successful()]
        if failed:
            culprit = failed[0]
            error = ChordError(f"Dependency {culprit.id} raised {culprit.result!r}")
            return EagerResult(task_id or body.id or new_id(), error, "FAILURE", parent=header)
        result = body.apply(([_value(r) for r in header.results],), task_id=task_id or body.id)
        result.parent = header
        return result

    def freeze(self, _id: str | None = None, group_id: str | None = None, chord: Any = None,
               root_id: str | None = None, parent_id: str | None = None, group_index: int | None = None) -> Any:
        """The chord's result is its body's, with the header's `GroupResult` as its parent (as in Celery)."""
        body = self.body
        if body is None:
            raise TypeError("a chord needs a body to be frozen")
        header = self.header
        header_result = header.freeze(root_id=root_id)
        self["kwargs"]["header"] = dict(header)
        result = body.freeze(_id or self.options.get("task_id"), group_id, chord, root_id, parent_id, group_index)
        self._set_body(body)
        link_parent(result, header_result)
        return result

    def link(self, callback: Any) -> Any:
        body = self.body
        if body is None:
            raise TypeError("link a callback to a chord once it has a body")
        body.link(callback)
        self._set_body(body)
        return callback

    def link_error(self, errback: Any) -> Any:
        """The chord's errback: called once when a header task fails (or the body does).

        With ``task_allow_error_cb_on_chord_header`` it is also linked (immutable) to each header
        task, called once per failed one, as Celery's ``_chord.link_error`` links it. Without it, a
        chord in the header is not linked, as Celery links it: its failure fails this chord (Celery's
        would never join), whose errback is then called, once.
        """
        body = self.body
        if body is None:
            raise TypeError("link an errback to a chord once it has a body")
        errback = maybe_signature(errback, app=self.bound_app)
        if self.app.conf["task_allow_error_cb_on_chord_header"]:
            for task in self.tasks:
                task.link_error(errback.clone(immutable=True))
        body.link_error(errback)
        self._set_body(body)
        return errback

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"


def _leaves(result: Any) -> list[Any]:
    """An eager header's task results, a member that is a chain ending in a group giving that group's."""
    if isinstance(result, GroupResult):
        return [leaf for r in result.results for leaf in _leaves(r)]
    return [result]


def _value(result: Any) -> Any:
    """An eager header member's value: a chain ending in a group gives the group's results list."""
    if isinstance(result, GroupResult):
        return [_value(r) for r in result.results]
    return result.result


def _header_result(app: AppPort | None, body_result: Any, group_id: str, results: list[Any],
                   to_parent: bool) -> Any:
    """The chord's result, its header's `GroupResult` as parent; the header is a child of the running task
    (Celery applies the header as a group)."""
    header = GroupResult(group_id, results, app=app)
    link_parent(body_result, header)
    if to_parent:
        add_child(header)
    return body_result


def _carry(body: Signature, options: dict[str, Any]) -> None:
    """What follows the chord (a chain's later steps, its membership of an outer group) goes on the body."""
    for key in ("chain", "group_id", "group_index", "chord"):
        value = options.pop(key, None)
        if value is not None:
            body.set(**{key: value})
    for callback in _listed(options.pop("link", None)):
        body.link(callback)
    for errback in _listed(options.pop("link_error", None)):
        body.link_error(errback)


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


TYPES.update({"chord": chord})

__all__ = ["FAILED", "chord"]
