"""The tasks every app has, as in Celery: ``celery.map`` and ``celery.starmap`` (``task.map``, ``chunks``).

Each runs another task's body once per item, in the one worker that took it, and
returns the list of results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..ports import AppPort
from .signature import maybe_signature


def register(app: AppPort) -> None:
    """Add the builtin tasks to ``app`` (when it is finalized); a task of that name already there stays."""

    def run_map(task: Mapping[str, Any], it: Iterable[Any]) -> list[Any]:
        body = maybe_signature(task, app=app).type
        return [body(item) for item in it]

    def run_starmap(task: Mapping[str, Any], it: Iterable[Any]) -> list[Any]:
        body = maybe_signature(task, app=app).type
        return [body(*item) for item in it]

    for name, fun in (("celery.map", run_map), ("celery.starmap", run_starmap)):
        app.task_from_fun(fun, name=name)


__all__ = ["register"]
