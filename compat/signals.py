"""Celery's signals by name, stored in blinker, called the way Celery calls them.

A receiver written for Celery runs unchanged: it is called with keyword
arguments only, ``receiver(signal=..., sender=..., **named)``; ``connect``
works bare, as a decorator, and as ``@sig.connect(sender=...)``; a string
sender (a task name) matches by value; ``dispatch_uid`` connects once. A
receiver that raises is logged and the rest still run, so a broken receiver
never breaks a worker or a publish.

Signals the facade cannot fire (no eventlet pool, no heartbeat events)
refuse ``connect`` with the reason, instead of never calling the receiver.
``beat_init`` / ``beat_embedded_init`` fire when a scheduler starts, alone or
inside a worker (compat/running/beat.py). ``setup_logging``: connecting a
receiver tells jobbridge's CLI not to configure logging itself
(`logging_is_configured_by_app`), as in Celery.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from blinker import ANY, NamedSignal, Namespace

from .exceptions import RefusedFeature

log = logging.getLogger("jobbridge.compat.signals")
_namespace = Namespace()
F = TypeVar("F", bound=Callable[..., Any])


class Signal:
    """One Celery signal; its receivers and their sender filters are kept by a blinker signal."""

    def __init__(self, name: str, providing_args: set[str] | None = None, *, refused: str = "",
                 propagate: bool = False) -> None:
        self.name = name
        self.propagate = propagate  # the app's own signals: a receiver's error is the caller's
        self.providing_args = frozenset(providing_args or ())
        self.refused = refused
        self._store: NamedSignal = _namespace.signal(f"celery.{name}")
        self._uids: dict[tuple[Any, Any], Callable[..., Any]] = {}

    def __repr__(self) -> str:
        return f"<Signal: {self.name}>"

    def connect(self, receiver: Any = None, /, *, sender: Any = None, weak: bool = True,
                dispatch_uid: Any = None, **_: Any) -> Any:
        """Connect ``receiver`` (or, without one, return a decorator that does)."""
        if self.refused:
            raise RefusedFeature(f"celery.signals.{self.name} is not available on jobbridge: {self.refused}")

        def attach(fn: F) -> F:
            key = (dispatch_uid, _sender_key(sender))
            if dispatch_uid is not None:
                if key in self._uids:
                    return fn
                self._uids[key] = fn
            self._store.connect(fn, sender=ANY if sender is None else sender, weak=weak)
            return fn

        return attach if receiver is None else attach(receiver)

    def disconnect(self, receiver: Callable[..., Any] | None = None, sender: Any = None,
                   dispatch_uid: Any = None) -> bool:
        """Disconnect a receiver (by itself, or by the ``dispatch_uid`` it was connected with)."""
        if dispatch_uid is not None:
            receiver = self._uids.pop((dispatch_uid, _sender_key(sender)), None)
        if receiver is None:
            return False
        before = len(self._store.receivers)
        self._store.disconnect(receiver, sender=ANY if sender is None else sender)
        return len(self._store.receivers) < before

    @property
    def receivers(self) -> list[Callable[..., Any]]:
        return [r for r in (ref() if callable(ref) and _is_ref(ref) else ref
                            for ref in self._store.receivers.values()) if r is not None]

    def has_listeners(self, sender: Any = None) -> bool:
        return bool(self._store.receivers) if sender is None else self._store.has_receivers_for(sender)

    def send(self, sender: Any, **named: Any) -> list[tuple[Callable[..., Any], Any]]:
        """Call every receiver for ``sender``; one that raises is logged, and its exception returned."""
        if not self._store.receivers:
            return []
        targets = list(self._store.receivers_for(ANY if sender is None else sender))
        responses: list[tuple[Callable[..., Any], Any]] = []
        for receiver in targets:
            try:
                responses.append((receiver, receiver(signal=self, sender=sender, **named)))
            except Exception as exc:
                if self.propagate:
                    raise
                log.exception("a receiver of celery signal %s raised; the rest still run", self.name)
                responses.append((receiver, exc))
        return responses

    send_robust = send


def _sender_key(sender: Any) -> Any:
    return sender if sender is None or isinstance(sender, str | int) else id(sender)


def _is_ref(value: Any) -> bool:
    return isinstance(value, weakref.ref)


# -- publishing ---------------------------------------------------------------------------------
before_task_publish = Signal("before_task_publish", {"body", "exchange", "routing_key", "headers",
                                                     "properties", "declare", "retry_policy"})
after_task_publish = Signal("after_task_publish", {"body", "exchange", "routing_key", "headers"})
task_sent = Signal("task_sent", {"task_id", "task", "args", "kwargs", "eta", "taskset"})

# -- running a task -----------------------------------------------------------------------------
task_received = Signal("task_received", {"request"})
task_prerun = Signal("task_prerun", {"task_id", "task", "args", "kwargs"})
task_postrun = Signal("task_postrun", {"task_id", "task", "args", "kwargs", "retval", "state"})
task_success = Signal("task_success", {"result", "runtime"})
task_retry = Signal("task_retry", {"request", "reason", "einfo"})
task_failure = Signal("task_failure", {"task_id", "exception", "args", "kwargs", "traceback", "einfo"})
task_internal_error = Signal("task_internal_error",
                             {"task_id", "args", "kwargs", "request", "exception", "traceback", "einfo"})
task_revoked = Signal("task_revoked", {"request", "terminated", "signum", "expired"})
task_rejected = Signal("task_rejected", {"message", "exc"})
task_unknown = Signal("task_unknown", {"message", "exc", "name", "id"})

# -- the worker ---------------------------------------------------------------------------------
celeryd_init = Signal("celeryd_init", {"instance", "conf", "options"})
celeryd_after_setup = Signal("celeryd_after_setup", {"instance", "conf"})
import_modules = Signal("import_modules")
worker_init = Signal("worker_init")
worker_process_init = Signal("worker_process_init")
worker_process_shutdown = Signal("worker_process_shutdown", {"pid", "exitcode"})
worker_ready = Signal("worker_ready")
worker_shutting_down = Signal("worker_shutting_down", {"sig", "how", "exitcode"})
worker_shutdown = Signal("worker_shutdown")

# -- logging ------------------------------------------------------------------------------------
setup_logging = Signal("setup_logging", {"loglevel", "logfile", "format", "colorize"})
after_setup_logger = Signal("after_setup_logger", {"logger", "loglevel", "logfile", "format", "colorize"})
after_setup_task_logger = Signal("after_setup_task_logger",
                                 {"logger", "loglevel", "logfile", "format", "colorize"})

# -- the scheduler (compat/running/beat.py): when one starts, alone or inside a worker (-B) -------
beat_init = Signal("beat_init")
beat_embedded_init = Signal("beat_embedded_init")

# -- what the facade cannot fire: connecting is refused, with the reason -----------------------
heartbeat_sent = Signal("heartbeat_sent", refused="jobbridge workers send no Celery event heartbeats; a "
                        "running job's reservation is renewed by the worker itself")
worker_before_create_process = Signal(
    "worker_before_create_process",
    refused="jobbridge creates its worker processes itself; connect worker_process_init, which runs in each")
user_preload_options = Signal("user_preload_options", refused="the jobbridge CLI takes no user options")
_NO_EVENTLET = "jobbridge has no eventlet pool: sync tasks run in threads, async ones on an event loop"
eventlet_pool_started = Signal("eventlet_pool_started", refused=_NO_EVENTLET)
eventlet_pool_preshutdown = Signal("eventlet_pool_preshutdown", refused=_NO_EVENTLET)
eventlet_pool_postshutdown = Signal("eventlet_pool_postshutdown", refused=_NO_EVENTLET)
eventlet_pool_apply = Signal("eventlet_pool_apply", {"target", "args", "kwargs"}, refused=_NO_EVENTLET)


def logging_is_configured_by_app() -> bool:
    """True when the app connected ``setup_logging``: jobbridge then leaves logging alone, as Celery does."""
    return setup_logging.has_listeners()


def configure_logging(loglevel: int | str, logfile: str | None = None, format: str | None = None,
                      colorize: bool = False) -> bool:
    """Let the app configure logging: send ``setup_logging`` when connected; True when it was."""
    if not logging_is_configured_by_app():
        return False
    setup_logging.send(sender=None, loglevel=loglevel, logfile=logfile, format=format, colorize=colorize)
    return True


__all__ = [
    "Signal", "after_setup_logger", "after_setup_task_logger", "after_task_publish", "beat_embedded_init",
    "beat_init", "before_task_publish", "celeryd_after_setup", "celeryd_init", "configure_logging",
    "eventlet_pool_apply", "eventlet_pool_postshutdown", "eventlet_pool_preshutdown", "eventlet_pool_started",
    "heartbeat_sent", "import_modules", "logging_is_configured_by_app", "setup_logging", "task_failure",
    "task_internal_error", "task_postrun", "task_prerun", "task_received", "task_rejected", "task_retry",
    "task_revoked", "task_sent", "task_success", "task_unknown", "user_preload_options",
    "worker_before_create_process", "worker_init", "worker_process_init", "worker_process_shutdown",
    "worker_ready", "worker_shutdown", "worker_shutting_down",
]
