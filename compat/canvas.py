"""Signatures: a task call to make later (``add.s(2, 2)``, ``add.si(...)``, ``signature("name", ...)``).

A signature is a dict (as in Celery, so it is JSON) of the task name, args,
kwargs and options; ``delay`` / ``apply_async`` merge the partial arguments
with the ones given now (none for an immutable one) and publish it. Chains,
groups and chords build on signatures and arrive with the next issue: ``|``,
``link`` and friends are refused until then, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .exceptions import RefusedFeature
from .result import AsyncResult, EagerResult

if TYPE_CHECKING:
    from .app import Celery
    from .task import Task

_NEXT = "chains, groups and chords arrive with canvas support (the next issue)"


class Signature(dict[str, Any]):
    """One task call, stored: ``task``, ``args``, ``kwargs``, ``options``, ``immutable``."""

    def __init__(self, task: str | Task | Mapping[str, Any], args: Sequence[Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
                 immutable: bool = False, app: Celery | None = None, **ex: Any) -> None:
        if isinstance(task, Mapping):
            super().__init__(task)
            self._app = app
            return
        name = task if isinstance(task, str) else task.name
        self._app = app if app is not None or isinstance(task, str) else task.app
        super().__init__(task=name, args=tuple(args or ()), kwargs=dict(kwargs or {}),
                         options={**dict(options or {}), **ex}, subtask_type=None, immutable=immutable)

    @property
    def task(self) -> str:
        return str(self["task"])

    @property
    def args(self) -> tuple[Any, ...]:
        return tuple(self["args"])

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self["kwargs"])

    @property
    def options(self) -> dict[str, Any]:
        return dict(self["options"])

    @property
    def immutable(self) -> bool:
        return bool(self.get("immutable"))

    @property
    def app(self) -> Celery:
        if self._app is not None:
            return self._app
        from .shared import get_current_app

        found: Celery = get_current_app()
        return found

    @property
    def type(self) -> Task:
        return self.app.tasks[self.task]

    def _merge(self, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None,
               options: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
        if self.immutable:
            return self.args, self.kwargs, {**self.options, **options}
        return (*(args or ()), *self.args), {**self.kwargs, **(kwargs or {})}, {**self.options, **options}

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult:
        call_args, call_kwargs, call_options = self._merge(args, kwargs, options)
        if self.task in self.app.tasks:
            return self.type.apply_async(call_args, call_kwargs, **call_options)
        return self.app.send_task(self.task, call_args, call_kwargs, **call_options)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> EagerResult:
        call_args, call_kwargs, call_options = self._merge(args, kwargs, options)
        return self.type.apply(call_args, call_kwargs, **call_options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call_args, call_kwargs, _ = self._merge(args, kwargs, {})
        return self.type(*call_args, **call_kwargs)

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        if immutable is not None:
            self["immutable"] = immutable
        self["options"] = {**self.options, **options}
        return self

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Signature:
        call_args, call_kwargs, call_options = self._merge(args, kwargs, options)
        return Signature(self.task, call_args, call_kwargs, call_options, immutable=self.immutable, app=self._app)

    def replace(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                options: Mapping[str, Any] | None = None) -> Signature:
        return Signature(self.task, self.args if args is None else args, self.kwargs if kwargs is None else kwargs,
                         self.options if options is None else options, immutable=self.immutable, app=self._app)

    def link(self, callback: Any) -> Any:
        raise RefusedFeature(f"signature.link() is refused: {_NEXT}")

    def link_error(self, errback: Any) -> Any:
        raise RefusedFeature(f"signature.link_error() is refused: {_NEXT}")

    on_error = link_error

    def __or__(self, other: Any) -> Any:
        raise RefusedFeature(f"sig | sig is refused: {_NEXT}")

    def __repr__(self) -> str:
        args = ", ".join([*(repr(a) for a in self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task}({args})"

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)


def signature(varies: Any, *args: Any, **kwargs: Any) -> Signature:
    """A signature from a task name, a task, or a dict (Celery's ``signature()``)."""
    if isinstance(varies, Signature):
        return varies.clone()
    return Signature(varies, *args, **kwargs)


subtask = signature


def _refused(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature(f"celery.{name} is refused: {_NEXT}")

    refuse.__name__ = name
    return refuse


chain = _refused("chain")
group = _refused("group")
chord = _refused("chord")
chunks = _refused("chunks")
xmap = _refused("xmap")
xstarmap = _refused("xstarmap")
