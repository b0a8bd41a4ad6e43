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
    """What a job's ``handle(ctx)`` is given. ``attempt`` is 1-based."""

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
