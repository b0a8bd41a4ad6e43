"""``Signature``: one task call to make later, as a JSON dict (``add.s(2)``, ``add.si(2, 2)``).

As in Celery, a signature is a dict — ``task``, ``args``, ``kwargs``, ``options``,
``subtask_type``, ``immutable`` — so it travels inside a message: the ``callbacks``,
``errbacks``, ``chain`` and ``chord`` a task carries are lists of these. Calling
one merges the partial arguments: the given ones first, then its own (an
immutable one keeps its own and ignores the given ones), options merged with the
call's winning. Chains, groups and chords are signatures too (compat/canvas/primitives.py);
`from_dict` rebuilds the right class from a dict's ``subtask_type``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from jobbridge.envelope import new_id

from ..ports import AppPort, TaskPort
from ..results.asyncresult import AsyncResult
from ..shared import get_current_app
from .stamping import refuse

#: subtask_type -> the Signature subclass of that canvas primitive (filled by the module defining each)
TYPES: dict[str, type[Signature]] = {}


class Signature(dict[str, Any]):
    """One task call, stored: ``task``, ``args``, ``kwargs``, ``options``, ``immutable``."""

    def __init__(self, task: str | TaskPort | Mapping[str, Any] | None = None, args: Sequence[Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
                 type: Any = None, subtask_type: str | None = None, immutable: bool = False,
                 app: AppPort | None = None, **ex: Any) -> None:
        if isinstance(task, Mapping):
            super().__init__(copy.deepcopy(dict(task)))
            self.setdefault("options", {})
            self._app = app
            return
        name = task if isinstance(task, str) or task is None else task.name
        self._app = app if app is not None or task is None or isinstance(task, str) else task.app
        super().__init__(task=name, args=tuple(args or ()), kwargs=dict(kwargs or {}),
                         options={**dict(options or {}), **ex}, subtask_type=subtask_type, immutable=immutable)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], app: AppPort | None = None) -> Signature:
        """A signature (or chain, group, chord, ...) from its dict."""
        kind = d.get("subtask_type")
        if kind and kind in TYPES and cls is Signature:
            return TYPES[kind].from_dict(d, app=app)
        return cls(d, app=app)

    # -- fields: each reads and writes the dict, as Celery's do (``sig.args = (1,)``) --------------

    @property
    def task(self) -> str:
        return str(self["task"])

    @task.setter
    def task(self, value: str) -> None:
        self["task"] = value

    @property
    def name(self) -> str:
        """The task's name, as ``Task.name`` (Celery's duck typing: ``sig.name == task.name``)."""
        return self.task

    @property
    def parent_id(self) -> str | None:
        return self.options.get("parent_id")

    @property
    def root_id(self) -> str | None:
        return self.options.get("root_id")

    @property
    def args(self) -> tuple[Any, ...]:
        return tuple(self.get("args") or ())

    @args.setter
    def args(self, value: Sequence[Any]) -> None:
        self["args"] = tuple(value)

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.get("kwargs") or {})

    @kwargs.setter
    def kwargs(self, value: Mapping[str, Any]) -> None:
        self["kwargs"] = dict(value)

    @property
    def options(self) -> dict[str, Any]:
        found: dict[str, Any] = self["options"]
        return found

    @options.setter
    def options(self, value: Mapping[str, Any]) -> None:
        self["options"] = dict(value)

    @property
    def immutable(self) -> bool:
        return bool(self.get("immutable"))

    @immutable.setter
    def immutable(self, value: bool) -> None:
        self["immutable"] = bool(value)

    @property
    def subtask_type(self) -> str | None:
        found = self.get("subtask_type")
        return None if found is None else str(found)

    @subtask_type.setter
    def subtask_type(self, value: str | None) -> None:
        self["subtask_type"] = value

    @property
    def id(self) -> str | None:
        found = self.options.get("task_id")
        return None if found is None else str(found)

    @id.setter
    def id(self, value: str | None) -> None:
        self.options["task_id"] = value

    @property
    def bound_app(self) -> AppPort | None:
        """The app this signature was given (None: it follows the current app at each use)."""
        return self._app

    @property
    def app(self) -> AppPort:
        if self._app is not None:
            return self._app
        return get_current_app()

    @property
    def type(self) -> TaskPort:
        return self.app.tasks[self.task]

    # -- calling --------------------------------------------------------------------------------

    def _merge(self, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None,
               options: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
        merged = {**self.options, **options}
        if self.immutable:
            return self.args, self.kwargs, merged
        return (*(args or ()), *self.args), {**self.kwargs, **(kwargs or {})}, merged

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, **options: Any) -> Any:
        """Publish the call (the given arguments before its own, unless immutable)."""
        call_args, call_kwargs, call_options = self._merge(args, kwargs, options)
        call_options.pop("route_name", None)
        if self.task in self.app.tasks:
            return self.type.apply_async(call_args, call_kwargs, **call_options)
        return self.app.send_task(self.task, call_args, call_kwargs, **call_options)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Any:
        """Run the call here, now (``task.apply``): an EagerResult (a GroupResult for a group)."""
        call_args, call_kwargs, call_options = self._merge(args, kwargs, options)
        return self.type.apply(call_args, call_kwargs, **call_options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call_args, call_kwargs, _ = self._merge(args, kwargs, {})
        return self.type(*call_args, **call_kwargs)

    # -- building -------------------------------------------------------------------------------

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        if immutable is not None:
            self["immutable"] = immutable
        self.options.update(options)
        return self

    def set_immutable(self, immutable: bool) -> None:
        self["immutable"] = immutable

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Signature:
        """A copy, with more partial arguments and options (links are copied, not shared)."""
        immutable = options.pop("immutable", None)
        made = type(self).from_dict(copy.deepcopy(dict(self)), app=self._app)
        call_args, call_kwargs, call_options = made._merge(args, kwargs, options)
        made["args"], made["kwargs"], made["options"] = call_args, call_kwargs, call_options
        if immutable is not None:
            made["immutable"] = bool(immutable)
        return made

    def replace(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                options: Mapping[str, Any] | None = None) -> Signature:
        made = self.clone()
        if args is not None:
            made["args"] = tuple(args)
        if kwargs is not None:
            made["kwargs"] = dict(kwargs)
        if options is not None:
            made["options"] = dict(options)
        return made

    def freeze(self, _id: str | None = None, group_id: str | None = None, chord: Any = None,
               root_id: str | None = None, parent_id: str | None = None, group_index: int | None = None) -> Any:
        """Fix the task id now (and its group), so the result is known before it is published."""
        self.options["task_id"] = _id or self.id or new_id()
        for key, value in (("group_id", group_id), ("chord", chord), ("root_id", root_id),
                           ("parent_id", parent_id), ("group_index", group_index)):
            if value is not None:
                self.options[key] = value
        return AsyncResult(str(self.options["task_id"]), app=self._app, task_name=self["task"])

    def link(self, callback: Any) -> Any:
        """Apply ``callback`` with this task's return value when it succeeds."""
        self.options["link"] = [*_as_list(self.options.get("link")), dict(callback)]
        return callback

    def link_error(self, errback: Any) -> Any:
        """Apply ``errback`` when this task fails (``(request, exc, traceback)`` or its id, as in Celery)."""
        self.options["link_error"] = [*_as_list(self.options.get("link_error")), dict(errback)]
        return errback

    def on_error(self, errback: Any) -> Signature:
        self.link_error(errback)
        return self

    def stamp(self, visitor: Any = None, append_stamps: bool = False, **headers: Any) -> None:
        """Refused (compat/canvas/stamping.py): the values go in ``headers=`` instead."""
        raise refuse(f"{type(self).__name__}.stamp()")

    def stamp_links(self, visitor: Any = None, append_stamps: bool = False, **headers: Any) -> None:
        raise refuse(f"{type(self).__name__}.stamp_links()")

    def __or__(self, other: Any) -> Any:
        # chain and group are Signatures built on this class, so this module cannot import them first:
        # ``sig | other`` is the one place a signature makes a workflow (Celery's API puts it here).
        from .primitives import chain, group

        if isinstance(other, chain):
            return chain(self, *other.tasks, app=self._app)
        if isinstance(other, Signature | group):
            return chain(self, other, app=self._app)
        return NotImplemented

    def __deepcopy__(self, memo: dict[int, Any]) -> Signature:
        return type(self).from_dict(copy.deepcopy(dict(self), memo), app=self._app)

    def __json__(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        args = ", ".join([*(repr(a) for a in self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task}({args})" + ("!" if self.immutable else "")

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def maybe_signature(d: Any, app: AppPort | None = None, clone: bool = False) -> Any:
    """A signature for ``d`` (a dict or a signature); None stays None."""
    if d is None:
        return None
    if isinstance(d, Signature):
        if clone:
            d = d.clone()
        if app is not None and d._app is None:
            d._app = app
        return d
    if isinstance(d, Mapping):
        return Signature.from_dict(d, app=app)
    raise TypeError(f"not a signature: {d!r}")


def signature(varies: Any, *args: Any, **kwargs: Any) -> Signature:
    """A signature from a task name, a task, a dict, or a signature (Celery's ``signature()``)."""
    app = kwargs.get("app")
    if isinstance(varies, Signature):
        return varies.clone()
    if isinstance(varies, Mapping):
        return Signature.from_dict(varies, app=app)
    return Signature(varies, *args, **kwargs)


subtask = signature

__all__ = ["TYPES", "Signature", "maybe_signature", "signature", "subtask"]
