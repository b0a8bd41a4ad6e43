"""`WorkerOptions`: how a worker runs (its queues, threads, processes, when it stops), checked when made.

Kept apart from the loop in `jobbridge.worker` so that the CLI, the supervisor
and tests build and compare options without the loop's imports.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs; the CLI fills the defaults from the app's `Settings`."""

    queues: tuple[str, ...] = ("default",)  # priority order
    concurrency: int = 8
    processes: int = 1
    max_jobs: int | None = None
    sleep: float = 1.0
    once: bool = False  # run one job, then exit
    stop_when_empty: bool = False  # drain what is available now, then exit
    connection: str | None = None
    hostname: str = field(default_factory=socket.gethostname)
    #: the file the processes of one ``--processes N`` command keep their rate limits in (the supervisor's)
    rate_limit_file: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "queues", tuple(self.queues))
        if not self.queues or not all(isinstance(q, str) and q for q in self.queues):
            raise ValueError(f"a worker needs at least one queue name, got {self.queues!r}")
        if self.concurrency < 1 or self.processes < 1:
            raise ValueError("concurrency and processes must be at least 1")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ValueError(f"max_jobs must be at least 1 (or None), got {self.max_jobs}")
        if self.sleep < 0:
            raise ValueError(f"sleep must not be negative, got {self.sleep}")
