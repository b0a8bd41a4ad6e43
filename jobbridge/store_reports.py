"""What a store reports about the jobs it holds: a failed job's row, and a queue's counts by state.

Value types at the boundary, like `jobbridge.envelope`'s: every driver's failed store hands out
`FailedJob`s (``jobbridge failed``, the dashboard) and every driver counts a queue as `QueueCounts`
(``jobbridge status``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A row of the failed store: what gave up, when and why."""

    id: str
    queue: str
    name: str
    attempts: int
    error: str
    failed_at: float
    body: bytes


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many jobs a queue holds, by state, for ``jobbridge status``."""

    queue: str
    ready: int = 0
    delayed: int = 0
    reserved: int = 0

    @property
    def pending(self) -> int:
        """Waiting, delayed or running: everything not yet acknowledged or failed."""
        return self.ready + self.delayed + self.reserved
