"""``task.map(it)``, ``task.starmap(it)`` and ``task.chunks(it, n)``: many calls of one task as few messages.

``xmap`` / ``xstarmap`` are one message for the builtin ``celery.map`` / ``celery.starmap``
task (compat/canvas/builtins.py), which calls the task once per item in the one worker that
took it; ``chunks`` is a group of ``xstarmap`` messages, ``n`` items each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

from ..ports import AppPort
from .primitives import Canvas, group
from .signature import TYPES, Signature, maybe_signature


class _Map(Canvas):
    """``task.map(it)`` / ``task.starmap(it)``: one task that calls ``task`` for each item, in one worker."""

    builtin = ""

    def __init__(self, task: Any, it: Iterable[Any], app: AppPort | None = None, **options: Any) -> None:
        sig = maybe_signature(task, app=app) if not isinstance(task, str) else Signature(task, app=app)
        Signature.__init__(self, self.builtin, (), {"task": dict(sig), "it": list(it)}, options,
                           subtask_type=self.kind, immutable=True, app=app)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, **options: Any) -> Any:
        self.app.finalize()  # the builtin tasks are registered when the app is finalized
        return Signature.apply_async(self, args, kwargs, **options)


class xmap(_Map):
    kind, builtin = "xmap", "celery.map"


class xstarmap(_Map):
    kind, builtin = "xstarmap", "celery.starmap"


class chunks(Canvas):
    """``task.chunks(it, n)``: the items in groups of ``n``, each group one ``xstarmap`` task, all a group."""

    kind = "chunks"

    def __init__(self, task: Any, it: Iterable[Any], n: int, app: AppPort | None = None, **options: Any) -> None:
        if int(n) < 1:
            raise ValueError(f"chunks() needs a chunk size of at least 1, not {n!r}")
        sig = maybe_signature(task, app=app) if not isinstance(task, str) else Signature(task, app=app)
        Signature.__init__(self, "celery.chunks", (), {"task": dict(sig), "it": list(it), "n": int(n)},
                           options, subtask_type="chunks", immutable=True, app=app)

    def group(self) -> Any:
        """The group of ``xstarmap`` tasks, one per chunk."""
        task, items, n = self["kwargs"]["task"], iter(self["kwargs"]["it"]), self["kwargs"]["n"]
        parts = []
        while chunk := list(islice(items, n)):
            parts.append(xstarmap(task, chunk, app=self.bound_app))
        return group(parts, app=self.bound_app, **self.options)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    route_name: Any = None, **options: Any) -> Any:
        return self.group().apply_async(None, None, **options)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Any:
        return self.group().apply(None, None, **options)

    def __call__(self, **options: Any) -> Any:
        return self.apply_async(**options)

    def skew(self, start: float = 1.0, stop: float | None = None, step: float = 1.0) -> Any:
        return self.group().skew(start, stop, step)


TYPES.update({"chunks": chunks, "xmap": xmap, "xstarmap": xstarmap})

__all__ = ["chunks", "xmap", "xstarmap"]
