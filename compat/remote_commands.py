"""``celery.worker.control``: task modules that register remote-control commands still import.

A Celery worker takes broadcast commands (``app.control.broadcast("name")``,
``app.control.inspect().name()``), and a task module may add its own with
``@Panel.register``, ``@control_command(...)`` or ``@inspect_command(...)``. jobbridge's
workers take no broadcast commands (``app.control`` refuses them, saying what to use
instead), but refusing the decorators would make the whole task module fail to
import over a feature it may never use. So the decorators register the function in
`Panel` (``Panel.data``, ``Panel.meta``) and return it unchanged, as Celery's do.
Celery's own commands (``revoke``, ``ping``, ``shutdown``, ...) can be imported,
and calling one raises `RefusedFeature` saying what to write instead: code that
calls ``revoke(task_id)`` from this module means ``app.control.revoke(task_id)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .exceptions import RefusedFeature


class controller_info_t(NamedTuple):
    """What Celery records about a registered command."""

    alias: str | None
    type: str
    visible: bool
    default_timeout: float
    help: str | None
    signature: str | None
    args: Any
    variadic: str | None


class Panel:
    """The registered commands, by name; nothing sends them on jobbridge (docs/compat.md, Modules)."""

    data: dict[str, Callable[..., Any]] = {}
    meta: dict[str, controller_info_t] = {}

    @classmethod
    def register(cls, *args: Any, **kwargs: Any) -> Any:
        """``@Panel.register`` or ``@Panel.register(name=..., type=...)``: record the command, return it."""
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return cls._register(**kwargs)(args[0])
        if args:
            raise TypeError("Panel.register takes the function alone, or keyword options only")
        return cls._register(**kwargs)

    @classmethod
    def _register(cls, type: str = "control", name: str | None = None, alias: str | None = None,
                  visible: bool = True, default_timeout: float = 1.0, help: str | None = None,
                  signature: str | None = None, args: Any = None,
                  variadic: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def record(fun: Callable[..., Any]) -> Callable[..., Any]:
            key = name or fun.__name__
            cls.data[key] = fun
            cls.meta[key] = controller_info_t(alias, type, visible, default_timeout, help or fun.__doc__,
                                              signature, args, variadic)
            if alias:
                cls.data[alias] = fun
            return fun

        return record


def control_command(**kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@control_command(...)``: register a control command (recorded; no worker takes it)."""
    return Panel.register(type="control", **kwargs)  # type: ignore[no-any-return]


def inspect_command(**kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@inspect_command(...)``: register an inspect command (recorded; no worker takes it)."""
    return Panel.register(type="inspect", **kwargs)  # type: ignore[no-any-return]


_INSTEAD = {
    "revoke": "call app.control.revoke(task_id) or AsyncResult(task_id).revoke(): the revoke is kept in the "
              "result store, where every worker reads it",
    "terminate": "call app.control.terminate(task_id) (revoke with terminate=True)",
}
_NO_REMOTE = "watch workers with jobbridge status; stop one with SIGTERM"
#: Celery's built-in commands that task modules import by name
BUILTIN_COMMANDS = ("revoke", "terminate", "revoke_by_stamped_headers", "report", "enable_events",
                    "disable_events", "heartbeat", "rate_limit", "time_limit", "query_task", "election",
                    "hello", "ping", "stats", "objgraph", "memsample", "memdump", "pool_grow", "pool_shrink",
                    "pool_restart", "autoscale", "shutdown", "add_consumer", "cancel_consumer",
                    "active_queues", "scheduled", "reserved", "active", "revoked", "registered", "conf",
                    "dump_tasks", "clock")


def _refused_command(name: str) -> Callable[..., Any]:
    def command(*args: Any, **kwargs: Any) -> Any:
        raise RefusedFeature(f"celery.worker.control.{name} is a command a Celery worker runs when it is "
                             f"broadcast; jobbridge's workers take no broadcast commands: "
                             f"{_INSTEAD.get(name, _NO_REMOTE)}")

    command.__name__ = command.__qualname__ = name
    return command


globals().update({name: _refused_command(name) for name in BUILTIN_COMMANDS})

__all__ = ["BUILTIN_COMMANDS", "Panel", "control_command", "controller_info_t", "inspect_command",
           *BUILTIN_COMMANDS]
