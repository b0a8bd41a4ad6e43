"""A clock that only moves when a test moves it."""

from __future__ import annotations

from datetime import datetime


class FixedClock:
    """Fixed time for tests: ``advance`` past a lease or a delay instead of sleeping."""

    def __init__(self, start: float | datetime = 1_800_000_000.0) -> None:
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def set(self, moment: float | datetime) -> None:
        self._now = moment.timestamp() if isinstance(moment, datetime) else float(moment)
