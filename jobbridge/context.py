"""`JobContext`: a running job's handle on the world (its id, attempt, container, logger)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jobbridge.container import Container

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a job's ``handle(ctx)`` is given. ``attempt`` is 1-based.

    The worker builds one per attempt with `attempt_context`, which sets the same fields.
    """

    id: str
    name: str
    queue: str
    attempt: int
    max_attempts: int
    timeout: float = 600.0
    connection: str = "default"
    container: Container = field(default_factory=Container)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("jobbridge.job"))
    headers: Mapping[str, Any] = field(default_factory=dict)
    job: Any = None

    @property
    def is_last_attempt(self) -> bool:
        """True when a failure now sends the job to the failed store."""
        return self.attempt >= self.max_attempts

    def resolve(self, key: type[T]) -> T:
        """A dependency from the container (scoped bindings live for this job only)."""
        return self.container.resolve(key)


# The frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
# ``__setattr__`` refuses): a type look-up and a generic set per field. The slot descriptors below are
# what those calls end in; `attempt_context` calls them directly, in half the time (docs/benchmarks.md).
# The instance is as frozen as any; tests/unit/test_context.py checks that every field is set.
_SET = {name: JobContext.__dict__[name].__set__ for name in JobContext.__slots__}
_id, _name, _queue, _attempt, _max_attempts, _timeout, _connection, _container, _logger, _headers, _job = (
    _SET["id"], _SET["name"], _SET["queue"], _SET["attempt"], _SET["max_attempts"], _SET["timeout"],
    _SET["connection"], _SET["container"], _SET["logger"], _SET["headers"], _SET["job"])
_new = object.__new__


def attempt_context(id: str, name: str, queue: str, attempt: int, max_attempts: int, timeout: float,
                    connection: str, container: Container, logger: logging.Logger, headers: Mapping[str, Any],
                    job: Any) -> JobContext:
    """``JobContext(...)`` with every field given, as the executor builds one per attempt."""
    ctx: JobContext = _new(JobContext)
    _id(ctx, id)
    _name(ctx, name)
    _queue(ctx, queue)
    _attempt(ctx, attempt)
    _max_attempts(ctx, max_attempts)
    _timeout(ctx, timeout)
    _connection(ctx, connection)
    _container(ctx, container)
    _logger(ctx, logger)
    _headers(ctx, headers)
    _job(ctx, job)
    return ctx
