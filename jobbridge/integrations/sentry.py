"""Sentry: a job's final failure as one event, tagged with the job; breadcrumbs per attempt; no payload.

``sentry_sdk.init(dsn=..., integrations=[JobBridgeIntegration()])`` in the
process that runs the worker (the module ``-A`` names, or Django's settings).
Each attempt runs in a Sentry isolation scope of its own, so breadcrumbs and
tags never leak from one job into the next job on the same thread. The scope
carries the tags ``jobbridge.job`` (the job's name), ``jobbridge.job_id``,
``jobbridge.queue``, ``jobbridge.attempt`` and ``jobbridge.connection``, and
its transaction name is the job's name, so Sentry groups by job.

What is sent:

- a job that failed for good (its last attempt failed, it raised `FailJob`,
  or its attempts ran out): one event, with the exception that ended it;
- a message no worker can run (an unknown job name, a payload that does not
  decode): one event at level error, with the reason;
- with ``capture_attempts=True``, also each failed attempt that will be
  retried, at level warning;
- a breadcrumb when each attempt starts and one when it ends (its outcome).

The payload is never sent unless ``send_payload=True``: the local variables
of every stack frame (which hold the job and its fields) are removed from the
event, and the job's fields are added (as the ``jobbridge`` context) only when
asked. Install with ``pip install 'jobbridge[sentry]'``. Sentry's own Celery
integration needs Celery's worker, which the facade does not have: under the
facade use this one (it sees facade tasks as the jobs they are).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.utils import event_from_exception

from jobbridge.envelope import Reservation
from jobbridge.execution import Executor
from jobbridge.integrations import hooks
from jobbridge.integrations.hooks import RunAttempt
from jobbridge.outcome import Outcome

__all__ = ["JobBridgeIntegration"]

if TYPE_CHECKING:
    from sentry_sdk._types import Event


class JobBridgeIntegration(Integration):
    """The jobbridge integration for sentry-sdk (identifier ``"jobbridge"``)."""

    identifier = "jobbridge"
    origin = "auto.queue.jobbridge"

    def __init__(self, *, capture_attempts: bool = False, send_payload: bool = False) -> None:
        self.capture_attempts = capture_attempts
        self.send_payload = send_payload

    @staticmethod
    def setup_once() -> None:
        hooks.add_attempt_hook(_around_attempt)


def _around_attempt(executor: Executor, res: Reservation, run: RunAttempt) -> Outcome:
    integration = sentry_sdk.get_client().get_integration(JobBridgeIntegration)
    if integration is None:  # this client was set up without it
        return run()
    env = res.envelope
    with sentry_sdk.isolation_scope() as scope:
        scope.clear_breadcrumbs()
        tags = {"jobbridge.job": env.name, "jobbridge.job_id": env.id, "jobbridge.queue": env.queue,
                "jobbridge.attempt": str(env.attempts), "jobbridge.connection": executor.connection}
        for key, value in tags.items():
            scope.set_tag(key, value)
        scope.set_transaction_name(env.name)
        details: dict[str, Any] = {"attempt": env.attempts, "max_attempts": env.tries}
        if integration.send_payload:
            details["payload"] = dict(env.payload)
        scope.set_context("jobbridge", details)
        if not integration.send_payload:
            scope.add_event_processor(_without_frame_variables)
        sentry_sdk.add_breadcrumb(category="jobbridge", message=f"attempt {env.attempts} of {env.name} started",
                                  data={"job_id": env.id, "queue": env.queue})
        outcome = run()
        level = "info" if outcome.action == "acknowledge" else "warning"
        sentry_sdk.add_breadcrumb(category="jobbridge", level=level,
                                  message=f"attempt {env.attempts} of {env.name} {outcome.label}",
                                  data={"job_id": env.id, "duration_ms": outcome.duration_ms})
        _report(integration, outcome)
    return outcome


def _report(integration: JobBridgeIntegration, outcome: Outcome) -> None:
    """Send the event an outcome calls for, if any."""
    final = outcome.action == "fail"
    if not final and not (integration.capture_attempts and outcome.action == "release"):
        return
    level: Literal["error", "warning"] = "error" if final else "warning"
    if outcome.exception is None:  # discarded: no exception, the reason is the error
        sentry_sdk.capture_message(outcome.error.split("\n", 1)[0] or outcome.label, level=level)
        return
    client = sentry_sdk.get_client()
    event, hint = event_from_exception(outcome.exception, client_options=client.options,
                                       mechanism={"type": JobBridgeIntegration.identifier, "handled": False})
    event["level"] = level
    sentry_sdk.capture_event(event, hint=hint)


def _without_frame_variables(event: Event, hint: dict[str, Any]) -> Event:
    """Drop every frame's local variables: they hold the job, whose fields are the payload."""
    for exception in (event.get("exception") or {}).get("values") or []:
        for frame in (exception.get("stacktrace") or {}).get("frames") or []:
            frame.pop("vars", None)
    for thread in (event.get("threads") or {}).get("values") or []:
        for frame in (thread.get("stacktrace") or {}).get("frames") or []:
            frame.pop("vars", None)
    return event
