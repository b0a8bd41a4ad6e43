"""The crontab trigger: its fields, its ticks, and the DST tables (Europe/Berlin, America/New_York).

The rule: a local time that does not exist (clocks go forward) fires at the
first instant after the gap, once however many matching local times fell in
it; a local time that happens twice (clocks go back) fires once, at its first
occurrence. Each row gives an expression, a zone, a start and the next ticks
as local times with their UTC offset, as a person reads them off the wall.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.cron import Cron
from jobbridge.scheduling.cron_fields import CronFieldError
from jobbridge.scheduling.triggers import Every, trigger_of

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def ticks(cron: Cron, start: str, count: int) -> list[str]:
    zone = ZoneInfo(cron.zone_name) if cron.tz else UTC
    moment = datetime.fromisoformat(start).timestamp()
    out = []
    for _ in range(count):
        found = cron.next_after(moment)
        assert found is not None
        out.append(datetime.fromtimestamp(found, zone).isoformat())
        moment = found
    return out


DST_TABLE = [
    # Berlin springs forward on 2024-03-31 at 02:00 (to 03:00): 02:30 does not exist
    ("30 2 * * *", BERLIN, "2024-03-30T12:00:00+01:00",
     ["2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00"]),
    ("*/20 * * * *", BERLIN, "2024-03-31T01:30:00+01:00",
     ["2024-03-31T01:40:00+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T03:20:00+02:00"]),
    ("0 2 * * *", BERLIN, "2024-03-30T12:00:00+01:00",
     ["2024-03-31T03:00:00+02:00", "2024-04-01T02:00:00+02:00"]),
    # Berlin falls back on 2024-10-27 at 03:00 (to 02:00): 02:00-02:59 happens twice
    ("30 2 * * *", BERLIN, "2024-10-26T12:00:00+02:00",
     ["2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"]),
    ("*/30 * * * *", BERLIN, "2024-10-27T01:45:00+02:00",
     ["2024-10-27T02:00:00+02:00", "2024-10-27T02:30:00+02:00", "2024-10-27T03:00:00+01:00"]),
    ("0 * * * *", BERLIN, "2024-10-27T01:30:00+02:00",
     ["2024-10-27T02:00:00+02:00", "2024-10-27T03:00:00+01:00", "2024-10-27T04:00:00+01:00"]),
    # New York springs forward on 2024-03-10 at 02:00 (to 03:00) and falls back on 2024-11-03 at 02:00 (to 01:00)
    ("15 2 * * *", NEW_YORK, "2024-03-09T12:00:00-05:00",
     ["2024-03-10T03:00:00-04:00", "2024-03-11T02:15:00-04:00"]),
    ("30 1 * * *", NEW_YORK, "2024-11-02T12:00:00-04:00",
     ["2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"]),
    ("*/30 1 * * *", NEW_YORK, "2024-11-03T00:45:00-04:00",
     ["2024-11-03T01:00:00-04:00", "2024-11-03T01:30:00-04:00", "2024-11-04T01:00:00-05:00"]),
    # an ordinary day: nothing special
    ("0 9-17/4 * * mon-fri", NEW_YORK, "2024-06-07T16:00:00-04:00",
     ["2024-06-07T17:00:00-04:00", "2024-06-10T09:00:00-04:00"]),
]


@pytest.mark.parametrize(("expression", "tz", "start", "want"), DST_TABLE)
def test_the_dst_table(expression: str, tz: str, start: str, want: list[str]) -> None:
    assert ticks(Cron.parse(expression, tz=tz), start, len(want)) == want


@pytest.mark.parametrize(("expression", "tz", "start", "want"), DST_TABLE)
def test_looking_back_finds_the_same_ticks(expression: str, tz: str, start: str, want: list[str]) -> None:
    cron = Cron.parse(expression, tz=tz)
    stamps = [datetime.fromisoformat(w).timestamp() for w in want]
    for earlier, later in itertools.pairwise(stamps):
        assert cron.latest_at(later) == later
        assert cron.latest_before(later) == earlier
        assert cron.latest_at(later - 1) == earlier


def test_every_local_day_of_a_year_fires_a_daily_job_exactly_once() -> None:
    for tz in (BERLIN, NEW_YORK):
        cron = Cron.parse("30 2 * * *", tz=tz)
        found = ticks(cron, "2024-01-01T00:00:00+00:00", 366)
        days = [f[:10] for f in found]
        assert days == sorted(set(days)) and len(days) == 366


def test_the_two_day_fields_either_as_cron_reads_them_or_both_as_celery_does() -> None:
    either = Cron.parse("0 0 13 * fri")  # the 13th, and every Friday
    assert ticks(either, "2024-09-01T00:00:00+00:00", 3) == [
        "2024-09-06T00:00:00+00:00", "2024-09-13T00:00:00+00:00", "2024-09-20T00:00:00+00:00"]
    both = Cron.of(minute=0, hour=0, day_of_month=13, day_of_week=5, days="both")  # Friday the 13th
    assert ticks(both, "2024-01-01T00:00:00+00:00", 2) == ["2024-09-13T00:00:00+00:00", "2024-12-13T00:00:00+00:00"]
    assert ticks(Cron.parse("0 0 */10 * mon"), "2024-09-01T00:00:00+00:00", 2) == [  # */10 is a star: both
        "2024-10-21T00:00:00+00:00", "2024-11-11T00:00:00+00:00"]  # Mondays that are the 1st, 11th, 21st, 31st


def test_value_sets_and_text_are_one_trigger() -> None:
    sets = Cron.of(minute={0, 30}, hour=range(9, 18), day_of_week=[1, 2, 3, 4, 5])
    text = Cron.parse("0,30 9-17 * * mon-fri")
    assert (sets.minute, sets.hour, sets.day_of_week) == (text.minute, text.hour, text.day_of_week)
    assert ticks(sets, "2024-06-08T00:00:00+00:00", 2) == ticks(text, "2024-06-08T00:00:00+00:00", 2)


@pytest.mark.parametrize(("field", "value", "want"), [
    ("minute", "*/15", {0, 15, 30, 45}), ("minute", "5/20", {5, 25, 45}), ("hour", "22-2", {22, 23, 0, 1, 2}),
    ("day_of_week", "fri-mon", {5, 6, 0, 1}), ("day_of_week", "7", {0}), ("day_of_week", "Sunday", {0}),
    ("month_of_year", "jan,jul-aug", {1, 7, 8}), ("day_of_month", "1-31/10", {1, 11, 21, 31}),
])
def test_the_field_grammar(field: str, value: str, want: set[int]) -> None:
    assert getattr(Cron.of(**{field: value}), field) == want


@pytest.mark.parametrize(("expression", "field", "why"), [
    ("61 * * * *", "minute", "61 is outside 0-59"),
    ("* 24 * * *", "hour", "24 is outside 0-23"),
    ("* * 0 * *", "day_of_month", "0 is outside 1-31"),
    ("* * * foo *", "month_of_year", "'foo' is not a number"),
    ("* * * * mon,", "day_of_week", "an empty item"),
    ("*/0 * * * *", "minute", "the step after '/'"),
    ("* * * *", "expression", "needs five fields"),
])
def test_a_bad_field_is_named(expression: str, field: str, why: str) -> None:
    with pytest.raises(CronFieldError, match=why) as caught:
        Cron.parse(expression)
    assert caught.value.field == field and f"cron field {field}" in str(caught.value)


def test_an_expression_that_never_matches_has_no_tick() -> None:
    assert Cron.parse("0 0 31 2 *").next_after(0) is None
    assert Cron.parse("0 0 30 2 *").latest_at(2e9) is None


def test_every_is_a_grid_from_the_epoch() -> None:
    grid = Every(60)
    assert grid.next_after(1_800_000_001) == 1_800_000_060
    assert grid.next_after(1_800_000_000) == 1_800_000_060
    assert grid.latest_at(1_800_000_059.5) == 1_800_000_000
    assert grid.latest_before(1_800_000_000) == 1_800_000_000 - 60
    assert Every(1.5).latest_at(4.4) == 3.0


def test_a_trigger_needs_every_or_cron_and_tz_only_for_cron() -> None:
    for wrong in ({}, {"every": 60, "cron": "* * * * *"}, {"every": 60, "tz": BERLIN}, {"every": 0.5},
                  {"cron": "* * * * *", "tz": "Nowhere/Else"}, {"cron": 5}):
        with pytest.raises(ConfigurationError):
            trigger_of(**wrong)  # type: ignore[arg-type]
    assert trigger_of(cron="0 3 * * *", default_tz=BERLIN).zone_name == BERLIN
    assert trigger_of(cron=Cron.parse("0 3 * * *", tz=NEW_YORK), tz=BERLIN).zone_name == NEW_YORK
