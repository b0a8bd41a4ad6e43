"""``@app.task(pydantic=True)``: arguments annotated with a pydantic model arrive as that model.

A message carries JSON, so a task declared ``def handle(order: Order) -> Receipt``
is called with a dict. With ``pydantic=True`` the facade does what Celery does
with it: each argument annotated with a ``BaseModel`` subclass (or an optional
one, when not None) is validated into that model before the task runs, with
``pydantic_strict`` and ``pydantic_context`` (plus ``celery_app`` and
``celery_task_name``); a returned model that is an instance of the return
annotation is dumped to JSON values (``model_dump(mode='json')``, with
``pydantic_dump_kwargs``), so the result store keeps JSON. pydantic is imported
only when a task asks for this, so a project without it never needs it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .exceptions import ImproperlyConfigured


def _model_of(annotation: Any, base: type) -> type | None:
    """The model class ``annotation`` names: itself, or the one non-None member of an optional union."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, base) else None


def wrap(app: Any, fun: Callable[..., Any], name: str, options: dict[str, Any]) -> Callable[..., Any]:
    """``fun`` itself, or with ``pydantic=True`` in ``options`` (taken out of them) wrapped by `validating`."""
    if not options.pop("pydantic", False):
        return fun
    return validating(app, fun, name, options.pop("pydantic_strict", False), options.pop("pydantic_context", None),
                      options.pop("pydantic_dump_kwargs", None))


def validating(app: Any, fun: Callable[..., Any], name: str, strict: bool = False,
               context: Mapping[str, Any] | None = None,
               dump_kwargs: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """``fun`` with its model arguments validated and its model result dumped, as Celery's pydantic option."""
    try:
        base = importlib.import_module("pydantic").BaseModel
    except ModuleNotFoundError as exc:
        raise ImproperlyConfigured(f"task {name}: pydantic=True needs pydantic installed "
                                   "(pip install 'jobbridge[pydantic]')") from exc
    signature = inspect.signature(fun)
    hints = typing.get_type_hints(fun) if getattr(fun, "__annotations__", None) else {}
    validation = {**(context or {}), "celery_app": app, "celery_task_name": name}
    dumping = {"mode": "json", **(dump_kwargs or {})}
    returned = _model_of(hints.get("return"), base)

    @functools.wraps(fun)
    def validated(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        for arg, value in bound.arguments.items():
            model = _model_of(hints.get(arg), base)
            if model is not None and value is not None:
                bound.arguments[arg] = model.model_validate(value, strict=strict,  # type: ignore[attr-defined]
                                                            context=validation)
        result = fun(*bound.args, **bound.kwargs)
        if returned is not None and isinstance(result, returned):
            return result.model_dump(**dumping)  # type: ignore[attr-defined]
        return result

    return validated


__all__ = ["validating", "wrap"]
