"""The canvas primitives ``chain`` and ``group``, and `Canvas`, the base of every primitive.

Each primitive (these, ``chord`` in chords.py, ``chunks``, ``xmap`` and ``xstarmap`` in
maps.py) is a `Signature` (a JSON dict with its ``subtask_type``), so it can sit inside
another and travel in a message. What happens after a task is carried in that
task's message, as Celery's message body carries it: ``chain`` (the steps still to
run, last first), ``callbacks`` (``link``), ``errbacks`` (``link_error``), ``chord``
(the body a chord header task joins into) and ``group`` / ``group_index``. The
worker acts on them when the task ends (compat/running/flow.py).

- ``chain(a, b, c)``: ``a`` is published carrying ``[c, b]``; each step's return
  value is the first argument of the next (unless it is immutable). A group followed
  by another step becomes a chord, as in Celery. A chain ending in a group, in a chord's
  header, applies that group as a chord of its own, which counts in the outer one once.
- ``group([...])``: each task published with the group's id and its index.
- ``chord(header, body)`` (chords.py): the header's ids are saved and a counter set to
  their number in the result store; each header task, as it ends, counts itself down
  once, and the one that reaches 0 publishes the body with every result in header
  order. Nothing polls.

Groups and chords need a result backend, and say so when they are applied.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import GeneratorType
from typing import Any

from jobbridge.envelope import new_id

from ..exceptions import RefusedFeature
from ..ports import AppPort
from ..request import add_child
from ..results.groupresult import GroupResult
from .signature import TYPES, Signature, maybe_signature, signature


def tasks_of(tasks: tuple[Any, ...]) -> list[Any]:
    """``group(a, b)``, ``group([a, b])`` and ``group(generator)`` alike."""
    if len(tasks) == 1 and not isinstance(tasks[0], Mapping) and isinstance(tasks[0], Iterable):
        return list(tasks[0])
    return list(tasks)


class Canvas(Signature):
    """A primitive's dict: ``task`` is its builtin name, its parts are in ``kwargs``."""

    kind = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], app: AppPort | None = None) -> Signature:
        made = cls.__new__(cls)
        Signature.__init__(made, d, app=app)
        return made

    def _parts(self, key: str) -> list[Any]:
        """The parts, the same objects at every read (kept in place of their dicts), as Celery's are:
        ``for t in chord.tasks: t.link_error(...)`` links each header task for good."""
        stored = self["kwargs"].get(key) or []
        found = [maybe_signature(t, app=self.bound_app) for t in stored]
        if any(made is not kept for made, kept in zip(found, stored, strict=True)):
            self["kwargs"][key] = found
        return found

    def always_eager(self) -> bool:
        """Whether the app runs every call inline (task_always_eager): the primitive applies itself here."""
        return bool(self.app.conf["task_always_eager"])


def _members(tasks: Iterable[Any], app: AppPort | None) -> Iterator[Signature]:
    """A group's tasks as signatures, an inner group's tasks in its place (lazily: a generator stays one)."""
    for task in tasks:
        # a task itself is its signature with no arguments, as Celery's group reads it (signature(task))
        sig = maybe_signature(task, app=app) if isinstance(task, Mapping) else signature(task, app=app)
        yield from (sig.tasks if isinstance(sig, group) else [sig])


def whole(sig: Any) -> Any:
    """``sig`` with every task a generator of it yields read: it goes into another's dict as a whole."""
    return sig.read_all() if isinstance(sig, group) else sig


def _chord(header: group, body: Any, app: AppPort | None) -> Signature:
    """A group followed by a step: a chord, as in Celery (``group | sig``, and a group inside a chain)."""
    # chord is built on group and chain (canvas/chords.py imports this module), so it is imported at use
    from .chords import chord

    return chord(header, body, app=app)


class chain(Canvas):
    """Tasks one after the other, each result passed on."""

    kind = "chain"

    def __init__(self, *tasks: Any, app: AppPort | None = None, **options: Any) -> None:
        steps: list[Signature] = []
        for task in tasks_of(tasks):
            sig = whole(maybe_signature(task, app=app))
            steps.extend(_flattened(sig) if isinstance(sig, chain) else [sig])
        Signature.__init__(self, "celery.chain", (), {"tasks": [dict(s) for s in steps]}, options,
                           subtask_type="chain", app=app)

    @property
    def tasks(self) -> tuple[Signature, ...]:
        return tuple(self._parts("tasks"))

    def __or__(self, other: Any) -> Any:
        # as Celery's unchain_tasks: each chain's links go onto its own steps, not onto the new chain
        if isinstance(other, chain):
            return chain(*_flattened(self), *_flattened(other), app=self.bound_app)
        if isinstance(other, Signature):
            return chain(*_flattened(self), other, app=self.bound_app)
        return NotImplemented

    def _steps(self) -> list[Signature]:
        """The steps to publish: copies, a group followed by a step made a chord (as Celery does).

        Built from the last step back, as Celery's chain does, so a group followed by a group
        followed by a task is a chord whose body is the chord of the second group and the task.
        """
        tasks, steps = [t.clone() for t in self.tasks], list[Signature]()
        while tasks:
            step = tasks.pop()
            if isinstance(step, group) and steps:
                step = _chord(step, steps.pop(0), app=self.bound_app)
            steps.insert(0, step)
        return steps

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, **options: Any) -> Any:
        """Publish the first step, carrying the rest; the last step's result, its parents linked."""
        options = {**self.options, **options}
        if self.always_eager():
            return self.apply(args, kwargs, **options)
        steps = self._steps()
        if not steps:
            raise ValueError("an empty chain has nothing to run")
        if any(step.subtask_type in ("group", "chord", "chunks") for step in steps):
            self.app.backend.require("a chain with a group or a chord in it")  # say so now, not in a worker
        _attach(steps, options)
        results = [step.freeze() for step in steps]
        for before, after in itertools.pairwise(results):
            link_parent(after, before)
        later = [*list(options.pop("chain", None) or []), *(dict(s) for s in reversed(steps[1:]))]
        steps[0].apply_async(args, kwargs, chain=later or None, **options)
        return results[-1]

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Any:
        """Run every step here, now, each result passed on; stops at the first failure."""
        result: Any = None
        for index, step in enumerate(self._steps()):
            step_args = tuple(args or ()) if index == 0 else (result.get(),)
            parent = result
            result = step.apply(step_args, kwargs if index == 0 else None)
            result.parent = parent
            if not _eager_ok(result):
                break
        return result

    def freeze(self, _id: str | None = None, group_id: str | None = None, chord: Any = None,
               root_id: str | None = None, parent_id: str | None = None, group_index: int | None = None) -> Any:
        steps = self.tasks
        if not steps:
            raise ValueError("an empty chain has nothing to run")
        results = [step.freeze(root_id=root_id) for step in steps[:-1]]
        results.append(steps[-1].freeze(_id, group_id, chord, root_id, parent_id, group_index))
        for before, after in itertools.pairwise(results):
            link_parent(after, before)
        result = results[-1]
        self["kwargs"]["tasks"] = [dict(s) for s in steps]
        self.options["task_id"] = result.id  # a chain's id is its last task's, as in Celery
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __repr__(self) -> str:
        return " | ".join(repr(t) for t in self.tasks) or "chain()"


def _flattened(inner: chain) -> list[Signature]:
    """An inner chain's steps, keeping its links as Celery does: link on its last step, link_error on each."""
    steps = [step.clone() for step in inner.tasks]  # copies: the inner chain keeps its own steps as they are
    if steps:
        for callback in _as_list(inner.options.get("link")):
            steps[-1].link(callback)
        for errback in _as_list(inner.options.get("link_error")):
            for step in steps:
                step.link_error(errback)
    return steps


def _attach(steps: list[Signature], options: dict[str, Any]) -> None:
    """A chain's own options: link on the last step, link_error on every one, membership on the last."""
    for errback in _as_list(options.pop("link_error", None)):
        for step in steps:
            step.link_error(errback)
    last = steps[-1]
    if isinstance(last, group) and options.get("chord") is not None:
        steps[-1] = last = _gathered(last)  # before link=: a callback gets the group's results list
    for callback in _as_list(options.pop("link", None)):
        last.link(callback)
    task_id = options.pop("task_id", None)
    if task_id:
        last.set(task_id=task_id)
    for key in ("group_id", "group_index", "chord"):
        if options.get(key) is None:
            continue
        value = options.pop(key)
        if isinstance(last, group):
            continue  # a member of a plain group: the group's result holds the inner group's result itself
        last.set(**{key: value})


def _gathered(inner: group) -> Signature:
    """A chain's closing group, in a chord's header: a chord of its own whose body counts in the outer one.

    The outer chord saved the group's id as this member's result and counts one per member, so the
    group cannot count there itself: it becomes a chord whose body, the builtin ``celery.accumulate``,
    takes that id, stores the group's results list under it and counts the outer chord down once (its
    join publishes the outer body exactly once). A failed task of the group fails the inner chord, whose
    body's failure fails the outer one, once. The inner chord's header gets an id of its own, so the
    member's id is only ever a task's result.
    """
    app = inner.app
    app.finalize()  # the builtin tasks are registered when the app is finalized
    header = inner.clone()
    assert isinstance(header, group)
    header.options.pop("task_id", None)
    body = Signature("celery.accumulate", kwargs={"index": 0}, app=app)
    gathered = _chord(header, body, app=app)
    gathered.set(task_id=inner.id or new_id())
    return gathered


def link_parent(result: Any, parent: Any) -> None:
    """Make ``parent`` the parent of ``result``'s earliest result, as Celery links a chain's and a chord's.

    A chord's result already has its header's `GroupResult` as parent, and a chain's last result its
    earlier steps: the link goes on the first one without a parent, so ``res.parent.parent...`` walks
    every step back to the first.
    """
    node, seen = result, set[int]()
    while getattr(node, "parent", None) is not None and id(node) not in seen:
        seen.add(id(node))
        node = node.parent
    if node is not parent and id(node) not in seen:
        node.parent = parent


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _eager_ok(result: Any) -> bool:
    if isinstance(result, GroupResult):
        return not result.failed()
    return bool(result.successful())


class group(Canvas):
    """Tasks at once; a `GroupResult` of them all."""

    kind = "group"

    #: a generator's tasks not read yet (``group(generator)``): read one by one as they are sent
    _unread: Iterator[Signature] | None = None

    def __init__(self, *tasks: Any, app: AppPort | None = None, **options: Any) -> None:
        lazy = len(tasks) == 1 and isinstance(tasks[0], GeneratorType)
        members = [] if lazy else [dict(s) for s in _members(tasks_of(tasks), app)]
        Signature.__init__(self, "celery.group", (), {"tasks": members}, options, subtask_type="group", app=app)
        if lazy:
            self._unread = _members(tasks[0], app)

    @property
    def tasks(self) -> tuple[Signature, ...]:
        """Every task (a generator's read to its end now, as Celery's ``regen`` is when it is listed)."""
        return tuple(self.each())

    @property
    def lazy(self) -> bool:
        """Whether tasks of a generator are still to be read (the group's size is not known yet)."""
        return self._unread is not None

    def each(self) -> Iterator[Signature]:
        """Each task, a generator's read only as far as the caller goes, as Celery sends them (#3021)."""
        yield from self._parts("tasks")
        while self._unread is not None:
            task = next(self._unread, None)
            if task is None:
                self._unread = None
                return
            self["kwargs"]["tasks"].append(task)  # kept, the same object at each later read
            yield task

    def read_all(self) -> group:
        """Read a generator's tasks to the end: before the group is copied or put in a dict of another."""
        if self._unread is not None:
            self["kwargs"]["tasks"] = list(self.each())
        return self

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Signature:
        return super(group, self.read_all()).clone(args, kwargs, **options)

    def __deepcopy__(self, memo: dict[int, Any]) -> Signature:
        return super(group, self.read_all()).__deepcopy__(memo)  # a copy of a chord holding this group

    def __or__(self, other: Any) -> Any:
        if isinstance(other, group | chain):
            return chain(self, other, app=self.bound_app)
        if isinstance(other, Signature):
            return _chord(self, other, app=self.bound_app)
        return NotImplemented

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, **options: Any) -> Any:
        """Publish every task with the group's id and its index; their results as a GroupResult."""
        options = {**self.options, **options}
        if self.always_eager():
            return self.apply(args, kwargs, **options)
        self.app.backend.require("a group")
        later = options.pop("chain", None)
        if later:  # a group with steps after it, as a chain hands it on: a chord, as in Celery
            body = maybe_signature(later[-1], app=self.bound_app)
            return _chord(self, body, app=self.bound_app).apply_async(args, kwargs, chain=later[:-1] or None, **options)
        if _as_list(options.get("link")) or _as_list(self.options.get("link")):
            raise RefusedFeature("group.link() is refused: Celery links it to the group's first task only, so it "
                                 "runs when that one ends, before the others and even if they fail; to run a task "
                                 "once all are done, use a chord: chord(group, callback)")
        group_id = str(options.pop("task_id", None) or self.id or new_id())
        each = {**options, "group_id": group_id, "add_to_parent": False}  # the group is the child, not each
        results = [task.apply_async(args, kwargs, **{**each, "group_index": index})
                   for index, task in enumerate(self.each())]  # each sent as a generator yields it
        found = GroupResult(group_id, results, app=self.bound_app)
        if options.get("add_to_parent", True):
            add_child(found)
        return found

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> GroupResult:
        """Run every task here, now, one after the other."""
        group_id = str(options.pop("task_id", None) or self.id or new_id())
        return GroupResult(group_id, [task.apply(args, kwargs) for task in self.tasks], app=self.bound_app)

    def freeze(self, _id: str | None = None, group_id: str | None = None, chord: Any = None,
               root_id: str | None = None, parent_id: str | None = None, group_index: int | None = None) -> Any:
        gid = _id or self.id or new_id()
        self.options["task_id"] = gid
        tasks = self.tasks
        results = [t.freeze(group_id=gid, group_index=i, root_id=root_id) for i, t in enumerate(tasks)]
        self["kwargs"]["tasks"] = [dict(t) for t in tasks]
        return GroupResult(gid, results, app=self.bound_app)

    def link_error(self, errback: Any) -> Any:
        tasks = self.tasks
        for task in tasks:
            task.link_error(errback)
        self["kwargs"]["tasks"] = [dict(t) for t in tasks]
        return errback

    def skew(self, start: float = 1.0, stop: float | None = None, step: float = 1.0) -> group:
        """Spread the tasks out: countdown ``start``, ``start + step``, ... (Celery's ``skew``)."""
        tasks = self.tasks
        for index, task in enumerate(tasks):
            countdown = start + index * step
            task.set(countdown=min(countdown, stop) if stop is not None else countdown)
        self["kwargs"]["tasks"] = [dict(t) for t in tasks]
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def __repr__(self) -> str:
        return f"group([{', '.join(repr(t) for t in self.tasks)}])"


TYPES.update({"chain": chain, "group": group})

__all__ = ["chain", "group"]
