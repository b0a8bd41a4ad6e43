"""`Cron`: the ticks of a crontab expression in a time zone, with one rule for each DST transition.

The fields match *local* times (wall clock minutes) in the zone; a tick is the
instant such a local time happens. Two local times need a rule, because they
are not one instant each:

- one that does not exist (the hour skipped when clocks go forward: 02:30 on
  the last Sunday of March in Berlin) fires at the first instant after the
  gap (03:00 local), once however many matching local times fell in the gap;
- one that happens twice (the hour repeated when clocks go back) fires once,
  at its first occurrence.

So a daily 02:30 job runs every day of the year, once, and an hourly one runs
at most once per local hour. Every scheduler computes the same instants from
the same expression, which is what lets the store tell one tick from the next.

Why not a library: croniter fires a repeated local time twice at fall-back,
the libraries' time-zone handling differs from the rule above, and the Celery
facade needs value sets and Celery's rule for the two day fields (both must
match), which a five-field string alone cannot say. The search is small: walk
matching local times forward (or back) from a start, and map each to its
instant; that map never decreases, so the first instant past the start is the
answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobbridge.errors import ConfigurationError
from jobbridge.scheduling import cron_fields
from jobbridge.scheduling.cron_fields import SPECS, CronFieldError

DayRule = Literal["either", "both"]
FieldValues = str | int | Iterable[int] | None
#: how far the search looks for a matching day (30 years: a 29 February that is also a Monday
#: comes round every 28 years at worst); an expression matching no day in that span never fires
SEARCH_DAYS = 366 * 30
#: a local time read off an instant in a repeated hour may sit up to this far before later local
#: times that still map to earlier instants (no zone has moved its clocks back by more)
FOLD_REACH = 3 * 3600.0
_MINUTE = timedelta(minutes=1)


def zone(name: str | None, field: str = "tz") -> tzinfo:
    """The time zone called ``name`` (None or "UTC": UTC); an unknown name fails naming ``field``."""
    if name is None or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"{field}: {name[:60]!r} is not a time zone name; use an IANA name such as "
            "'Europe/Berlin', 'America/New_York' or 'UTC'") from None


@dataclass(frozen=True)
class Cron:
    """A crontab trigger: minute, hour, day of month, month, day of week, each a set of values.

    ``days``: when both day fields are restricted, ``"either"`` (cron's rule) fires on a day
    that matches one of them, ``"both"`` (Celery's) only on a day that matches both.
    ``tz``: the zone the fields are read in; None leaves it to the entry (its ``tz``, else the
    ``timezone`` setting, else UTC).
    """

    minute: frozenset[int]
    hour: frozenset[int]
    day_of_month: frozenset[int]
    month_of_year: frozenset[int]
    day_of_week: frozenset[int]
    days: DayRule = "either"
    tz: str | None = None
    expression: str = ""
    #: the day fields as written: unrestricted (``*``) or not
    any_day_of_month: bool = True
    any_day_of_week: bool = True
    _zone: tzinfo = field(init=False, repr=False, compare=False)
    _minutes: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _hours: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_zone", zone(self.tz))
        object.__setattr__(self, "_minutes", tuple(sorted(self.minute)))
        object.__setattr__(self, "_hours", tuple(sorted(self.hour)))
        if self.days not in ("either", "both"):
            raise CronFieldError("days", f"must be 'either' or 'both', not {self.days!r}")

    @classmethod
    def parse(cls, expression: str, *, tz: str | None = None) -> Cron:
        """Five fields, ``minute hour day_of_month month day_of_week``: ``"*/15 9-17 * * mon-fri"``."""
        parts = expression.split() if isinstance(expression, str) else []
        if len(parts) != 5:
            raise CronFieldError("expression", f"needs five fields (minute hour day month weekday), "
                                               f"not {len(parts)}")
        minute, hour, day_of_month, month_of_year, day_of_week = parts
        return cls.of(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year,
                      day_of_week=day_of_week, tz=tz, expression=expression)

    @classmethod
    def of(cls, *, minute: FieldValues = None, hour: FieldValues = None, day_of_month: FieldValues = None,
           month_of_year: FieldValues = None, day_of_week: FieldValues = None, days: DayRule = "either",
           tz: str | None = None, expression: str = "") -> Cron:
        """Each field as text, one value or a set of values; None (not given) is ``*``."""
        given = (minute, hour, day_of_month, month_of_year, day_of_week)
        (mi, _), (ho, _), (dom, any_dom), (mo, _), (dow, any_dow) = (
            cron_fields.values(spec, value) for spec, value in zip(SPECS, given, strict=True))
        shown = expression or " ".join(_shown(value) for value in given)
        return cls(mi, ho, dom, mo, dow, days=days, tz=tz, expression=shown,
                   any_day_of_month=any_dom, any_day_of_week=any_dow)

    def in_zone(self, tz: str | None) -> Cron:
        """This trigger read in ``tz`` (its own ``tz`` wins when it has one)."""
        if self.tz is not None or tz is None:
            return self
        return Cron(self.minute, self.hour, self.day_of_month, self.month_of_year, self.day_of_week,
                    days=self.days, tz=tz, expression=self.expression,
                    any_day_of_month=self.any_day_of_month, any_day_of_week=self.any_day_of_week)

    def describe(self) -> str:
        return f"cron {self.expression}" + (" (both day fields must match)" if self.days == "both" else "")

    @property
    def zone_name(self) -> str:
        return self.tz or "UTC"

    # -- the ticks -------------------------------------------------------------------------------

    def next_after(self, moment: float) -> float | None:
        """The first tick strictly after ``moment`` (epoch seconds), or None if it never fires again."""
        wall = _floor(datetime.fromtimestamp(moment, self._zone))
        while True:
            found = self._wall_at_or_after(wall)
            if found is None:
                return None
            at = self.instant(found)
            if at > moment:
                return at
            wall = found + _MINUTE  # a local time in a repeated hour, already passed

    def latest_at(self, moment: float) -> float | None:
        """The last tick at or before ``moment``, or None if there is none in the search span."""
        local = datetime.fromtimestamp(moment, self._zone)
        if local.fold:  # in a repeated hour: later local times may still map to earlier instants
            local = datetime.fromtimestamp(moment + FOLD_REACH, self._zone)
        wall = _floor(local)
        while True:
            found = self._wall_at_or_before(wall)
            if found is None:
                return None
            at = self.instant(found)
            if at <= moment:
                return at
            wall = found - _MINUTE

    def latest_before(self, moment: float) -> float | None:
        """The last tick strictly before ``moment`` (ticks are whole seconds)."""
        return self.latest_at(moment - 0.5)

    def instant(self, wall: datetime) -> float:
        """The instant of a local time: its first occurrence, or the end of the gap it falls in."""
        stamp = wall.replace(tzinfo=self._zone, fold=0).timestamp()
        if datetime.fromtimestamp(stamp, self._zone).replace(tzinfo=None) == wall:
            return stamp
        return self._gap_end(wall)

    def _gap_end(self, wall: datetime) -> float:
        """The first instant after the gap ``wall`` falls in: where the zone's offset changes."""
        before = int(wall.replace(tzinfo=self._zone, fold=1).timestamp())  # still the old offset
        after = int(wall.replace(tzinfo=self._zone, fold=0).timestamp())  # already the new one
        old = self._offset(before)
        while after - before > 1:
            middle = (before + after) // 2
            if self._offset(middle) == old:
                before = middle
            else:
                after = middle
        return float(after)

    def _offset(self, stamp: float) -> timedelta | None:
        return datetime.fromtimestamp(stamp, self._zone).utcoffset()

    # -- local times -----------------------------------------------------------------------------

    def _day_matches(self, day: date) -> bool:
        if day.month not in self.month_of_year:
            return False
        by_date = day.day in self.day_of_month
        by_weekday = day.isoweekday() % 7 in self.day_of_week
        if self.days == "either" and not (self.any_day_of_month or self.any_day_of_week):
            return by_date or by_weekday
        return by_date and by_weekday

    def _wall_at_or_after(self, wall: datetime) -> datetime | None:
        """The first matching local time at or after ``wall`` (naive, whole minutes)."""
        day: date | None = wall.date()
        start = wall.time()
        for _ in range(SEARCH_DAYS):
            if day is None:
                return None
            if self._day_matches(day):
                found = self._time_from(start)
                if found is not None:
                    return datetime.combine(day, found)
            day, start = _next_day(day, self.month_of_year), time(0, 0)
        return None

    def _wall_at_or_before(self, wall: datetime) -> datetime | None:
        """The last matching local time at or before ``wall`` (naive, whole minutes)."""
        day: date | None = wall.date()
        end = wall.time()
        for _ in range(SEARCH_DAYS):
            if day is None:
                return None
            if self._day_matches(day):
                found = self._time_until(end)
                if found is not None:
                    return datetime.combine(day, found)
            day, end = _previous_day(day, self.month_of_year), time(23, 59)
        return None

    def _time_from(self, start: time) -> time | None:
        """The first matching hour:minute at or after ``start`` within one day."""
        hours, minutes = self._hours, self._minutes
        for hour in hours[bisect.bisect_left(hours, start.hour):]:
            first = bisect.bisect_left(minutes, start.minute) if hour == start.hour else 0
            if first < len(minutes):
                return time(hour, minutes[first])
        return None

    def _time_until(self, end: time) -> time | None:
        """The last matching hour:minute at or before ``end`` within one day."""
        hours, minutes = self._hours, self._minutes
        for hour in reversed(hours[:bisect.bisect_right(hours, end.hour)]):
            last = bisect.bisect_right(minutes, end.minute) if hour == end.hour else len(minutes)
            if last > 0:
                return time(hour, minutes[last - 1])
        return None


def _floor(moment: datetime) -> datetime:
    """A local time as a naive datetime, to the minute."""
    return moment.replace(tzinfo=None, second=0, microsecond=0, fold=0)


def _next_day(day: date, months: frozenset[int]) -> date | None:
    """The next day, past any month that never matches (to the first of the next month that may)."""
    try:
        following = day + timedelta(days=1)
        for _ in range(12):
            if following.month in months:
                return following
            following = date(following.year + following.month // 12, following.month % 12 + 1, 1)
    except (OverflowError, ValueError):  # past the year 9999
        return None
    return following


def _previous_day(day: date, months: frozenset[int]) -> date | None:
    """The day before, past any month that never matches (to the last day of the one before that may)."""
    try:
        previous = day - timedelta(days=1)
        for _ in range(12):
            if previous.month in months:
                return previous
            previous = date(previous.year, previous.month, 1) - timedelta(days=1)
    except (OverflowError, ValueError):  # before the year 1
        return None
    return previous


def _shown(value: FieldValues) -> str:
    if value is None:
        return "*"
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int):
        return str(value)
    return ",".join(str(v) for v in sorted(value))
