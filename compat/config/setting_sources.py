"""A configuration source handed to ``config_from_object``, read when a setting is used, as Celery reads it.

Celery keeps the object (a module, a class, Django's ``settings``, or the dotted path of
one) and looks a setting up in it at each read. So the facade does the same:

- nothing is imported or read at ``config_from_object``: a Django project's
  ``proj/celery.py`` runs while its settings module is being imported, and a setting
  the facade refuses must not make that import (every ``manage.py`` command) fail;
- each read looks the object up again, so a setting changed at run time is seen
  (Django's ``override_settings(CELERY_TASK_ALWAYS_EAGER=True)``, pytest-django's
  ``settings`` fixture);
- only the names that are the app's are read (with a namespace, those starting with
  it), never every name ``dir()`` lists: ``settings.configure()`` lists names that
  raise AttributeError when read.

Where a setting is looked up: with a namespace (``CELERY``), ``CELERY_TASK_ALWAYS_EAGER``,
which wins over a value the code set (Celery looks the prefixed name up first, in
every layer); without one, the new name, the old name, then the ``CELERY_``-prefixed
new name (which Celery reads only with the namespace), each below a value the code set.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from jobbridge.redaction import quoted

from ..exceptions import RefusedFeature
from .setting_table import NEW_NAMES, OLD_NAMES, RULES

#: the settings Celery reads from the environment first (an empty variable is no override)
FROM_ENVIRONMENT = {"broker_url": "CELERY_BROKER_URL", "result_backend": "CELERY_RESULT_BACKEND"}
_CELERY_LOOKING = ("CELERY", "BROKER_")
_OLD_PREFIXES = ("CELERYD_", "CELERYBEAT_", "BROKER_")
_MISSING = object()


def prefix_of(namespace: str) -> str:
    return namespace.rstrip("_").upper() + "_"


class Source:
    """One ``config_from_object`` argument: imported on first use, then read at each lookup."""

    def __init__(self, obj: Any, namespace: str | None, silent: bool = False) -> None:
        self.given = obj
        self.namespace = namespace or None
        self.silent = silent
        self._object: Any = _MISSING

    def __repr__(self) -> str:
        return f"<settings source {self.given!r}{f' namespace={self.namespace!r}' if self.namespace else ''}>"

    @property
    def object(self) -> Any:
        """The source itself (None when a ``silent`` one cannot be imported)."""
        if self._object is _MISSING:
            try:
                if isinstance(self.given, str):
                    _cwd_on_path()  # config_from_object("celeryconfig") beside the project, as Celery imports it
                self._object = load_object(self.given)
            except (ImportError, AttributeError):
                if not self.silent:
                    raise
                self._object = None
        return self._object

    def keys_for(self, name: str) -> tuple[str, ...]:
        """The names ``name`` is looked up under in this source, first first."""
        if self.namespace:
            return (prefix_of(self.namespace) + name.upper(),)
        return (name, NEW_NAMES[name], f"CELERY_{name.upper()}")

    def lookup(self, name: str) -> tuple[str, Any] | None:
        """The key and value the source holds for setting ``name``, read now; None when it holds none."""
        obj = self.object
        if obj is None:
            return None
        for key in self.keys_for(name):
            value = read(obj, key)
            if value is not _MISSING:
                return key, value
        return None

    def entries(self) -> Iterator[tuple[str, Any]]:
        """Every name of the source that may be a setting of the app, with its value, read now.

        A name that cannot be read (``dir()`` lists it, ``getattr`` raises AttributeError) is
        not a setting; without a namespace, a module's imports and helpers are skipped.
        """
        obj = self.object
        if obj is None:
            return
        names = [str(k) for k in obj] if isinstance(obj, Mapping) else dir(obj)
        for key in names:
            if not self._may_be_setting(key):
                continue
            value = read(obj, key)
            if value is _MISSING:
                continue
            if self.namespace is None and is_code(value) and key not in RULES and key not in OLD_NAMES:
                continue
            yield key, value

    def _may_be_setting(self, key: str) -> bool:
        if key.startswith("_"):
            return False
        if self.namespace:  # the app's names, and old names written without it (an error that says so)
            return key.upper().startswith(prefix_of(self.namespace)) or key in OLD_NAMES or (
                key.startswith(_OLD_PREFIXES))
        return key in RULES or key in OLD_NAMES or key.islower() or key.upper().startswith(_CELERY_LOOKING)


def environment_value(name: str) -> str | None:
    """The environment's value of broker_url or result_backend (Celery reads them there first)."""
    variable = FROM_ENVIRONMENT.get(name)
    return (os.environ.get(variable) or None) if variable else None


def refuse_a_second_broker(broker_url: Any) -> None:
    """CELERY_BROKER_READ_URL / CELERY_BROKER_WRITE_URL naming another broker than broker_url: refused."""
    for variable, does in (("CELERY_BROKER_READ_URL", "consume from"), ("CELERY_BROKER_WRITE_URL", "publish to")):
        value = os.environ.get(variable)
        if value and value != broker_url:
            raise RefusedFeature(
                f"the environment variable {variable} = {quoted(value, 'broker_url')} is refused: Celery would "
                f"{does} a second broker, and a jobbridge app reads and writes one store, named by broker_url. "
                f"Unset {variable}, and name the store in CELERY_BROKER_URL or broker_url")


def read(obj: Any, key: str) -> Any:
    """``obj``'s ``key`` (an item of a mapping, else an attribute), or `_MISSING`."""
    if isinstance(obj, Mapping):
        return obj.get(key, _MISSING)
    try:
        return getattr(obj, key)
    except AttributeError:
        return _MISSING


def is_code(value: Any) -> bool:
    """A module's imports and helpers (modules, classes, functions): never settings by mistake."""
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)


def _cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def load_object(obj: Any) -> Any:
    """``"pkg.module"``, ``"pkg.module:attr"`` or ``"pkg.module.attr"`` as the object it names."""
    if not isinstance(obj, str):
        return obj
    if ":" in obj:
        module, attr = obj.split(":", 1)
        return getattr(importlib.import_module(module), attr)
    try:
        return importlib.import_module(obj)
    except ModuleNotFoundError as exc:
        module, _, attr = obj.rpartition(".")
        if not module or exc.name != obj:
            raise
        return getattr(importlib.import_module(module), attr)


__all__ = ["FROM_ENVIRONMENT", "Source", "environment_value", "is_code", "load_object", "prefix_of", "read",
           "refuse_a_second_broker"]
