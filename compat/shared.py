"""The apps of this process: the current one (``celery.current_app``), and ``@shared_task``.

A shared task belongs to no app in particular: it is created in every app,
those that exist and those made later, and the name ``@shared_task`` returns
resolves to the task of the *current* app at each use, as Celery's proxy does.
As in Celery (``connect_on_app_finalize``, ``_announce_app_finalized``), an app gets
the shared tasks when it is finalized (its first use for work: ``app.tasks``, a
worker, a publish), and one already finalized gets each new one as it is defined;
so an app made early and never used (one made to read a setting) never reads its
configuration because a module defined a shared task.
Attribute writes go through too, so ``mock.patch("proj.tasks.add.delay")``
patches the task itself.

Results and signatures fall back to the current app, so this module sits below them
and knows apps only by compat/ports.py; compat/app.py tells it how to make the default
app (`set_default_maker`) rather than being imported from here.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from .ports import AppPort, TaskPort
from .request import current_task as running_task

_lock = threading.RLock()
_apps: weakref.WeakSet[AppPort] = weakref.WeakSet()
_current: list[AppPort] = []
_shared: list[Callable[[AppPort], TaskPort]] = []
#: makes the default app; compat/app.py sets it when it is imported, which compat/__init__.py does first
_make_default: list[Callable[[], object]] = []


def set_default_maker(make: Callable[[], object]) -> None:
    """How `get_current_app` makes the default app (a new app registers itself through `register_app`)."""
    _make_default[:] = [make]


def register_app(app: AppPort, set_as_current: bool) -> None:
    """A new app: remembered, and made current if asked (its shared tasks come when it is finalized)."""
    with _lock:
        _apps.add(app)
        if set_as_current or not _current:
            set_current(app)


def announce_finalized(app: AppPort) -> None:
    """``app`` is being finalized: every shared task made so far becomes one of its tasks (Celery's order)."""
    with _lock:
        makes = list(_shared)
    for make in makes:
        make(app)


def set_current(app: AppPort) -> None:
    with _lock:
        _current[:] = [app]


def get_current_app() -> AppPort:
    """The current app; a default one (configured by nothing) when no app was made yet, as in Celery."""
    with _lock:
        if not _current:
            _make_default[0]()
        return _current[0]


def peek_current() -> AppPort | None:
    """The current app, without making a default one: test fixtures put it back afterwards."""
    with _lock:
        return _current[0] if _current else None


def restore_current(app: AppPort | None) -> None:
    """Make ``app`` current again (None: no current app, the default one is made at the next use)."""
    with _lock:
        _current[:] = [] if app is None else [app]


def active_apps() -> list[AppPort]:
    return list(_apps)


def shared_task(*args: Any, **options: Any) -> Any:
    """``@shared_task`` / ``@shared_task(bind=True, ...)``: a task of every app, used through the current one."""

    def create(found: Callable[..., Any]) -> SharedTask:
        fun, given = _unwrapped(found, options)

        def make(app: AppPort) -> TaskPort:
            return app.task_from_fun(fun, **given)

        with _lock:
            _shared.append(make)
            finalized = [app for app in active_apps() if app.finalized]  # the others get it when finalized
        for app in finalized:
            make(app)
        return SharedTask(fun, given)

    if len(args) == 1 and callable(args[0]) and not options:
        return create(args[0])
    if args:
        raise TypeError("shared_task() takes the function alone, or keyword options only")
    return create


def _unwrapped(found: Any, options: dict[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The function under ``@shared_task`` and its options; a task already made is unwrapped.

    ``@shared_task`` stacked on ``@app.task`` (or on another ``@shared_task``) makes the same
    task, under the inner one's name, in every app, as the function alone would.
    """
    if isinstance(found, SharedTask):
        inner: dict[str, Any] = object.__getattribute__(found, "_options")
        return object.__getattribute__(found, "_fun"), {**inner, **options}
    body = getattr(type(found), "_fun", None)
    name = getattr(found, "name", None)
    if callable(body) and isinstance(name, str):
        return body, {"name": name, "bind": bool(getattr(type(found), "_bind", False)), **options}
    return found, options


class SharedTask:
    """Stands for a shared task: every use goes to that task in the current app."""

    def __init__(self, fun: Callable[..., Any], options: dict[str, Any]) -> None:
        object.__setattr__(self, "_fun", fun)
        object.__setattr__(self, "_options", options)

    def _get_current_object(self) -> TaskPort:
        return get_current_app().task_from_fun(self._fun, **self._options)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._get_current_object())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get_current_object(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get_current_object(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._get_current_object(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._get_current_object()(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._get_current_object())


class CurrentApp:
    """``celery.current_app``: every use goes to the current app."""

    def _get_current_object(self) -> AppPort:
        return get_current_app()

    def __getattr__(self, name: str) -> Any:
        return getattr(get_current_app(), name)

    def __repr__(self) -> str:
        return repr(get_current_app())


class CurrentTask:
    """``celery.current_task``: the task running in this thread (falsy when none)."""

    def _get_current_object(self) -> TaskPort | None:
        found: TaskPort | None = running_task()
        return found

    def __bool__(self) -> bool:
        return self._get_current_object() is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get_current_object(), name)

    def __repr__(self) -> str:
        return repr(self._get_current_object())


current_app: Any = CurrentApp()
current_task: Any = CurrentTask()
