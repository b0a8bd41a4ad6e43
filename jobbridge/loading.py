"""Finding the app named by ``-A``: ``module:attr`` or ``module``, as ``celery -A`` does.

For a bare ``module`` the attributes ``bridge``, ``app`` and ``celery`` are
tried, then the module ``module.celery`` and its ``app`` (the layout Celery's
documentation recommends). The object found may be a `JobBridge`, an object
with a ``jobbridge_app()`` method returning one (the Celery facade's app), or
a zero-argument callable returning one. The working directory is put on
``sys.path`` first, so ``-A proj`` finds ``./proj`` as it does with Celery.

In a Django project (Django installed, ``DJANGO_SETTINGS_MODULE`` set, by the
environment or by the module ``-A`` names, as a project's ``celery.py`` does)
``django.setup()`` runs before anything imports a task module, and the app
found runs each attempt with Django's connections looked after
(`jobbridge.integrations.django`).
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

from jobbridge.app import JobBridge
from jobbridge.errors import ConfigurationError
from jobbridge.integrations import adopt_django, setup_django

MODULE_ATTRIBUTES = ("bridge", "app", "celery")


class AppNotFound(ConfigurationError):
    """``-A`` named no importable module, or the module holds no app; the message says what was tried."""


def load_app(spec: str) -> JobBridge:
    """The `JobBridge` that ``spec`` (``module:attr`` or ``module``) names."""
    spec = spec.strip()
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise AppNotFound(f"-A {spec!r}: give a module, as in -A myapp.jobs:bridge or -A myapp")
    _cwd_on_path()
    setup_django()  # settings named already: the module may import models at its top
    module = _import(module_name, spec)
    setup_django()  # or named by the module itself; either way before its tasks are imported
    bridge = _find(module, module_name, attr, spec)
    adopt_django(bridge)
    return bridge


def _find(module: ModuleType, module_name: str, attr: str, spec: str) -> JobBridge:
    if attr:
        return _as_bridge(_attribute(module, attr, spec), f"{module_name}:{attr}")
    tried = [f"{module_name}:{name}" for name in MODULE_ATTRIBUTES]
    found = [(n, getattr(module, n, None)) for n in MODULE_ATTRIBUTES]
    found = [(n, f) for n, f in found if f is not None and not isinstance(f, ModuleType)]
    # An app proper first: `app` in a Flask project is the Flask object, callable but no JobBridge.
    for name, candidate in found:
        if _is_app(candidate):
            return _as_bridge(candidate, f"{module_name}:{name}")
    celery_module = f"{module_name}.celery"
    tried.append(f"{celery_module}:app")
    sub = _import_optional(celery_module)
    if sub is not None and getattr(sub, "app", None) is not None:
        return _as_bridge(sub.app, f"{celery_module}:app")
    for name, candidate in found:
        if callable(candidate):
            return _as_bridge(candidate, f"{module_name}:{name}")
    raise AppNotFound(
        f"-A {spec}: found no app in module {module_name!r}; tried {', '.join(tried)}. "
        f"Name it explicitly: -A {module_name}:<attribute>"
    )


def _is_app(found: Any) -> bool:
    return isinstance(found, JobBridge) or callable(getattr(found, "jobbridge_app", None))


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
    if callable(hook):
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
