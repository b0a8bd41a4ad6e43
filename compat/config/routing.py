"""Which queue a task goes to: the call's queue, the task's, ``task_routes``, then the default queue.

As in Celery, an explicit ``apply_async(queue=...)`` wins, then a ``queue`` set on
the task, then the first route in ``task_routes`` that answers (a dict by exact
name, glob or compiled regex; a list of such dicts; a router function
``(name, args, kwargs, options, task=...)``; or a dotted path to one), then
``task_default_queue``. A route (or a call) naming an ``exchange`` and a
``routing_key`` rather than a queue reaches the queue ``task_queues`` binds with
them, as RabbitMQ would route it (compat/config/bindings.py); a ``priority`` is
refused.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..exceptions import ImproperlyConfigured, RefusedFeature
from ..ports import AppPort, TaskPort
from . import bindings
from .settings import check_queue, load_object

Router = Callable[..., Any]


def _map_router(table: Mapping[Any, Any] | Sequence[tuple[Any, Any]]) -> Router:
    items = list(table.items()) if isinstance(table, Mapping) else list(table)
    exact: dict[str, Any] = {}
    patterns: list[tuple[re.Pattern[str], Any]] = []
    for key, route in items:
        if isinstance(key, re.Pattern):
            patterns.append((key, route))
        elif "*" in key:
            patterns.append((re.compile(fnmatch.translate(key)), route))
        else:
            exact[key] = route

    def by_name(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in exact:
            return exact[name]
        for pattern, found in patterns:
            if pattern.match(name):
                return found
        return None

    return by_name


def routers(setting: Any) -> list[Router]:
    """``task_routes`` as a list of routers, tried in order."""
    if setting is None:
        return []
    entries = setting if isinstance(setting, list | tuple) else [setting]
    out: list[Router] = []
    for entry in entries:
        if isinstance(entry, Mapping):
            out.append(_map_router(entry))
        elif isinstance(entry, list | tuple):
            out.append(_map_router(list(entry)))
        elif isinstance(entry, str):
            out.append(_legacy(load_object(entry)))
        elif callable(entry) or hasattr(entry, "route_for_task"):
            out.append(_legacy(entry))
        else:
            raise ImproperlyConfigured(f"task_routes entry {entry!r} is not a dict, a list or a router")
    return out


def _legacy(router: Any) -> Router:
    if isinstance(router, type) and hasattr(router, "route_for_task"):
        router = router()
    if hasattr(router, "route_for_task"):
        old = router

        def by_method(name: str, args: Any, kwargs: Any, options: Any, task: Any = None) -> Any:
            return old.route_for_task(name, args, kwargs)

        return by_method
    if not callable(router):
        raise ImproperlyConfigured(f"task_routes entry {router!r} is not a router")
    fn: Router = router
    return fn


def _route_of(route: Any) -> dict[str, Any] | None:
    """A router's answer as ``{queue, exchange, routing_key}`` (None: this router has no route)."""
    if route is None:
        return None
    if isinstance(route, str):
        return {"queue": route}
    if isinstance(route, Mapping):
        if route.get("priority") is not None:
            raise RefusedFeature(f"the route {dict(route)!r} sets a priority: jobbridge orders work by queue, "
                                 "not by message priority; route urgent tasks to a queue of their own")
        return {key: route[key] for key in ("queue", "exchange", "routing_key") if route.get(key) is not None}
    raise ImproperlyConfigured(f"a router returned {route!r}; a route is a queue name or a dict with 'queue'")


def queue_for(app: AppPort, name: str, task: TaskPort | None, args: Sequence[Any], kwargs: Mapping[str, Any],
              options: Mapping[str, Any]) -> str:
    """The queue a call goes to; a queue missing from task_queues is refused when create_missing is off.

    The call's ``queue`` wins, then the task's, then the first route; a call or route that names
    an ``exchange`` and ``routing_key`` instead goes to the queue ``task_queues`` binds with them
    (`bindings.queue_for_key`), as RabbitMQ would route it; a ``routing_key`` alone is read on the
    default exchange.
    """
    route: dict[str, Any] = {key: options[key] for key in ("queue", "routing_key") if options.get(key)}
    if route and options.get("exchange") is not None:
        route["exchange"] = options["exchange"]  # "" too: the default exchange, which routes by queue name
    if "queue" not in route and task is not None and getattr(task, "queue", None):
        route = {"queue": task.queue}
    if not route:
        for router in routers(app.conf["task_routes"]):
            found = _route_of(router(name, args, kwargs, dict(options), task=task))
            if found:
                route = found
                break
    queue = route.get("queue")
    if queue is None and route.get("routing_key"):
        if app.conf["task_queues"]:
            queue = bindings.queue_for_key(app.conf, route.get("exchange"), str(route["routing_key"]), name)
        else:
            queue = route["routing_key"]  # no bindings declared: a direct exchange delivers to the queue of that name
    name_of_queue = str(getattr(queue, "name", queue)) if queue is not None else app.conf["task_default_queue"]
    check_queue(app.conf, name_of_queue)
    return name_of_queue
