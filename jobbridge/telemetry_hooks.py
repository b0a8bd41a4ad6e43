"""The two moments telemetry wraps, declared: around each attempt, and around each push.

OpenTelemetry, Sentry and Prometheus each need to run *around* the same two
moments, which a blinker signal (told *that* something happened) cannot do
for a span or a Sentry scope: an attempt, on the thread that runs it, from
before the job is looked up to its outcome (`Executor.run`); and a push,
before the envelopes reach the store, so that trace headers can still be
added to them (`JobBridge.push`). Both look at their list here on every call:
while it is empty (no telemetry set up) nothing wraps them, and an attempt
costs what it would cost without this module. The integrations add their
hooks through `jobbridge.integrations.hooks`.

An attempt hook is ``hook(executor, reservation, run) -> Outcome``: it must
call ``run()`` once and return its outcome. A push hook is ``hook(bridge,
envelopes, connection, push) -> ids``: it may hand ``push`` changed envelopes
(the same ids, in the same order). A hook that raises before it calls on is
logged and skipped, so telemetry that breaks never stops a job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from jobbridge.envelope import Envelope, Reservation
from jobbridge.outcome import Outcome

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.execution import Executor

log = logging.getLogger("jobbridge.integrations")

RunAttempt = Callable[[], Outcome]
AttemptHook = Callable[["Executor", Reservation, RunAttempt], Outcome]
PushNext = Callable[[Sequence[Envelope]], list[str | None]]
PushHook = Callable[["JobBridge", Sequence[Envelope], str, PushNext], list[str | None]]
H = TypeVar("H", AttemptHook, PushHook)

#: the hooks around every attempt of this process, outermost first; read by `Executor.run` per attempt
ATTEMPT_HOOKS: list[AttemptHook] = []
#: the hooks around every `JobBridge.push` of this process, outermost first
PUSH_HOOKS: list[PushHook] = []

_lock = threading.Lock()
_pushing = threading.local()  # set while the hooks' innermost call runs the push itself


def add(hooks: list[H], hook: H) -> None:
    """Add ``hook`` to ``hooks`` (`ATTEMPT_HOOKS` or `PUSH_HOOKS`) once, however often it is given."""
    with _lock:
        if hook not in hooks:
            hooks.append(hook)


def remove(hooks: list[H], hook: H) -> None:
    with _lock:
        hooks[:] = [h for h in hooks if h != hook]


# -- around an attempt ---------------------------------------------------------------------


def around_attempt(executor: Executor, res: Reservation, attempt: Callable[[Reservation], Outcome]) -> Outcome:
    """Run ``attempt(res)`` inside every attempt hook (`Executor.run` calls this only when there are some)."""
    return _attempt_from(tuple(ATTEMPT_HOOKS), 0, executor, res, attempt)


def _attempt_from(hooks: tuple[AttemptHook, ...], index: int, executor: Executor, res: Reservation,
                  attempt: Callable[[Reservation], Outcome]) -> Outcome:
    """Hook ``index`` around the rest of the chain: one closure per hook and attempt, nothing more."""
    if index == len(hooks):
        return attempt(res)
    done: list[Outcome | None] = []  # [None] once the rest began, [None, outcome] once it returned

    def run() -> Outcome:
        done.append(None)
        outcome = _attempt_from(hooks, index + 1, executor, res, attempt)
        done.append(outcome)
        return outcome

    try:
        return hooks[index](executor, res, run)
    except Exception:
        if len(done) == 1:
            raise  # the attempt itself raised: the pool turns that into an outcome
        log.exception("a telemetry hook raised; the attempt's outcome stands")
        finished = done[-1] if done else None
        return finished if finished is not None else _attempt_from(hooks, index + 1, executor, res, attempt)


# -- around a push -------------------------------------------------------------------------


def pushing() -> bool:
    """Whether this thread is inside the hooks' own call of the push (which must not run them again)."""
    return getattr(_pushing, "active", False)


def around_push(bridge: JobBridge, envelopes: Sequence[Envelope], connection: str | None,
                transaction: object | None) -> list[str | None]:
    """`JobBridge.push` inside every push hook (it calls this only when there are some)."""
    def store(envs: Sequence[Envelope]) -> list[str | None]:
        was, _pushing.active = pushing(), True
        try:
            return bridge.push(envs, connection=connection, transaction=transaction)
        finally:
            _pushing.active = was

    name = _connection_name(bridge, connection)
    call: PushNext = store
    for hook in reversed(tuple(PUSH_HOOKS)):
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
