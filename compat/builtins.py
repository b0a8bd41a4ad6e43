"""The tasks every app has, as in Celery: ``celery.map`` and ``celery.starmap`` (``task.map``, ``chunks``).

Each runs another task's body once per item, in the one worker that took it, and
returns the list of results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import Celery


def register(app: Celery) -> None:
    """Add the builtin tasks to ``app`` (when it is finalized)."""
    from .signature import maybe_signature

    def run_map(task: Mapping[str, Any], it: Iterable[Any]) -> list[Any]:
        body = maybe_signature(task, app=app).type
        return [body(item) for item in it]

    def run_starmap(task: Mapping[str, Any], it: Iterable[Any]) -> list[Any]:
        body = maybe_signature(task, app=app).type
        return [body(*item) for item in it]

    for name, fun in (("celery.map", run_map), ("celery.starmap", run_starmap)):
        if name not in app._tasks:
            app._task_from_fun(fun, name=name)


__all__ = ["register"]
