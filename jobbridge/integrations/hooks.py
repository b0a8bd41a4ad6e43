"""Where telemetry attaches: around every attempt (`Executor.run`) and every push (`JobBridge.push`).

OpenTelemetry, Sentry and Prometheus each need to wrap the same two moments:
an attempt, on the thread that runs it, from before the job is looked up to
its outcome; and a push, before the envelopes reach the store (so that trace
headers can still be added to them). The blinker signals tell *that* something
happened; these hooks also run *around* it, which a span or a Sentry scope
needs. Each integration registers a hook here, and this module wraps the two
methods once, whatever the number of hooks, and puts them back when the last
hook is removed. Nothing in the worker's loop knows about it.

An attempt hook is ``hook(executor, reservation, run) -> Outcome``: it must
call ``run()`` once and return its outcome. A push hook is ``hook(bridge,
envelopes, connection, push) -> ids``: it may hand ``push`` changed envelopes
(the same ids, in the same order). A hook that raises before it calls on is
logged and skipped, so telemetry that breaks never stops a job.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from jobbridge.app import JobBridge
from jobbridge.envelope import Envelope, Reservation
from jobbridge.execution import Executor
from jobbridge.outcome import Outcome

log = logging.getLogger("jobbridge.integrations")

RunAttempt = Callable[[], Outcome]
AttemptHook = Callable[[Executor, Reservation, RunAttempt], Outcome]
PushNext = Callable[[Sequence[Envelope]], list[str | None]]
PushHook = Callable[[JobBridge, Sequence[Envelope], str, PushNext], list[str | None]]

_lock = threading.Lock()
_attempt_hooks: tuple[AttemptHook, ...] = ()
_push_hooks: tuple[PushHook, ...] = ()
_original_run: Any = None
_original_push: Any = None


def add_attempt_hook(hook: AttemptHook) -> None:
    """Run ``hook`` around every attempt in this process (added once however often it is given)."""
    global _attempt_hooks, _original_run
    with _lock:
        if hook in _attempt_hooks:
            return
        if _original_run is None:
            _original_run = Executor.run
            Executor.run = _run  # type: ignore[method-assign,assignment]
        _attempt_hooks = (*_attempt_hooks, hook)


def remove_attempt_hook(hook: AttemptHook) -> None:
    global _attempt_hooks, _original_run
    with _lock:
        _attempt_hooks = tuple(h for h in _attempt_hooks if h != hook)
        if not _attempt_hooks and _original_run is not None:
            Executor.run = _original_run  # type: ignore[method-assign]
            _original_run = None


def add_push_hook(hook: PushHook) -> None:
    """Run ``hook`` around every `JobBridge.push` (dispatch, dispatch_many, the facade's publishing)."""
    global _push_hooks, _original_push
    with _lock:
        if hook in _push_hooks:
            return
        if _original_push is None:
            _original_push = JobBridge.push
            JobBridge.push = _push  # type: ignore[method-assign,assignment]
        _push_hooks = (*_push_hooks, hook)


def remove_push_hook(hook: PushHook) -> None:
    global _push_hooks, _original_push
    with _lock:
        _push_hooks = tuple(h for h in _push_hooks if h != hook)
        if not _push_hooks and _original_push is not None:
            JobBridge.push = _original_push  # type: ignore[method-assign]
            _original_push = None


def _run(executor: Executor, res: Reservation) -> Outcome:
    hooks, original = _attempt_hooks, _original_run
    if original is None:  # removed while this call began: run as if never wrapped
        return Executor.run(executor, res)
    call: RunAttempt = functools.partial(original, executor, res)
    for hook in reversed(hooks):
        call = _guarded_attempt(hook, executor, res, call)
    return call()


def _guarded_attempt(hook: AttemptHook, executor: Executor, res: Reservation, call_next: RunAttempt) -> RunAttempt:
    def call() -> Outcome:
        done: list[Outcome] = []
        started = False

        def once() -> Outcome:
            nonlocal started
            started = True
            done.append(call_next())
            return done[-1]

        try:
            return hook(executor, res, once)
        except Exception:
            if started and not done:
                raise  # the attempt itself raised: the pool turns that into an outcome
            log.exception("a telemetry hook raised; the attempt's outcome stands")
            return done[-1] if done else call_next()

    return call


def _push(bridge: JobBridge, envelopes: Sequence[Envelope], *, connection: str | None = None,
          transaction: object | None = None) -> list[str | None]:
    hooks, original = _push_hooks, _original_push
    if original is None:
        return JobBridge.push(bridge, envelopes, connection=connection, transaction=transaction)

    def store(envs: Sequence[Envelope]) -> list[str | None]:
        result: list[str | None] = original(bridge, envs, connection=connection, transaction=transaction)
        return result

    name = _connection_name(bridge, connection)
    call: PushNext = store
    for hook in reversed(hooks):
        call = _guarded_push(hook, bridge, name, call)
    return call(envelopes)


def _guarded_push(hook: PushHook, bridge: JobBridge, connection: str, call_next: PushNext) -> PushNext:
    def call(envs: Sequence[Envelope]) -> list[str | None]:
        done: list[list[str | None]] = []
        started = False

        def once(given: Sequence[Envelope]) -> list[str | None]:
            nonlocal started
            started = True
            done.append(call_next(given))
            return done[-1]

        try:
            return hook(bridge, envs, connection, once)
        except Exception:
            if started and not done:
                raise  # the push itself raised: the caller sees it
            log.exception("a telemetry hook raised; the push stands")
            return done[-1] if done else call_next(envs)

    return call


def _connection_name(bridge: JobBridge, connection: str | None) -> str:
    """The connection's declared name; an undeclared one is refused by the push itself, after the hooks."""
    try:
        return bridge.settings.connection(connection).name
    except Exception:
        return connection or "default"
