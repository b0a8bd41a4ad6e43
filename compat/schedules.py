"""``celery.schedules``: the schedule types, so a settings module that builds them still imports.

jobbridge has no beat scheduler yet, so a non-empty ``beat_schedule`` is refused
when it is set, with what to write instead; these classes only hold their
arguments, so the error is that one, at the setting, and not an ImportError.
"""

from __future__ import annotations

from typing import Any


class schedule:
    """An interval schedule (``schedule(run_every=30)``), held, never run."""

    def __init__(self, run_every: Any = None, *args: Any, **kwargs: Any) -> None:
        self.run_every = run_every
        self.args, self.kwargs = args, kwargs

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.run_every!r}>"


class crontab(schedule):
    """A crontab schedule, held, never run."""

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*", day_of_month: Any = "*",
                 month_of_year: Any = "*", **kwargs: Any) -> None:
        super().__init__(None, **kwargs)
        self.minute, self.hour, self.day_of_week = minute, hour, day_of_week
        self.day_of_month, self.month_of_year = day_of_month, month_of_year

    def __repr__(self) -> str:
        fields = (self.minute, self.hour, self.day_of_week, self.day_of_month, self.month_of_year)
        return f"<crontab: {' '.join(map(str, fields))}>"


class solar(schedule):
    """A solar schedule, held, never run."""

    def __init__(self, event: str, lat: float, lon: float, **kwargs: Any) -> None:
        super().__init__(None, **kwargs)
        self.event, self.lat, self.lon = event, lat, lon
