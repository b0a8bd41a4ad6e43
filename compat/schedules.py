"""``celery.schedules``: ``schedule``, ``crontab`` and ``solar``, read the way Celery reads them.

Each schedule a ``beat_schedule`` entry or ``add_periodic_task`` names becomes a
trigger of jobbridge's scheduler (`jobbridge.scheduling`): a crontab becomes a
`Cron` whose two day fields must both match (Celery's rule, not cron's), read
in the app's time zone; an interval becomes a fixed grid (`Every`), so that
every scheduler on every host computes the same ticks.

A crontab field is read with Celery's grammar and Celery's quirks: ``*/15``,
``1-5``, ``1-10/3``, wrapping ranges (``fri-mon``), lists, names by their
first three letters (``mon``, ``monday``, ``jan``), an int or a set of ints.
What Celery refuses is refused (``5/15``, a day of week of 7, a day that no
month of the expression has), with the field named. ``remaining_estimate``,
``is_due`` and ``now`` answer as Celery's do, for code that calls them; the
scheduler itself judges ticks by the store's clock.

``solar`` is refused when a scheduler would run it, with the reason; it still
constructs, so a settings module that builds one imports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, NamedTuple

from jobbridge.scheduling import cron_fields
from jobbridge.scheduling.cron import Cron, zone
from jobbridge.scheduling.cron_fields import CronFieldError, FieldSpec
from jobbridge.scheduling.triggers import Every, Trigger

from .exceptions import RefusedFeature

_MONTHS = {name: i + 1 for i, name in enumerate(cron_fields.MONTHS)}
_DAYS = {name: i for i, name in enumerate(cron_fields.DAYS)}
_WORD = re.compile(r"[A-Za-z]+")
_STEP_WITHOUT_RANGE = re.compile(r"^\s*\d+\s*/")
#: the most days each month can have (February's 29 counts), for Celery's "no such date" check
_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


class InvalidCrontab(CronFieldError, ValueError):
    """A crontab field Celery would refuse (Celery raises ValueError): the field is named."""


class schedstate(NamedTuple):
    """What ``is_due`` returns: whether the entry is due, and seconds until it should be looked at again."""

    is_due: bool
    next: float


class BaseSchedule:
    """What every schedule shares: ``nowfun`` and ``app`` (for ``now()`` and the time zone).

    A base whose kinds (`schedule`, `crontab`, `solar`) each say how they fire (`trigger`) and
    answer Celery's own questions (`remaining_estimate`, `is_due`). Not an ``abc.ABC``: Celery's
    own ``BaseSchedule`` is concrete and raises NotImplementedError here, and other libraries
    subclass it defining only some of these (django-celery-beat's ``clocked`` has no `trigger`);
    an abstract base would make those classes impossible to instantiate."""

    def __init__(self, nowfun: Callable[[], datetime] | None = None, app: Any = None) -> None:
        self.nowfun = nowfun
        self.app = app

    def now(self) -> datetime:
        """``nowfun()``, else the app's ``now()``, else the current time in UTC."""
        if self.nowfun is not None:
            return self.nowfun()
        if self.app is not None:
            return self.app.now()  # type: ignore[no-any-return]
        return datetime.now(UTC)

    def zone_of(self, app: Any = None) -> tzinfo:
        """The zone this schedule is read in: the app's timezone setting, else UTC."""
        chosen = self.app or app
        name = chosen.conf["timezone"] if chosen is not None else None
        if isinstance(name, tzinfo):
            return name
        return zone(str(name) if name else None, "timezone")

    def trigger(self, tz: str, relative: bool = False) -> Trigger:
        """The jobbridge trigger this schedule fires on, its local times read in ``tz``."""
        raise NotImplementedError(f"{type(self).__name__} defines no trigger()")

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        """How long after ``last_run_at`` the next run is, from now (Celery's ``remaining_estimate``)."""
        raise NotImplementedError(f"{type(self).__name__} defines no remaining_estimate()")

    def is_due(self, last_run_at: datetime) -> schedstate:
        """Whether a run is due now and the seconds until the next look (Celery's ``is_due``)."""
        raise NotImplementedError(f"{type(self).__name__} defines no is_due()")

    def _aware(self, moment: datetime) -> datetime:
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=self.zone_of())


class schedule(BaseSchedule):
    """An interval: ``schedule(run_every=30)`` or ``schedule(timedelta(minutes=5))``.

    The scheduler fires it on a grid anchored at the Unix epoch (every 30 s at :00
    and :30), whichever scheduler looks and whenever it started; ``relative=True``
    asks for that rounding in Celery, and is what every interval does here.
    """

    def __init__(self, run_every: float | timedelta | None = None, relative: bool = False,
                 nowfun: Callable[[], datetime] | None = None, app: Any = None) -> None:
        self.run_every = _interval(run_every)
        self.relative = relative
        super().__init__(nowfun=nowfun, app=app)

    @property
    def seconds(self) -> float:
        return max(self.run_every.total_seconds(), 0.0)

    @property
    def human_seconds(self) -> str:
        return f"{self.seconds:g} seconds"

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        """Celery's answer: ``last_run_at + run_every - now``."""
        return self._aware(last_run_at) + self.run_every - self._aware(self.now())

    def is_due(self, last_run_at: datetime) -> schedstate:
        remaining = max(self.remaining_estimate(last_run_at).total_seconds(), 0.0)
        return schedstate(True, self.seconds) if remaining == 0 else schedstate(False, remaining)

    def trigger(self, tz: str, relative: bool = False) -> Trigger:
        seconds = self.seconds
        if (relative or self.relative) and seconds == 86400 and tz != "UTC":
            return Cron.of(minute=0, hour=0, days="both", tz=tz)  # a day rounded to the day: local midnight
        return Every.of(seconds)

    def __repr__(self) -> str:
        return f"<freq: {self.human_seconds}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, schedule) and not isinstance(other, crontab):
            return self.run_every == other.run_every
        return self.run_every == other

    __hash__ = None  # type: ignore[assignment]


class crontab(BaseSchedule):
    """A crontab: minute, hour, day of week, day of month and month, as Celery takes them.

    A day must match ``day_of_week``, ``day_of_month`` *and* ``month_of_year`` (Celery's
    rule; cron fires when either day field matches).
    """

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*", day_of_month: Any = "*",
                 month_of_year: Any = "*", nowfun: Callable[[], datetime] | None = None, app: Any = None) -> None:
        self._orig_minute, self._orig_hour, self._orig_day_of_week = minute, hour, day_of_week
        self._orig_day_of_month, self._orig_month_of_year = day_of_month, month_of_year
        try:
            self.minute = _field(cron_fields.MINUTE, minute)
            self.hour = _field(cron_fields.HOUR, hour)
            self.day_of_week = _field(cron_fields.DAY_OF_WEEK, day_of_week)
            self.day_of_month = _field(cron_fields.DAY_OF_MONTH, day_of_month)
            self.month_of_year = _field(cron_fields.MONTH_OF_YEAR, month_of_year)
        except CronFieldError as exc:
            raise InvalidCrontab(exc.field, exc.why) from None
        if not any(day <= _DAYS_IN_MONTH[month] for month in self.month_of_year for day in self.day_of_month):
            raise InvalidCrontab("day_of_month", f"no day of {_shown(day_of_month)} exists in month_of_year "
                                 f"{_shown(month_of_year)}, so the crontab would never fire")
        super().__init__(nowfun=nowfun, app=app)

    @classmethod
    def from_string(cls, crontab: str) -> crontab:
        """Five fields, cron's order: ``"*/5 9-17 * * mon-fri"``."""
        parts = crontab.split(" ")
        if len(parts) != 5:
            raise InvalidCrontab("expression", f"needs five fields separated by single spaces, not {len(parts)}")
        minute, hour, day_of_month, month_of_year, day_of_week = parts
        return cls(minute, hour, day_of_week, day_of_month, month_of_year)

    def trigger(self, tz: str, relative: bool = False) -> Cron:
        return Cron.of(minute=self.minute, hour=self.hour, day_of_month=self.day_of_month,
                       month_of_year=self.month_of_year, day_of_week=self.day_of_week, days="both", tz=tz,
                       expression=self._expression())

    def _expression(self) -> str:
        fields = (self._orig_minute, self._orig_hour, self._orig_day_of_month, self._orig_month_of_year,
                  self._orig_day_of_week)
        return " ".join(_shown(value).replace(" ", "") for value in fields)

    def next_run_after(self, moment: datetime) -> datetime | None:
        """The first run strictly after ``moment`` (naive: in the app's zone), as an aware datetime."""
        zone = self.zone_of()
        found = self.trigger(_zone_name(zone)).next_after(self._aware(moment).timestamp())
        return None if found is None else datetime.fromtimestamp(found, zone)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        """Celery's answer: the next run after ``last_run_at``, less now (negative when it is overdue)."""
        following = self.next_run_after(last_run_at)
        if following is None:
            return timedelta.max
        return following - self._aware(self.now())

    def is_due(self, last_run_at: datetime) -> schedstate:
        remaining = self.remaining_estimate(last_run_at).total_seconds()
        if remaining > 0:
            return schedstate(False, remaining)
        following = self.remaining_estimate(self.now()).total_seconds()
        return schedstate(True, max(following, 0.0))

    def __repr__(self) -> str:
        return (f"<crontab: {_shown(self._orig_minute)} {_shown(self._orig_hour)} "
                f"{_shown(self._orig_day_of_week)} {_shown(self._orig_day_of_month)} "
                f"{_shown(self._orig_month_of_year)} (m/h/dM/MY/d)>")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, crontab):
            return NotImplemented
        return (self.minute, self.hour, self.day_of_week, self.day_of_month, self.month_of_year) == (
            other.minute, other.hour, other.day_of_week, other.day_of_month, other.month_of_year)

    __hash__ = None  # type: ignore[assignment]


_SOLAR_EVENTS = ("dawn_astronomical", "dawn_nautical", "dawn_civil", "sunrise", "solar_noon", "sunset",
                 "dusk_civil", "dusk_nautical", "dusk_astronomical")
SOLAR_REFUSED = ("solar schedules are not provided: a sun event's time comes from an astronomy library whose "
                 "answers may differ between hosts and versions, and every scheduler must compute the same "
                 "ticks to fire each once. Write a crontab at the local time the task should run instead "
                 "(crontab(hour=7, minute=30)), or a frequent entry whose task checks the sun itself")


class solar(BaseSchedule):
    """A sun event at a place: constructs (a settings module that builds one imports), refused at the entry."""

    def __init__(self, event: str, lat: float, lon: float, nowfun: Callable[[], datetime] | None = None,
                 app: Any = None) -> None:
        if event not in _SOLAR_EVENTS:
            raise ValueError(f"solar event {event!r} is not one of {', '.join(_SOLAR_EVENTS)}")
        self.event, self.lat, self.lon = event, lat, lon
        super().__init__(nowfun=nowfun, app=app)

    def trigger(self, tz: str, relative: bool = False) -> Trigger:
        raise RefusedFeature(SOLAR_REFUSED)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        raise RefusedFeature(SOLAR_REFUSED)

    def is_due(self, last_run_at: datetime) -> schedstate:
        raise RefusedFeature(SOLAR_REFUSED)

    def __repr__(self) -> str:
        return f"<solar: {self.event} at latitude {self.lat}, longitude: {self.lon}>"


def maybe_schedule(s: Any, relative: bool = False, app: Any = None) -> Any:
    """A number or timedelta as a `schedule`; a schedule as it is (bound to ``app``)."""
    if s is None:
        return None
    if isinstance(s, int | float | timedelta) and not isinstance(s, bool):
        return schedule(s, relative, app=app)
    if app is not None and isinstance(s, BaseSchedule):
        s.app = app
    return s


# -- reading the fields -------------------------------------------------------------------------

def _interval(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise TypeError(f"run_every must be a number of seconds or a timedelta, not {type(value).__name__}")


def _field(spec: FieldSpec, given: Any) -> frozenset[int]:
    """One field as Celery reads it: a string (its grammar), an int, or a set or list of ints."""
    if isinstance(given, bool):
        raise CronFieldError(spec.name, "must be a crontab string, a whole number or a set of them, not a bool")
    if isinstance(given, int):
        return frozenset(_checked(spec, [given]))
    if isinstance(given, str):
        return _parsed(spec, given)
    if isinstance(given, Iterable):
        items = list(given)
        if not items or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
            raise CronFieldError(spec.name, "a set or list must hold whole numbers, at least one")
        return frozenset(_checked(spec, items))
    raise CronFieldError(spec.name, f"must be a crontab string, a whole number or a set of them, not "
                                    f"{type(given).__name__}")


def _checked(spec: FieldSpec, values: list[int]) -> list[int]:
    for value in values:
        if not spec.low <= value <= spec.high:
            raise CronFieldError(spec.name, f"{value} is outside {spec.low}-{spec.high}")
    return values


def _parsed(spec: FieldSpec, text: str) -> frozenset[int]:
    """Celery's grammar: each item ``*``, ``a``, ``a-b``, ``*/n`` or ``a-b/n``; a name is a number."""
    for item in text.split(","):
        if _STEP_WITHOUT_RANGE.match(item):
            raise CronFieldError(spec.name, f"{item.strip()!r}: a step needs a range before it; write "
                                            f"'{item.strip().split('/')[0]}-{spec.high}/{item.split('/')[1]}'")
    numeric = _WORD.sub(lambda word: str(_named(spec, word.group())), text)
    found = cron_fields.parse(spec, numeric)
    ends = [number for item in numeric.split(",") for number in re.findall(r"\d+", item.split("/")[0])]
    if spec.name == "day_of_week" and "7" in ends:
        raise CronFieldError(spec.name, "7 is outside 0-6 (Sunday is 0)")
    return found


def _named(spec: FieldSpec, word: str) -> int:
    """A name as Celery reads it, by its first three letters: a month first, else a day of the week."""
    key = word[:3].lower()
    if key in _MONTHS:
        return _MONTHS[key]
    if key in _DAYS:
        return _DAYS[key]
    raise CronFieldError(spec.name, f"{word[:20]!r} is neither a number nor a day or month name")


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in sorted(value))
    return repr(value)


def _zone_name(zone: tzinfo) -> str:
    """A zone's IANA name, which the core's triggers take; UTC for a fixed UTC zone."""
    key = getattr(zone, "key", None)
    if isinstance(key, str):
        return key
    if zone.utcoffset(datetime(2000, 1, 1)) == timedelta(0) and zone.utcoffset(datetime(2000, 7, 1)) == timedelta(0):
        return "UTC"
    raise CronFieldError("timezone", f"{zone!r} has no IANA name; set the timezone setting to one "
                                     "('Europe/Berlin'), which every scheduler reads the same way")


def zone_name(zone: tzinfo) -> str:
    """The IANA name of the zone a schedule is read in (what `jobbridge.scheduling` takes)."""
    return _zone_name(zone)


__all__ = ["SOLAR_REFUSED", "BaseSchedule", "InvalidCrontab", "crontab", "maybe_schedule", "schedstate", "schedule",
           "solar", "zone_name"]
