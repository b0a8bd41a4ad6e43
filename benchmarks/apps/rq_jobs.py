"""RQ's benchmark jobs (RQ enqueues functions by import path; the worker is ``rq worker``)."""

from __future__ import annotations

from benchmarks import probe


def noop() -> None:
    probe.hit()


def stamp(dispatched_at: float) -> None:
    probe.stamp(dispatched_at)
