"""The tasks every app has, as in Celery: ``celery.map``, ``celery.starmap`` and ``celery.accumulate``.

The first two (``task.map``, ``chunks``) run another task's body once per item, in the
one worker that took it, and return the list of results; ``celery.accumulate`` is the
body of the chord a task replaced by a group becomes, so that task's result is the
group's results.
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

    def accumulate(*args: Any, **kwargs: Any) -> Any:
        """What a task replaced by a group returns: the group's results (``self.replace(group)``)."""
        index = kwargs.get("index")
        return args[index] if index is not None else args

    for name, fun in (("celery.map", run_map), ("celery.starmap", run_starmap),
                      ("celery.accumulate", accumulate)):
        app.task_from_fun(fun, name=name)


__all__ = ["register"]
