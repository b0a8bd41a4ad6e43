"""Celery's exception names, so ``except celery.exceptions.X`` keeps working on the facade.

::

    CeleryError
    ├── TaskPredicate             control flow a task raises
    │   ├── Retry                 (also jobbridge's ReleaseJob) run again later
    │   ├── Ignore                done, without a success
    │   └── Reject                refuse the message (requeue or fail)
    ├── ImproperlyConfigured      (also jobbridge's ConfigurationError)
    │   └── RefusedFeature        a Celery feature the facade does not provide, with what to use
    ├── TaskError
    │   ├── MaxRetriesExceededError
    │   ├── NotRegistered         (also KeyError)
    │   ├── QueueNotFound         (also KeyError)
    │   ├── TaskRevokedError
    │   └── TimeoutError
    ├── ResultsNotEnabled         a result was read (or a group or chord applied) without a result_backend
    └── RemoteTaskError           (compat/results/remote.py) stands for a task's exception this process cannot import
    SoftTimeLimitExceeded         raised inside a task at its soft time limit (an Exception)
    TimeLimitExceeded             the hard time limit stopped the task
"""

from __future__ import annotations

import numbers
from typing import Any

from jobbridge.errors import ConfigurationError
from jobbridge.outcome import ReleaseJob


class CeleryError(Exception):
    """Base of the Celery-named errors."""


class TaskPredicate(CeleryError):
    """Base of the exceptions a task raises to choose how its attempt ends."""


class Retry(TaskPredicate, ReleaseJob):
    """The task runs again later: ``when`` is seconds (a countdown) or a datetime (an eta)."""

    def __init__(self, message: str | None = None, exc: BaseException | str | None = None,
                 when: Any = None, is_eager: bool = False, sig: Any = None, **kwargs: Any) -> None:
        self.message = message
        self.exc: BaseException | None = None if isinstance(exc, str) else exc
        self.excs = exc if isinstance(exc, str) else (repr(exc) if exc is not None else None)
        self.when = when
        self.is_eager = is_eager
        self.sig = sig
        #: set by Task.retry when the retry changes the call (args, kwargs, options) or must not raise
        self.resend: dict[str, Any] | None = None
        self.max_retries: int | None = None
        delay = float(when) if isinstance(when, numbers.Real) else 0.0
        ReleaseJob.__init__(self, max(0.0, delay), self._text())

    def humanize(self) -> str:
        if isinstance(self.when, numbers.Number):
            return f"in {self.when}s"
        return f"at {self.when}"

    def _text(self) -> str:
        if self.message:
            return self.message
        if self.excs:
            return f"Retry {self.humanize()}: {self.excs}"
        return f"Retry {self.humanize()}"

    def __str__(self) -> str:
        return self._text()

    def __reduce__(self) -> tuple[Any, ...]:
        return self.__class__, (self.message, self.exc, self.when)


RetryTaskError = Retry


class Ignore(TaskPredicate):
    """Raise in a task to end it without a success or a failure (state IGNORED)."""


class Reject(TaskPredicate):
    """Raise in a task to refuse its message: ``requeue=True`` runs it again, else it is failed."""

    def __init__(self, reason: Any = None, requeue: bool = False) -> None:
        self.reason = reason
        self.requeue = requeue
        super().__init__(reason, requeue)

    def __repr__(self) -> str:
        return f"reject requeue={self.requeue}: {self.reason}"


class ImproperlyConfigured(CeleryError, ConfigurationError):
    """The configuration cannot be honoured (an unknown, refused or malformed setting)."""


class RefusedFeature(ImproperlyConfigured):
    """A Celery feature the facade does not provide; the message says what to write instead."""


class SecurityError(CeleryError):
    """Message signing is not provided by the facade."""


class TaskError(CeleryError):
    """Task related errors."""


class QueueNotFound(KeyError, TaskError):
    """A task was routed to a queue that is not declared while task_create_missing_queues is off."""


class NotRegistered(KeyError, TaskError):
    """No task of this name is registered with the app."""

    def __str__(self) -> str:
        return f"Task of kind {self.args[0]!r} never registered, please make sure it's imported."


class AlreadyRegistered(TaskError):
    """The task is already registered."""


class TimeoutError(TaskError):
    """The operation timed out."""


class MaxRetriesExceededError(TaskError):
    """The task's retries are used up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.task_args = kwargs.pop("task_args", [])
        self.task_kwargs = kwargs.pop("task_kwargs", {})
        super().__init__(*args, **kwargs)


class TaskRevokedError(TaskError):
    """The task was revoked (or expired), so it has no result."""


class InvalidTaskError(TaskError):
    """The task has invalid data or is not properly constructed."""


class ChordError(TaskError):
    """A task part of the chord raised an exception."""


class IncompleteStream(TaskError):
    """Found the end of a stream of data, but the data is not complete."""


class ResultsNotEnabled(CeleryError):
    """A result was read, or a group or chord applied, and the app has no ``result_backend``."""


class SoftTimeLimitExceeded(Exception):
    """Raised inside a running task when its soft time limit is reached; it may be caught to clean up."""

    def __str__(self) -> str:
        return self.args[0] if self.args else "SoftTimeLimitExceeded()"


class TimeLimitExceeded(Exception):
    """The hard time limit stopped the task."""


class WorkerLostError(Exception):
    """The worker running the task was lost."""


class Terminated(Exception):
    """The task was terminated."""


class CeleryWarning(UserWarning):
    """Base of Celery's warnings."""


class AlwaysEagerIgnored(CeleryWarning):
    """send_task ignores task_always_eager."""


class DuplicateNodenameWarning(CeleryWarning):
    """Multiple workers are using the same nodename."""


class NotConfigured(CeleryWarning):
    """Celery has not been configured."""


class CPendingDeprecationWarning(PendingDeprecationWarning):
    """Celery's pending deprecation warning."""


class CDeprecationWarning(DeprecationWarning):
    """Celery's deprecation warning."""


class WorkerShutdown(SystemExit):
    """Signals that the worker should stop."""


class WorkerTerminate(SystemExit):
    """Signals that the worker should stop at once."""


__all__ = [
    "AlreadyRegistered", "AlwaysEagerIgnored", "CDeprecationWarning", "CPendingDeprecationWarning",
    "CeleryError", "CeleryWarning", "ChordError", "DuplicateNodenameWarning", "Ignore", "ImproperlyConfigured",
    "IncompleteStream", "InvalidTaskError", "MaxRetriesExceededError", "NotConfigured", "NotRegistered",
    "QueueNotFound", "RefusedFeature", "Reject", "ResultsNotEnabled", "Retry", "RetryTaskError", "SecurityError",
    "SoftTimeLimitExceeded", "TaskError", "TaskPredicate", "TaskRevokedError", "Terminated",
    "TimeLimitExceeded", "TimeoutError", "WorkerLostError", "WorkerShutdown", "WorkerTerminate",
]
