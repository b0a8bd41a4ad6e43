"""A schedule entry: a stable name, how to build its job's envelope, a trigger, and what to do with missed ticks.

The entry's name is the key the store keeps its last fired tick under, so it
must never change (renaming an entry starts it afresh). Everything else may
change between deploys: the store only compares ticks.

Missed ticks (every scheduler was down across several) follow ``catch_up``:

- ``"latest"`` (the default): the most recent missed tick fires once, then the grid resumes;
- ``"none"``: missed ticks are skipped; only a tick that is on time fires;
- ``"all"``: every missed tick fires, oldest first, at most `CATCH_UP_LIMIT` of them
  (the most recent ones), so a scheduler back after a month does not flood the queue.

A tick is *on time* while it is less than `ON_TIME` seconds old, or half a
period for an entry that fires more often than every two minutes: a running
scheduler fires a tick within milliseconds, so a tick older than that was missed. A new entry (no tick stored yet) fires
from its first on-time tick: deploying a nightly job at noon runs it that
night, not at once; unless it says ``first_fires_late`` (a one-off entry, whose
one tick is wanted whenever a scheduler first sees it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from jobbridge import limits
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.triggers import Trigger

CatchUp = Literal["latest", "none", "all"]
CATCH_UPS: tuple[CatchUp, ...] = ("latest", "none", "all")
#: at most this many missed ticks fire under catch_up="all" (the most recent ones)
CATCH_UP_LIMIT = 100
#: a tick this many seconds old (or half a period old, if that is less) is no longer on time
ON_TIME = 60.0
#: the headers a scheduled job carries: its entry's name, and its tick (epoch seconds)
SCHEDULE_HEADER = "jobbridge.schedule"
TICK_HEADER = "jobbridge.tick"
#: set (true) on a job fired by hand (`jobbridge schedules run`), whose tick is not the grid's
MANUAL_HEADER = "jobbridge.manual"

#: ``expires``: seconds after the tick, or "next": until the entry's next tick
Expires = float | Literal["next"] | None


@dataclass(frozen=True, slots=True)
class Tick:
    """One firing of an entry, as an envelope factory sees it."""

    entry: str
    at: float
    manual: bool = False


#: builds a tick's envelope (the Celery facade passes its own; `jobbridge.scheduling.book` builds one for a job)
EnvelopeFactory = Callable[[Tick], Envelope]


@dataclass(frozen=True, slots=True)
class Step:
    """One tick a scheduler hands the store: fired with a job (``push``), or recorded as skipped."""

    tick: float
    push: bool


@dataclass(frozen=True)
class Entry:
    """One periodic job. ``job`` is its job's stable name (what ``jobbridge schedules`` shows)."""

    name: str
    trigger: Trigger
    build: EnvelopeFactory
    job: str
    connection: str | None = None
    catch_up: CatchUp = "latest"
    expires: Expires = None
    #: fire the first tick (none stored yet) even when it is no longer on time: a one-off entry's one
    #: tick is wanted however late a scheduler first sees it, not only within its minute
    first_fires_late: bool = False

    def __post_init__(self) -> None:
        try:
            limits.name("name", self.name)
        except limits.FieldRefused:
            raise ConfigurationError(f"schedule {self.name!r:.60}: name: must be a non-empty string of at most "
                                     f"{limits.MAX_NAME_LENGTH} characters") from None
        if self.catch_up not in CATCH_UPS:
            raise ConfigurationError(f"schedule {self.name!r}: catch_up: must be one of "
                                     f"{', '.join(CATCH_UPS)}, not {self.catch_up!r:.40}")
        object.__setattr__(self, "expires", expires_of(self.expires, self.name))

    def envelope(self, tick: Tick, shift: float = 0.0, early: float = 0.0) -> Envelope:
        """The tick's job: the factory's envelope with the schedule headers and the tick's expiry.

        ``shift`` places a time read off the store's clock on this process's clock (dispatch
        times are the dispatcher's: `Envelope.available_at`, `Envelope.expires_at`). ``early``:
        built that many seconds before the tick (`jobbridge.scheduling.ahead`), so the times the
        factory read off the clock move forward by as much, to what they would be had the job
        been built at its tick: created then, available then, expiring as long after.
        """
        env = self.build(tick)
        headers = {**env.headers, SCHEDULE_HEADER: self.name, TICK_HEADER: tick.at}
        if tick.manual:
            headers[MANUAL_HEADER] = True
        expires_at = self.expires_at(tick.at)
        if expires_at is not None:
            expires_at -= shift
        elif env.expires_at is not None:
            expires_at = env.expires_at + early
        return env.replace(headers=headers, expires_at=expires_at, created_at=env.created_at + early,
                           available_at=env.available_at + early).checked()

    def expires_at(self, tick: float) -> float | None:
        """When the job of ``tick`` is dropped unrun if no worker started it (store clock)."""
        if self.expires is None:
            return None
        if self.expires == "next":
            return self.trigger.next_after(tick)
        return tick + self.expires

    def grace(self, tick: float) -> float:
        """How long ``tick`` stays on time: `ON_TIME`, or half a period when that is less."""
        following = self.trigger.next_after(tick)
        return ON_TIME if following is None else min(ON_TIME, (following - tick) / 2)

    def plan(self, last: float | None, now: float) -> list[Step]:
        """The ticks to hand the store now, oldest first, given the stored ``last`` tick (None: never)."""
        due = self.trigger.latest_at(now)
        if due is None or (last is not None and due <= last):
            return []
        on_time = now - due < self.grace(due)
        if last is None or self.catch_up == "none":
            steps = [Step(due, on_time or (last is None and self.first_fires_late))]
        elif self.catch_up == "latest":
            steps = [Step(due, True)]
        else:
            steps = [Step(tick, True) for tick in self.missed(last, due)]
        return [self._unless_expired(step, now) for step in steps]

    def _unless_expired(self, step: Step, now: float) -> Step:
        """A late tick whose job would expire before any worker could start it is recorded, not pushed."""
        expires_at = self.expires_at(step.tick) if step.push else None
        return Step(step.tick, False) if expires_at is not None and expires_at <= now else step

    def missed(self, last: float, due: float) -> list[float]:
        """The ticks after ``last`` up to ``due``, oldest first: at most `CATCH_UP_LIMIT`, the latest ones."""
        ticks = [due]
        while len(ticks) < CATCH_UP_LIMIT:
            earlier = self.trigger.latest_before(ticks[-1])
            if earlier is None or earlier <= last:
                break
            ticks.append(earlier)
        return ticks[::-1]


def expires_of(value: object, entry: str) -> Expires:
    """``expires``: seconds (or a timedelta) after the tick, ``"next"``, or None."""
    if value is None or value == "next":
        return None if value is None else "next"
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise ConfigurationError(f"schedule {entry!r}: expires: must be a positive number of seconds, a "
                                 f"timedelta, or \"next\" (until the next tick), not {value!r:.40}")
    return float(seconds)
