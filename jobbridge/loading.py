"""Finding the app named by ``-A``, resolved in the order ``celery -A`` resolves it.

``-A`` takes every spelling Celery's ``-A`` takes, and finds the same app:

1. ``module:attr`` is that attribute of that module (``attr`` may be dotted);
2. ``a.b.c`` is attribute ``c`` of module ``a.b`` when it has one (``-A worker.celery``:
   module ``worker``, attribute ``celery``), else module ``a.b.c``;
3. a module found so is searched: its ``bridge``, ``app`` and ``celery`` attributes,
   then, for a package, its ``celery`` submodule searched the same way (``-A proj``
   finds ``proj/celery.py``'s app), then any attribute holding an app (``-A
   make_celery`` finds ``make_celery.celery_app``), then a ``bridge``, ``app`` or
   ``celery`` function returning one.

The object found may be a `JobBridge`, an object with a ``jobbridge_app()`` method
returning one (the Celery facade's app), or a zero-argument callable returning one.
The working directory is put on ``sys.path`` first, so ``-A proj`` finds ``./proj``
as it does with Celery.

In a Django project (Django installed, ``DJANGO_SETTINGS_MODULE`` set, by the
environment or by the module ``-A`` names, as a project's ``celery.py`` does)
``django.setup()`` runs before anything imports a task module, and the app
found runs each attempt with Django's connections looked after
(`jobbridge.integrations.django`).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from types import ModuleType
from typing import Any

import click

from jobbridge.app import JobBridge
from jobbridge.errors import ConfigurationError
from jobbridge.integrations import adopt_django, setup_django

MODULE_ATTRIBUTES = ("bridge", "app", "celery")
#: set in the click context's ``meta`` by ``jobbridge worker -E`` (jobbridge/cli/celery_options.py)
TASK_EVENTS_ASKED = "jobbridge.task_events_asked"
NO_EVENTS = ("{asked}: no Celery events are sent (jobbridge workers publish no task or worker events, so Flower "
             "and `celery events` show nothing); watch queues and workers with `jobbridge status` and "
             "`jobbridge workers`, and react to tasks with the signals (docs/monitoring.md)")
log = logging.getLogger("jobbridge.worker")


class AppNotFound(ConfigurationError):
    """``-A`` named no importable module, or the module holds no app; the message says what was tried."""


def load_app(spec: str) -> JobBridge:
    """The `JobBridge` that ``spec`` (``module:attr``, ``module.attr`` or ``module``) names."""
    spec = spec.strip()
    if not spec or spec.startswith((":", ".")):
        raise AppNotFound(f"-A {spec!r}: give a module, as in -A myapp.jobs:bridge or -A myapp")
    _cwd_on_path()
    setup_django()  # settings named already: the module may import models at its top
    found, where = _locate(spec)
    setup_django()  # or named by the module itself; either way before its tasks are imported
    bridge = _as_bridge(found, where)
    _note_worker_start(found)
    adopt_django(bridge)
    return bridge


def _note_worker_start(found: Any) -> None:
    """One warning line when a worker starts for an app that asks for Celery events (``-E``, the settings).

    Only the command's own process says it: the processes ``--processes N`` starts (``--supervised``)
    load the app too, and other commands taking ``-A`` start no worker.
    """
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.info_name != "worker" or ctx.params.get("supervised") is not None:
        return
    asked = ["-E"] if ctx.meta.get(TASK_EVENTS_ASKED) else []
    hook = getattr(found, "jobbridge_event_settings", None)
    if callable(hook) and not isinstance(found, type):
        asked.extend(str(name) for name in hook())
    if asked:
        log.warning(NO_EVENTS.format(asked=", ".join(asked)))


def _locate(spec: str) -> tuple[Any, str]:
    """The object ``spec`` names, and how to say where it was found."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        return _attribute(_import(module_name, spec), attr, spec), spec
    parent, _, last = spec.rpartition(".")
    if parent:
        module = _import(parent, spec)
        if hasattr(module, last):  # -A worker.celery: module worker, attribute celery
            found = getattr(module, last)
            if not isinstance(found, ModuleType):
                return found, f"{parent}:{last}"
    return _search(_import(spec, spec), spec)


def _search(module: ModuleType, spec: str) -> tuple[Any, str]:
    """The app a module holds, looked for in the order of the module docstring."""
    name = module.__name__
    named = [(n, getattr(module, n, None)) for n in MODULE_ATTRIBUTES]
    named = [(n, f) for n, f in named if f is not None and not isinstance(f, ModuleType)]
    # An app proper first: `app` in a Flask project is the Flask object, callable but no app.
    for attr, candidate in named:
        if _is_app(candidate):
            return candidate, f"{name}:{attr}"
    sub = _import_optional(f"{name}.celery")
    if sub is not None:
        try:
            return _search(sub, spec)
        except AppNotFound:
            pass
    for attr, candidate in vars(module).items():
        if not attr.startswith("_") and _is_app(candidate):
            return candidate, f"{name}:{attr}"
    for attr, candidate in named:
        if callable(candidate) and not isinstance(candidate, type):
            return candidate, f"{name}:{attr}"
    tried = ", ".join(f"{name}:{attr}" for attr in MODULE_ATTRIBUTES)
    raise AppNotFound(
        f"-A {spec}: found no app in module {name!r}; tried {tried}, {name}.celery:app and every attribute of "
        f"{name!r}. Name it explicitly: -A {name}:<attribute>"
    )


def _is_app(found: Any) -> bool:
    """A JobBridge, or an app object (not a class) with a ``jobbridge_app()`` method: the facade's Celery."""
    if isinstance(found, JobBridge):
        return True
    return not isinstance(found, type) and callable(getattr(found, "jobbridge_app", None))


def _cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _import(name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise AppNotFound(
                f"-A {spec}: there is no module named {name!r} (looked in the working directory "
                f"{os.getcwd()} and on sys.path)"
            ) from exc
        raise  # the module exists, and something it imports does not: show that error as it is


def _import_optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None
        raise


def _attribute(module: ModuleType, path: str, spec: str) -> Any:
    found: Any = module
    for part in path.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise AppNotFound(
                f"-A {spec}: module {module.__name__!r} has no attribute {path!r}"
            ) from None
    return found


def _as_bridge(found: Any, where: str) -> JobBridge:
    if isinstance(found, JobBridge):
        return found
    hook = getattr(found, "jobbridge_app", None)
    if callable(hook) and not isinstance(found, type):
        made = hook()
        how = f"{where}.jobbridge_app()"
    elif callable(found):
        made = found()
        how = f"{where}()"
    else:
        raise AppNotFound(
            f"{where} is a {type(found).__name__}, not a JobBridge, an app with a jobbridge_app() method, "
            "or a function returning a JobBridge"
        )
    if not isinstance(made, JobBridge):
        raise AppNotFound(f"{how} returned a {type(made).__name__}, not a JobBridge")
    return made
