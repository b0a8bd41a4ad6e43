"""jobbridge's Celery facade: a Celery project moves by changing one import.

``from celery import Celery, shared_task`` becomes ``from jobbridge.compat import
Celery, shared_task`` (or call `install_as_celery` first and change nothing), and
``celery -A proj worker`` becomes ``jobbridge worker -A proj``. A Celery task is a
jobbridge job whose name is the task name and whose payload is its args and
kwargs. docs/compat.md lists every Celery API and setting: supported,
accepted, or refused with what to write instead.
"""

from __future__ import annotations

from . import exceptions, signals, states
from .app import Celery
from .canvas import Signature, chain, chord, chunks, group, maybe_signature, signature, subtask, xmap, xstarmap
from .exceptions import (
    Ignore,
    ImproperlyConfigured,
    MaxRetriesExceededError,
    RefusedFeature,
    Reject,
    ResultsNotEnabled,
    Retry,
    SoftTimeLimitExceeded,
    TimeLimitExceeded,
    TimeoutError,
)
from .install import install_as_celery
from .log import get_task_logger
from .request import Request
from .result import AsyncResult, EagerResult, GroupResult, ResultSet
from .shared import current_app, current_task, shared_task
from .signals import logging_is_configured_by_app
from .task import Task

__all__ = [
    "AsyncResult", "Celery", "EagerResult", "GroupResult", "Ignore", "ImproperlyConfigured",
    "MaxRetriesExceededError", "RefusedFeature", "Reject", "Request", "ResultSet", "ResultsNotEnabled", "Retry",
    "Signature", "SoftTimeLimitExceeded", "Task", "TimeLimitExceeded", "TimeoutError", "chain", "chord", "chunks",
    "current_app", "current_task", "exceptions", "get_task_logger", "group", "install_as_celery",
    "logging_is_configured_by_app", "maybe_signature", "shared_task", "signals", "signature", "states",
    "subtask", "xmap", "xstarmap",
]
