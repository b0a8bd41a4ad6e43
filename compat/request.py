"""``self.request``: what a running task knows about its own message, per thread, as in Celery."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# Header names that describe the message itself; any other header is the caller's own.
CELERY_HEADERS = frozenset({
    "lang", "task", "id", "shadow", "eta", "expires", "group", "group_index", "retries", "timelimit",
    "root_id", "parent_id", "argsrepr", "kwargsrepr", "origin", "ignore_result", "replaced_task_nesting",
    "stamped_headers", "stamps", "callbacks", "errbacks", "chain", "chord",
    "properties",  # the message properties the caller set (apply_async(app_id=...)): request.properties
})
#: the headers that say what follows a task (compat/running/flow.py), as Request attributes
WORKFLOW_HEADERS = ("callbacks", "errbacks", "chain", "chord", "group", "group_index")


class Request:
    """A task's request context (Celery's ``Context``); attributes not set read as Celery's defaults."""

    id: str | None = None
    task: str | None = None
    args: Any = None
    kwargs: Any = None
    retries: int = 0
    is_eager: bool = False
    called_directly: bool = True
    hostname: str | None = None
    delivery_info: Any = None
    headers: Any = None
    eta: str | None = None
    expires: str | None = None
    timelimit: Any = None
    time_limit: float | None = None
    soft_time_limit: float | None = None
    root_id: str | None = None
    parent_id: str | None = None
    group: str | None = None
    group_index: int | None = None
    chord: Any = None
    chain: Any = None
    callbacks: Any = None
    errbacks: Any = None
    reply_to: str | None = None
    correlation_id: str | None = None
    origin: str | None = None
    ignore_result: bool = False
    properties: Any = None
    shadow: str | None = None
    utc: bool = True
    loglevel: Any = None
    logfile: Any = None
    replaced_task_nesting: int = 0
    stamped_headers: Any = None
    stamps: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.update(*args, **kwargs)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.update(*args, **kwargs)

    def clear(self) -> None:
        self.__dict__.clear()

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def taskset(self) -> str | None:
        return self.group

    def __repr__(self) -> str:
        return f"<Context: {self.__dict__!r}>"


class RequestStack:
    """One task's requests, a stack per thread (a task may call itself, or another task, inline)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def stack(self) -> list[Request]:
        found: list[Request] | None = getattr(self._local, "stack", None)
        if found is None:
            found = self._local.stack = []
        return found

    @property
    def top(self) -> Request | None:
        stack = self.stack
        return stack[-1] if stack else None

    def push(self, request: Request) -> None:
        self.stack.append(request)

    def pop(self) -> Request | None:
        stack = self.stack
        return stack.pop() if stack else None

    @contextmanager
    def pushed(self, request: Request) -> Iterator[Request]:
        self.push(request)
        try:
            yield request
        finally:
            self.pop()


def custom_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's own headers: everything but the message's description."""
    return {k: v for k, v in headers.items() if k not in CELERY_HEADERS}


_current_tasks = threading.local()


def task_stack() -> list[Any]:
    """The tasks running in this thread, innermost last (``celery.current_task``)."""
    found: list[Any] | None = getattr(_current_tasks, "stack", None)
    if found is None:
        found = _current_tasks.stack = []
    return found


def current_task() -> Any:
    stack = task_stack()
    return stack[-1] if stack else None


def current_request() -> Request | None:
    """The request of the task running in this thread, if any (the parent of what it publishes)."""
    task = current_task()
    if task is None:
        return None
    found: Request | None = task.request_stack.top
    return found


# -- children: what a task applied (Celery's ``request.children``, stored as the result's ``children``) --

#: each running request's children, kept beside it (a request's own attributes travel: retries, errbacks)
_children: weakref.WeakKeyDictionary[Request, list[Any]] = weakref.WeakKeyDictionary()
_collecting = threading.local()


@contextmanager
def collecting(request: Request) -> Iterator[Request]:
    """What is applied meanwhile is a child of ``request``: the worker's callbacks, chain step and errbacks
    after the task's own code returned, which Celery applies before it stores the result, as its children."""
    stack: list[Request] = getattr(_collecting, "stack", None) or []
    _collecting.stack = [*stack, request]
    try:
        yield request
    finally:
        _collecting.stack = stack


def add_child(result: Any) -> None:
    """Celery's ``add_to_parent``: a result applied while a task runs is one of that task's children."""
    stack: list[Request] = getattr(_collecting, "stack", None) or []
    request = stack[-1] if stack else current_request()
    if request is not None and not request.called_directly:
        _children.setdefault(request, []).append(result)


def children_of(request: Request) -> list[Any]:
    """The results ``request``'s task applied, in order (empty when none)."""
    return list(_children.get(request, ()))
