"""When an entry fires: `Every` (a fixed grid of instants) or `Cron` (local times in a zone).

A trigger is a pure function of time: the ticks it names do not depend on when
a scheduler started or how often it looks, so every scheduler, on every host,
computes the same instants, and the store can tell one tick from the next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.cron import Cron

#: the shortest ``every``: each tick costs a store round trip per scheduler that sees it
MIN_EVERY = 1.0


class Trigger(Protocol):
    """The ticks of an entry, as epoch seconds."""

    def next_after(self, moment: float) -> float | None:
        """The first tick strictly after ``moment``; None if there is none."""
        ...

    def latest_at(self, moment: float) -> float | None:
        """The last tick at or before ``moment``; None if there is none."""
        ...

    def latest_before(self, moment: float) -> float | None:
        """The last tick strictly before ``moment``."""
        ...

    def describe(self) -> str:
        """The trigger as ``jobbridge schedules`` shows it."""
        ...

    @property
    def zone_name(self) -> str:
        """The time zone its ticks are read in."""
        ...


@dataclass(frozen=True)
class Every:
    """Every ``seconds``, on the grid ``k * seconds`` from the Unix epoch (UTC).

    Anchored at the epoch, not at a scheduler's start: ``every=3600`` fires on the hour,
    ``every=86400`` at midnight UTC, whichever scheduler looks and whenever it started.
    """

    seconds: float

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) \
                or not math.isfinite(self.seconds) or self.seconds < MIN_EVERY:
            raise ConfigurationError(f"every: must be a number of seconds (or a timedelta) of at least "
                                     f"{MIN_EVERY:g}, not {self.seconds!r:.40}")

    @classmethod
    def of(cls, value: object) -> Every:
        if isinstance(value, timedelta):
            return cls(value.total_seconds())
        return cls(value)  # type: ignore[arg-type]  # __post_init__ refuses what is not a number

    def next_after(self, moment: float) -> float:
        tick = float((math.floor(moment / self.seconds) + 1) * self.seconds)
        return tick if tick > moment else tick + self.seconds

    def latest_at(self, moment: float) -> float:
        tick = float(math.floor(moment / self.seconds) * self.seconds)
        return tick if tick <= moment else tick - self.seconds

    def latest_before(self, moment: float) -> float:
        tick = self.latest_at(moment)
        return tick if tick < moment else tick - self.seconds

    def describe(self) -> str:
        return f"every {self.seconds:g}s"

    @property
    def zone_name(self) -> str:
        return "UTC"


def trigger_of(every: object = None, cron: object = None, tz: str | None = None,
               default_tz: str | None = None) -> Trigger:
    """The trigger for an entry's ``every=`` or ``cron=`` (exactly one).

    A cron is read in its own zone, else ``tz`` (the entry's), else ``default_tz`` (the
    ``timezone`` setting), else UTC.
    """
    if (every is None) == (cron is None):
        raise ConfigurationError("give every= (seconds or a timedelta) or cron= (five crontab fields), "
                                 "exactly one")
    if every is not None:
        if tz is not None:
            raise ConfigurationError("tz: an every= grid is instants, the same in every zone; tz applies "
                                     "to cron= only")
        return Every.of(every)
    if isinstance(cron, Cron):
        return cron.in_zone(tz).in_zone(default_tz)
    if isinstance(cron, str):
        return Cron.parse(cron, tz=tz or default_tz)
    raise ConfigurationError(f"cron: must be five crontab fields as a string (\"0 3 * * *\") or a Cron, "
                             f"not {type(cron).__name__}")
