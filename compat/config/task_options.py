"""What the options of ``@app.task`` may be: the values refused on jobbridge, and the numbers checked.

Checked once, as the task is made (``app.task_from_fun``), so a task a worker could not honour
fails where it is declared, naming the option and what to do instead, rather than at its first run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import RefusedFeature

# Task decorator options that mean something else on jobbridge, or cannot be honoured.
REFUSALS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "priority": (lambda v: v is None, "jobbridge orders work by queue, not by message priority; route "
                 "urgent tasks to a queue the worker lists first (queue='high')"),
    "serializer": (lambda v: v is None or str(v).lower() in ("json", "application/json"),
                   "jobbridge sends arguments as JSON, which any worker can read and nothing can turn into "
                   "code; pickle is refused because a message could run code in the worker; pass ids and "
                   "JSON values"),
}
#: the options that are a number of seconds or of retries (a bool is refused: ``True`` is no count)
NUMBERS = ("max_retries", "default_retry_delay", "time_limit", "soft_time_limit")


def check_task_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise `RefusedFeature` for a refused value, `ValueError` for a number that is not one of at least 0."""
    for key, (ok, why) in REFUSALS.items():
        if key in options and not ok(options[key]):
            raise RefusedFeature(f"task {name}: {key}={options[key]!r} is refused: {why}")
    for key in NUMBERS:
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ValueError(f"task {name}: {key} must be a number of at least 0, not {value!r}")


__all__ = ["REFUSALS", "check_task_options"]
