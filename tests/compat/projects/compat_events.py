"""What the sample projects' tasks and signal receivers did: JSON lines in $COMPAT_EVENTS, else a list."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

_lock = threading.Lock()
memory: list[list[Any]] = []


def record(*event: Any) -> None:
    path = os.environ.get("COMPAT_EVENTS")
    with _lock:
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(list(event)) + "\n")
        else:
            memory.append(list(event))


def events() -> list[list[Any]]:
    path = os.environ.get("COMPAT_EVENTS")
    if not path:
        return list(memory)
    with _lock, open(path, encoding="utf-8") as found:
        return [json.loads(line) for line in found if line.strip()]


def count(kind: str) -> int:
    return sum(1 for event in events() if event[0] == kind)


def connect_receivers(signals: Any, app_name: str) -> list[Any]:
    """Receivers, written as for Celery, recording each signal of interest (kept referenced by the caller)."""
    def task_prerun(sender: Any = None, task_id: Any = None, task: Any = None, args: Any = None,
                    kwargs: Any = None, **extra: Any) -> None:
        record("task_prerun", task.name)

    def task_postrun(sender: Any = None, task_id: Any = None, task: Any = None, retval: Any = None,
                     state: Any = None, **extra: Any) -> None:
        record("task_postrun", task.name, state)

    def task_success(sender: Any = None, result: Any = None, **extra: Any) -> None:
        record("task_success", sender.name)

    def task_failure(sender: Any = None, task_id: Any = None, exception: Any = None, **extra: Any) -> None:
        record("task_failure", sender.name, type(exception).__name__)

    def task_retry(sender: Any = None, request: Any = None, reason: Any = None, **extra: Any) -> None:
        record("task_retry", sender.name, request.retries)

    def worker_event(name: str) -> Any:
        def receiver(sender: Any = None, **extra: Any) -> None:
            record(name, app_name)

        return receiver

    receivers = [
        (signals.task_prerun, task_prerun), (signals.task_postrun, task_postrun),
        (signals.task_success, task_success), (signals.task_failure, task_failure),
        (signals.task_retry, task_retry),
    ] + [(getattr(signals, name), worker_event(name)) for name in (
        "celeryd_init", "worker_init", "worker_process_init", "worker_ready", "worker_shutting_down",
        "worker_process_shutdown", "worker_shutdown")]
    for signal, receiver in receivers:
        signal.connect(receiver)
    return receivers
