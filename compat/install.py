"""``install_as_celery()``: make ``import celery`` (and its usual submodules) the facade, in this process.

After it, unmodified modules run on jobbridge: ``from celery import Celery,
shared_task``, ``celery.signals``, ``celery.exceptions``, ``celery.result``,
``celery.states``, ``celery.schedules``, ``celery.canvas``, ``celery.app.task.Task``,
``celery.utils.log.get_task_logger``, ``celery.utils.time``, ``celery.app.trace``, and, built when first
imported, the modules compat/module_map.py lists (``celery.worker.control``,
``celery.contrib.abortable``, ``celery.contrib.pytest``, ``celery.contrib.testing``).
Any other ``celery.*`` import raises `RefusedModule` naming the module and what to
use instead: a finder at the front of ``sys.meta_path`` answers for every
``celery.*`` name while the facade is installed, and for none otherwise. It refuses
when the real Celery is already imported: two ``celery`` modules in one process
would give two sets of signals, exceptions and tasks, and which one a module saw
would depend on import order.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

from jobbridge.envelope import new_id

from . import app, canvas, exceptions, log, module_map, result, schedules, shared, signals, states, task, timezones
from .exceptions import ImproperlyConfigured
from .module_map import RefusedModule
from .request import Request
from .request import current_task as running_task
from .running import trace_log

MARK = "__jobbridge__"
CELERY_VERSION = "5.4.0"


def _module(name: str, doc: str, *, package: bool = False, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    setattr(module, MARK, True)
    if package:  # its submodules are looked up, so an unknown one reaches the finder's refusal
        module.__path__ = []
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
        "celery", "Celery's API on jobbridge (jobbridge.compat.install_as_celery).", package=True,
        Celery=app.Celery, shared_task=shared.shared_task, Task=task.Task, current_app=shared.current_app,
        current_task=shared.current_task, states=states, signals=signals, exceptions=exceptions,
        result=result, schedules=schedules, canvas=canvas, uuid=_uuid, __version__=CELERY_VERSION,
        VERSION=tuple(int(p) for p in CELERY_VERSION.split(".")), **canvas_names,
    )
    app_task = _module("celery.app.task", "Task", Task=task.Task, Context=Request)
    app_base = _module("celery.app.base", "Celery", Celery=app.Celery)
    # built with the rest: code reads celery.app.trace.LOG_* without importing it, as a Celery worker has
    app_trace = _module("celery.app.trace", trace_log.__doc__ or "trace", **_public(trace_log))
    app_pkg = _module("celery.app", "apps", package=True, Celery=app.Celery, shared_task=shared.shared_task,
                      task=app_task, base=app_base, trace=app_trace, default_app=None,
                      app_or_default=_app_or_default)
    utils_log = _module("celery.utils.log", "logging", **_public(log))
    utils_time = _module("celery.utils.time", timezones.__doc__ or "time", **_public(timezones))
    utils = _module("celery.utils", "utils", package=True, log=utils_log, time=utils_time, uuid=_uuid,
                    gen_unique_id=_uuid, cached_property=functools.cached_property)
    state = _module("celery._state", "the current app and task", get_current_app=shared.get_current_app,
                    get_current_task=running_task, current_app=shared.current_app,
                    current_task=shared.current_task, app_or_default=_app_or_default)
    modules = {
        "celery": top, "celery.app": app_pkg, "celery.app.task": app_task, "celery.app.base": app_base,
        "celery.app.trace": app_trace,
        "celery.utils": utils, "celery.utils.log": utils_log, "celery.utils.time": utils_time,
        "celery._state": state,
    }
    for name in module_map.PACKAGES:
        modules[name] = _module(name, f"{name} (jobbridge's Celery facade)", package=True)
    for name, source in (("signals", signals), ("exceptions", exceptions), ("result", result),
                         ("states", states), ("schedules", schedules), ("canvas", canvas)):
        modules[f"celery.{name}"] = _module(f"celery.{name}", source.__doc__ or name, **_public(source))
    for name, module in modules.items():  # each module is an attribute of its package, as after an import
        parent, _, child = name.rpartition(".")
        if parent in modules:
            setattr(modules[parent], child, module)
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
    if not any(isinstance(f, FacadeFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, FacadeFinder())


def uninstall() -> None:
    """Remove the facade's ``celery`` modules and its finder (tests)."""
    for name in [n for n in sys.modules if n == "celery" or n.startswith("celery.")]:
        if getattr(sys.modules[name], MARK, False):
            del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, FacadeFinder)]


def _installed() -> bool:
    return bool(getattr(sys.modules.get("celery"), MARK, False))


class FacadeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every ``celery.*`` import while the facade is installed: a module it provides, or a refusal."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("celery.") or not _installed():
            return None  # the real Celery (or no celery at all) is none of the facade's business
        if fullname not in module_map.PROVIDED:
            raise RefusedModule(fullname)
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        source = importlib.import_module(f"{__package__}.{module_map.PROVIDED[spec.name]}")
        return _module(spec.name, source.__doc__ or spec.name, **_public(source))

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: `create_module` filled it from the facade module."""
