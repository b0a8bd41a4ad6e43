"""Bounded triggers: `Window` (a trigger's ticks from a start, until an end) and `Once` (one tick).

An entry read from data that people edit at run time (an entry source, such as
django-celery-beat's tables) has a moment it was last defined, may have a start
and an end, and may fire once. Each is a bound on the ticks, so it stays a pure
function of time that every scheduler computes alike from the same row: no
scheduler's memory (when it noticed the change) decides which tick fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from jobbridge.scheduling.triggers import Trigger


@dataclass(frozen=True)
class Window:
    """``inner``'s ticks at or after ``start`` and strictly before ``end`` (None: unbounded that way)."""

    inner: Trigger
    start: float | None = None
    end: float | None = None

    def first_from(self, moment: float) -> float | None:
        """The first tick at or after ``moment``."""
        at = self.latest_at(moment)
        return at if at is not None and at == moment else self.next_after(moment)

    def next_after(self, moment: float) -> float | None:
        if self.start is not None and moment < self.start:
            at = self.inner.latest_at(self.start)
            tick = at if at is not None and at == self.start else self.inner.next_after(self.start)
        else:
            tick = self.inner.next_after(moment)
        return tick if tick is not None and (self.end is None or tick < self.end) else None

    def latest_at(self, moment: float) -> float | None:
        if self.end is not None and moment >= self.end:
            return self._from_start(self.inner.latest_before(self.end))
        return self._from_start(self.inner.latest_at(moment))

    def latest_before(self, moment: float) -> float | None:
        bound = moment if self.end is None else min(moment, self.end)
        return self._from_start(self.inner.latest_before(bound))

    def _from_start(self, tick: float | None) -> float | None:
        return None if tick is None or (self.start is not None and tick < self.start) else tick

    def describe(self) -> str:
        shown = self.inner.describe()
        if self.end is not None:
            shown += f" until {_iso(self.end)}"
        return shown

    @property
    def zone_name(self) -> str:
        return self.inner.zone_name


@dataclass(frozen=True)
class Once:
    """One tick, at ``at`` (epoch seconds); ``zone`` is where it is shown."""

    at: float
    zone: str = "UTC"

    def next_after(self, moment: float) -> float | None:
        return self.at if moment < self.at else None

    def latest_at(self, moment: float) -> float | None:
        return self.at if self.at <= moment else None

    def latest_before(self, moment: float) -> float | None:
        return self.at if self.at < moment else None

    def describe(self) -> str:
        return f"once at {_iso(self.at)}"

    @property
    def zone_name(self) -> str:
        return self.zone


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
