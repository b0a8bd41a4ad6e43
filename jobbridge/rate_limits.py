"""Rate limits: how often a job type may start, and the token buckets that hand out its turns.

A job class declares ``rate_limit="50/m"`` (``N/s``, ``N/m``, ``N/h``, or a number
per second) to cap how often its jobs *start*, so that a mail provider's or an
API's quota is never exceeded however many jobs are queued. By default the
limit holds per worker command (``jobbridge worker``, all its ``--processes``
together); ``RateLimit("50/m", shared=True)`` holds it across every worker on
the store, through a bucket the store keeps (`RateBuckets`, offered by the
database, Redis and memory drivers as ``driver.rate_buckets``).

Every bucket is the same arithmetic (`book`): a *theoretical arrival time*
per bucket, moved one interval (1/rate) on per token, with ``burst - 1``
intervals of slack. A taker may book a turn up to ``horizon`` seconds ahead
and is told how many seconds from now each booked turn begins; a job that
finds no turn within the horizon is not run and not counted as an attempt
(the worker's `jobbridge.rate_gate` hands it back to the store). Because turns
are booked, never polled for, no thread spins waiting for one, and any number
of concurrent takers of one bucket are never granted more than ``burst`` turns
plus one per interval in any stretch of time. docs/rate-limits.md is the manual.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from jobbridge.errors import JobDefinitionError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([smh]))?\s*$")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}

#: a rate's form, as written on a job: ``"50/m"``, ``"10/s"``, ``"100/h"``, ``"5"`` or a number (per second)
RateValue = str | int | float


def per_second(rate: RateValue) -> float:
    """Turns per second of ``"N/s"``, ``"N/m"``, ``"N/h"`` or a number (per second); 0 means no limit."""
    if isinstance(rate, bool):
        raise JobDefinitionError(f"a rate limit is 'N/s', 'N/m', 'N/h' or a number per second, not {rate!r}")
    if isinstance(rate, (int, float)):
        value = float(rate)
    else:
        match = _RATE.match(str(rate))
        if match is None:
            raise JobDefinitionError(
                f"rate limit {rate!r} is not understood: write 'N/s', 'N/m' or 'N/h' (N jobs a second, a "
                "minute or an hour), or a number of jobs per second")
        value = float(match.group(1)) / _PER[match.group(2) or "s"]
    if not math.isfinite(value) or value < 0:
        raise JobDefinitionError(f"rate limit {rate!r} must be a finite rate of zero or more")
    return value


@dataclass(frozen=True, slots=True)
class RateLimit:
    """How often a job type may start: ``RateLimit("50/m")``, ``RateLimit("10/s", burst=5, shared=True)``.

    ``burst``: how many may start back to back after a quiet spell (1: evenly spaced).
    ``shared``: one limit for every worker on the store, rather than one per worker command.
    """

    rate: RateValue
    burst: int = 1
    shared: bool = False
    per_second: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_second", per_second(self.rate))
        if self.per_second <= 0:
            raise JobDefinitionError(f"rate limit {self.rate!r} allows nothing; leave rate_limit unset for no limit")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise JobDefinitionError(f"a rate limit's burst must be a whole number of at least 1, not {self.burst!r}")

    @property
    def interval(self) -> float:
        """Seconds between turns."""
        return 1.0 / self.per_second

    def __str__(self) -> str:
        scope = "shared by every worker" if self.shared else "per worker"
        return f"{self.rate} ({scope}{f', burst {self.burst}' if self.burst > 1 else ''})"


def as_rate_limit(value: RateLimit | RateValue | None) -> RateLimit | None:
    """A job's ``rate_limit=`` as a `RateLimit`; None (and a zero rate, as Celery reads it) for no limit."""
    if value is None or isinstance(value, RateLimit):
        return value
    if per_second(value) == 0:
        return None
    return RateLimit(value)


@dataclass(frozen=True, slots=True)
class Grants:
    """What one take got: each booked turn's start, in seconds from now; when the next free turn begins."""

    starts: tuple[float, ...]
    next_in: float


def book(tat: float, now: float, limit: RateLimit, count: int, horizon: float) -> tuple[float, Grants]:
    """Book up to ``count`` turns beginning within ``horizon`` seconds; the bucket's new state and the grants.

    ``tat`` is the bucket's theoretical arrival time (0 for a new bucket), in the
    same clock as ``now``. Pure arithmetic, shared by every bucket and checked by
    the unit tests: each turn is one interval after the last, ``burst - 1``
    intervals of slack let a quiet bucket start several at once.
    """
    interval = limit.interval
    slack = (limit.burst - 1) * interval
    tat = max(tat, now)
    starts: list[float] = []
    while len(starts) < count:
        start = max(now, tat - slack)
        if start - now > horizon:
            break
        starts.append(start - now)
        tat += interval
    return tat, Grants(tuple(starts), max(now, tat - slack) - now)


@runtime_checkable
class RateBuckets(Protocol):
    """Token buckets by key; exact under concurrency for every taker that shares the store behind them."""

    #: whether every worker on the store shares these buckets (False: this worker command alone)
    shared: bool

    def take(self, key: str, limit: RateLimit, count: int, horizon: float) -> Grants:
        """Book up to ``count`` turns of bucket ``key`` beginning within ``horizon`` seconds (see `book`)."""
        ...


class LocalBuckets:
    """Buckets in this process, for one worker process on its own (and for the memory driver)."""

    def __init__(self, now: Callable[[], float] = time.monotonic, *, shared: bool = False) -> None:
        self.shared = shared
        self._now = now
        self._tat: dict[str, float] = {}
        self._lock = threading.Lock()

    def take(self, key: str, limit: RateLimit, count: int, horizon: float) -> Grants:
        with self._lock:
            self._tat[key], grants = book(self._tat.get(key, 0.0), self._now(), limit, count, horizon)
        return grants


class FileBuckets:
    """Buckets in a file that the processes of one ``jobbridge worker --processes N`` share.

    One limit per worker command, whatever N is: each take locks the file
    (``flock``), reads the bucket, books and writes it back. Times are the
    host's monotonic clock, which every process of the host reads alike.
    """

    shared = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.touch(exist_ok=True)
        self._lock = threading.Lock()

    def take(self, key: str, limit: RateLimit, count: int, horizon: float) -> Grants:
        with self._lock, self.path.open("r+", encoding="utf-8") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                state = _state(file.read())
                state[key], grants = book(float(state.get(key, 0.0)), time.monotonic(), limit, count, horizon)
                file.seek(0)
                file.truncate()
                file.write(json.dumps(state))
                file.flush()
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)
        return grants


def _state(text: str) -> dict[str, float]:
    """The buckets a file holds; a file cut short (a process killed mid-write) starts them afresh."""
    try:
        state = json.loads(text) if text else {}
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}
