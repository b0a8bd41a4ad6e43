"""``install_as_celery()``: make ``import celery`` (and its usual submodules) the facade, in this process.

After it, unmodified modules run on jobbridge: ``from celery import Celery,
shared_task``, ``celery.signals``, ``celery.exceptions``, ``celery.result``,
``celery.states``, ``celery.schedules``, ``celery.canvas``, ``celery.app.task.Task``,
``celery.utils.log.get_task_logger``. It refuses when the real Celery is already
imported: two ``celery`` modules in one process would give two sets of signals,
exceptions and tasks, and which one a module saw would depend on import order.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from jobbridge.envelope import new_id

from . import app, canvas, exceptions, log, result, schedules, shared, signals, states, task
from .exceptions import ImproperlyConfigured
from .request import Request

MARK = "__jobbridge__"
CELERY_VERSION = "5.4.0"


def _module(name: str, doc: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    setattr(module, MARK, True)
    module.__dict__.update(attrs)
    return module


def _public(module: types.ModuleType) -> dict[str, Any]:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return {name: getattr(module, name) for name in names}


def build() -> dict[str, types.ModuleType]:
    """The ``celery`` modules, by name, as facade modules."""
    canvas_names = {n: getattr(canvas, n) for n in ("Signature", "signature", "subtask", "chain", "group",
                                                    "chord", "chunks", "xmap", "xstarmap", "maybe_signature")}
    top = _module(
        "celery", "Celery's API on jobbridge (jobbridge.compat.install_as_celery).",
        Celery=app.Celery, shared_task=shared.shared_task, Task=task.Task, current_app=shared.current_app,
        current_task=shared.current_task, states=states, signals=signals, exceptions=exceptions,
        result=result, schedules=schedules, canvas=canvas, uuid=_uuid, __version__=CELERY_VERSION,
        VERSION=tuple(int(p) for p in CELERY_VERSION.split(".")), **canvas_names,
    )
    app_task = _module("celery.app.task", "Task", Task=task.Task, Context=Request)
    app_base = _module("celery.app.base", "Celery", Celery=app.Celery)
    app_pkg = _module("celery.app", "apps", Celery=app.Celery, shared_task=shared.shared_task,
                      task=app_task, base=app_base, default_app=None, app_or_default=_app_or_default)
    utils_log = _module("celery.utils.log", "logging", **_public(log))
    utils = _module("celery.utils", "utils", log=utils_log, uuid=_uuid, gen_unique_id=_uuid)
    modules = {
        "celery": top, "celery.app": app_pkg, "celery.app.task": app_task, "celery.app.base": app_base,
        "celery.utils": utils, "celery.utils.log": utils_log,
    }
    for name, source in (("signals", signals), ("exceptions", exceptions), ("result", result),
                         ("states", states), ("schedules", schedules), ("canvas", canvas)):
        modules[f"celery.{name}"] = _module(f"celery.{name}", source.__doc__ or name, **_public(source))
        setattr(top, name, modules[f"celery.{name}"])
    return modules


def _uuid() -> str:
    return new_id()


def _app_or_default(app: Any = None) -> Any:
    return app if app is not None else shared.get_current_app()


def install_as_celery() -> None:
    """Put the facade in ``sys.modules`` as ``celery``; refused if the real Celery is already imported."""
    found = sys.modules.get("celery")
    if found is not None:
        if getattr(found, MARK, False):
            return
        raise ImproperlyConfigured(
            "install_as_celery() is refused: the real Celery is already imported "
            f"({getattr(found, '__file__', found)!r}). Call it before anything imports celery (first thing in "
            "your settings or entry module), or change the imports to jobbridge.compat")
    sys.modules.update(build())


def uninstall() -> None:
    """Remove the facade's ``celery`` modules (tests)."""
    for name in [n for n in sys.modules if n == "celery" or n.startswith("celery.")]:
        if getattr(sys.modules[name], MARK, False):
            del sys.modules[name]
