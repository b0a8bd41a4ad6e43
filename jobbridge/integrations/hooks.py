"""Where telemetry attaches: around every attempt (`Executor.run`) and every push (`JobBridge.push`).

The two moments are declared by the core (`jobbridge.telemetry_hooks`): each
looks at its list of hooks on every call, and runs straight through while
the list is empty. OpenTelemetry, Sentry and Prometheus add their hooks here.
Nothing in the worker's loop knows about them.

An attempt hook is ``hook(executor, reservation, run) -> Outcome``: it must
call ``run()`` once and return its outcome. A push hook is ``hook(bridge,
envelopes, connection, push) -> ids``: it may hand ``push`` changed envelopes
(the same ids, in the same order). A hook that raises before it calls on is
logged and skipped, so telemetry that breaks never stops a job.
"""

from __future__ import annotations

from jobbridge import telemetry_hooks
from jobbridge.telemetry_hooks import AttemptHook, PushHook, PushNext, RunAttempt

__all__ = ["AttemptHook", "PushHook", "PushNext", "RunAttempt", "add_attempt_hook", "add_push_hook",
           "remove_attempt_hook", "remove_push_hook"]


def add_attempt_hook(hook: AttemptHook) -> None:
    """Run ``hook`` around every attempt in this process (added once however often it is given)."""
    telemetry_hooks.add(telemetry_hooks.ATTEMPT_HOOKS, hook)


def remove_attempt_hook(hook: AttemptHook) -> None:
    telemetry_hooks.remove(telemetry_hooks.ATTEMPT_HOOKS, hook)


def add_push_hook(hook: PushHook) -> None:
    """Run ``hook`` around every `JobBridge.push` (dispatch, dispatch_many, the facade's publishing)."""
    telemetry_hooks.add(telemetry_hooks.PUSH_HOOKS, hook)


def remove_push_hook(hook: PushHook) -> None:
    telemetry_hooks.remove(telemetry_hooks.PUSH_HOOKS, hook)
