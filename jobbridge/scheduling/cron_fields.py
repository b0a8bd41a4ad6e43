"""The five crontab fields as sets of values: ``*``, ``*/15``, ``1-5``, ``mon-fri``, ``1,15``, ``jan``.

A field is read into the set of values it matches, so a trigger built from a
string and one built from value sets (what the Celery facade's ``crontab``
expands to) are the same thing. Errors name the field and say what is wrong
with the item, so a boot error points at the character to fix.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobbridge.errors import ConfigurationError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FULL_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_FULL_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")


class CronFieldError(ConfigurationError):
    """One crontab field that cannot be read: ``field`` names it."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"cron field {field}: {why}")
        self.field = field
        self.why = why


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field's name, its range, and the names its values may be written as (index = value - low)."""

    name: str
    low: int
    high: int
    names: tuple[tuple[str, ...], ...] = ()

    def number(self, text: str) -> int:
        """One value written as a number or a name; a day of week of 7 is Sunday."""
        for names in self.names:
            if text in names:
                return names.index(text) + self.low
        if not text.isdigit():
            raise CronFieldError(self.name, f"{text[:20]!r} is not a number{self._named()}")
        value = int(text)
        if self.name == "day_of_week" and value == 7:
            return 0
        if not self.low <= value <= self.high:
            raise CronFieldError(self.name, f"{value} is outside {self.low}-{self.high}")
        return value

    def _named(self) -> str:
        return f" or a name ({', '.join(self.names[0][:3])}, ...)" if self.names else ""


MINUTE = FieldSpec("minute", 0, 59)
HOUR = FieldSpec("hour", 0, 23)
DAY_OF_MONTH = FieldSpec("day_of_month", 1, 31)
MONTH_OF_YEAR = FieldSpec("month_of_year", 1, 12, (MONTHS, _FULL_MONTHS))
DAY_OF_WEEK = FieldSpec("day_of_week", 0, 6, (DAYS, _FULL_DAYS))
#: in the order a five-field expression writes them
SPECS = (MINUTE, HOUR, DAY_OF_MONTH, MONTH_OF_YEAR, DAY_OF_WEEK)


def parse(spec: FieldSpec, text: str) -> frozenset[int]:
    """The values one field matches; a comma-separated list of ``*``, ``a``, ``a-b``, each with ``/step``."""
    values: set[int] = set()
    for item in text.strip().lower().split(","):
        values |= _item(spec, item.strip())
    return frozenset(values)


def _item(spec: FieldSpec, item: str) -> set[int]:
    if not item:
        raise CronFieldError(spec.name, "an empty item (two commas, or a comma at an end)")
    base, slash, step_text = item.partition("/")
    step = _step(spec, step_text) if slash else 1
    if base == "*":
        low, high = spec.low, spec.high
    elif "-" in base:
        first, _, last = base.partition("-")
        low, high = spec.number(first), spec.number(last)
    else:
        low = spec.number(base)
        high = spec.high if slash else low  # "5/15" is "5-59/15"
    return _expand(spec, low, high, step)


def _step(spec: FieldSpec, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise CronFieldError(spec.name, f"the step after '/' must be a whole number of at least 1, not {text[:20]!r}")
    return int(text)


def _expand(spec: FieldSpec, low: int, high: int, step: int) -> set[int]:
    """``low`` to ``high`` by ``step``; a range that runs backwards wraps round (``fri-mon``, ``22-2``)."""
    if low <= high:
        return set(range(low, high + 1, step))
    span = list(range(low, spec.high + 1)) + list(range(spec.low, high + 1))
    return set(span[::step])


def values(spec: FieldSpec, given: str | int | Iterable[int] | None) -> tuple[frozenset[int], bool]:
    """A field given as text, one value or a set of values: (the values, whether it is unrestricted).

    Unrestricted means written ``*`` (``*/2`` too, as cron reads it) or not given: it decides how
    the two day fields combine (`jobbridge.scheduling.cron.Cron`).
    """
    if given is None:
        return frozenset(range(spec.low, spec.high + 1)), True
    if isinstance(given, str):
        return parse(spec, given), given.strip().startswith("*")
    items = [given] if isinstance(given, int) else list(given)
    found: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int):
            raise CronFieldError(spec.name, f"values must be whole numbers, not {type(item).__name__}")
        if item < 0:
            raise CronFieldError(spec.name, f"{item} is outside {spec.low}-{spec.high}")
        found.add(spec.number(str(item)))
    if not found:
        raise CronFieldError(spec.name, "an empty set of values matches nothing")
    return frozenset(found), False
