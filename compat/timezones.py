"""``celery.utils.time``: the time-zone and interval helpers real code imports from Celery.

django-celery-beat's models and schedulers call ``maybe_make_aware``; task modules
and settings call ``timezone.get_timezone``, ``get_exponential_backoff_interval``
and ``remaining``. Each behaves as Celery documents it, on the standard library's
zoneinfo: a naive datetime is taken as UTC unless told otherwise, and a wall
time that a clock change skips is moved forward past the gap rather than kept as
a time that never happens.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

#: Celery's UTC is the IANA zone, so a datetime made aware here compares and prints as Celery's does
UTC = ZoneInfo("UTC")

_WEEKDAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_RATE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


class _Zone:
    """``celery.utils.time.timezone``: UTC, the system's zone, and zones by name."""

    @property
    def utc(self) -> tzinfo:
        return UTC

    @property
    def local(self) -> tzinfo:
        found = datetime.now().astimezone().tzinfo
        return found if found is not None else UTC

    def get_timezone(self, zone: str | tzinfo) -> tzinfo:
        """A zone by IANA name (``"Europe/Paris"``); a tzinfo is returned as it is."""
        return ZoneInfo(zone) if isinstance(zone, str) else zone

    def tz_or_local(self, tzinfo: str | tzinfo | None = None) -> tzinfo:
        return self.local if tzinfo is None else self.get_timezone(tzinfo)

    def to_local(self, dt: datetime, local: str | tzinfo | None = None,
                 orig: str | tzinfo | None = None) -> datetime:
        """``dt`` in ``local`` (the system's zone by default); a naive one is taken to be in ``orig`` (UTC)."""
        if is_naive(dt):
            dt = make_aware(dt, self.get_timezone(orig) if orig is not None else UTC)
        return dt.astimezone(self.tz_or_local(local))

    def to_system(self, dt: datetime) -> datetime:
        return dt.astimezone(self.local)

    def to_local_fallback(self, dt: datetime) -> datetime:
        return make_aware(dt, self.local) if is_naive(dt) else dt.astimezone(self.local)


timezone = _Zone()


def is_naive(dt: datetime) -> bool:
    """True when ``dt`` carries no offset."""
    return dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None


def make_aware(dt: datetime, tz: tzinfo) -> datetime:
    """``dt``'s wall time in ``tz``: of two that happen (clocks back), the earlier; one skipped, past the gap."""
    aware = dt.replace(tzinfo=tz, fold=0)
    later = aware.replace(fold=1)
    if aware.utcoffset() == later.utcoffset():
        return aware
    round_trip = aware.astimezone(UTC).astimezone(tz)
    if round_trip.replace(tzinfo=None) != dt.replace(tzinfo=None, fold=0):  # a skipped wall time
        return round_trip  # the same instant, shown past the gap
    return min(aware, later)


def localize(dt: datetime, tz: tzinfo) -> datetime:
    """``dt`` in ``tz``: a naive one gets ``tz`` as its zone, one in UTC is converted, any other kept (as Celery)."""
    if is_naive(dt):
        dt = make_aware(dt, tz)
    return dt.astimezone(tz) if dt.tzinfo == UTC else dt


def to_utc(dt: datetime) -> datetime:
    """A naive ``dt`` marked as UTC (its wall time unchanged)."""
    return make_aware(dt, UTC)


def maybe_make_aware(dt: datetime, tz: str | tzinfo | None = None, naive_as_utc: bool = True) -> datetime:
    """``dt`` made aware if it is naive (as UTC, then shown in ``tz``; or, with ``naive_as_utc=False``, in ``tz``)."""
    if not is_naive(dt):
        return dt
    zone = UTC if tz is None else timezone.tz_or_local(tz)
    return localize(to_utc(dt) if naive_as_utc else dt, zone)


def maybe_timedelta(delta: float | timedelta) -> timedelta:
    """Seconds as a timedelta; a timedelta as it is."""
    return delta if isinstance(delta, timedelta) else timedelta(seconds=delta)


def maybe_iso8601(dt: datetime | str | None) -> datetime | None:
    """An ISO 8601 string parsed; a datetime as it is; nothing as None."""
    if not dt:
        return None
    return dt if isinstance(dt, datetime) else datetime.fromisoformat(dt)


def remaining(start: datetime, ends_in: timedelta, now: datetime | None = None,
              relative: bool = False) -> timedelta:
    """How long is left of ``ends_in`` counted from ``start``, at ``now`` (negative once it is over)."""
    now = now or datetime.now(UTC)
    if is_naive(start) != is_naive(now):
        start, now = maybe_make_aware(start), maybe_make_aware(now)
    end = start + ends_in
    if relative:
        end = _rounded(end, ends_in)
    return end - now


def _rounded(dt: datetime, delta: timedelta) -> datetime:
    """``dt`` cut to the resolution of ``delta`` (days, hours or minutes), as Celery's relative schedules."""
    seconds = delta.total_seconds()
    if seconds >= 86400:
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if seconds >= 3600:
        return dt.replace(minute=0, second=0, microsecond=0)
    if seconds >= 60:
        return dt.replace(second=0, microsecond=0)
    return dt


def get_exponential_backoff_interval(factor: float, retries: int, maximum: float,
                                     full_jitter: bool = False) -> float:
    """``factor * 2 ** retries`` seconds, at most ``maximum``; with ``full_jitter`` a random part of that."""
    countdown: float = min(maximum, factor * (2 ** retries))
    if full_jitter:
        countdown = random.randrange(int(countdown) + 1)
    return max(0, countdown)


def rate(r: str | float | None) -> float:
    """A rate string (``"100/m"``, ``"2/h"``, ``"0.5/s"``, ``"10"`` per second) as events per second."""
    if not r:
        return 0.0
    if not isinstance(r, str):
        return float(r)
    count, _, unit = r.partition("/")
    if (unit or "s") not in _RATE_UNITS:
        raise ValueError(f"rate {r!r}: the unit must be s, m or h (for example '10/m')")
    return float(count) / _RATE_UNITS[unit or "s"]


def weekday(name: str) -> int:
    """The position of a weekday, 0 (Sunday) to 6, from its name or its first three letters."""
    try:
        return _WEEKDAYS[name[:3].lower()]
    except KeyError:
        raise KeyError(name) from None


def utcoffset() -> int:
    """This host's offset from UTC in whole hours, positive west of Greenwich (the sign Celery's events use)."""
    offset = datetime.now().astimezone().utcoffset() or timedelta()
    return int(-offset.total_seconds() // 3600)


__all__ = ["get_exponential_backoff_interval", "is_naive", "localize", "make_aware", "maybe_iso8601",
           "maybe_make_aware", "maybe_timedelta", "rate", "remaining", "timezone", "to_utc", "utcoffset",
           "weekday"]
