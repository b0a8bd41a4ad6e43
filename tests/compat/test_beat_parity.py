"""The facade's crontab against real Celery: the next run times Celery computed for a table of expressions.

tests/compat/parity/crontab_table.json was written by real Celery (the command is in
tests/compat/parity/make_crontab_table.py). Each row is an expression, a time zone and a start
instant, with the next five run times Celery's beat would use, or the error Celery raised. The
facade must give the same instants (compared as instants: a time in a repeated hour names its offset).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from jobbridge.compat.schedules import crontab

TABLE = json.loads((Path(__file__).parent / "parity" / "crontab_table.json").read_text())
ROWS: list[dict[str, Any]] = TABLE["rows"]


def _fields(row: dict[str, Any]) -> list[Any]:
    return [set(value) if isinstance(value, list) else value for value in row["fields"]]


def _next_runs(row: dict[str, Any]) -> list[str]:
    zone = ZoneInfo(row["tz"])
    schedule = crontab(*_fields(row))
    trigger = schedule.trigger(row["tz"])
    moment: float | None = datetime.fromisoformat(row["start"]).replace(tzinfo=zone).timestamp()
    found = []
    for _ in range(len(row["runs"])):
        assert moment is not None
        moment = trigger.next_after(moment)
        assert moment is not None, "the facade's crontab never fires again"
        found.append(datetime.fromtimestamp(moment, zone).isoformat())
    return found


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (json.dumps(row["fields"]), row["tz"], row["start"])


def _gap_end(moment: datetime, zone: ZoneInfo) -> timedelta | None:
    """The length of the DST gap ``moment`` ends (clocks went forward at it) in ``zone``, else None."""
    moment = moment.astimezone(zone)
    before = (moment - timedelta(seconds=1)).astimezone(zone).utcoffset()
    after = moment.utcoffset()
    return after - before if before is not None and after is not None and after > before else None


def _agrees(celery: datetime, ours: datetime, zone: ZoneInfo) -> bool:
    """The same instant; or the one rule where the facade differs from Celery on purpose.

    A local time that does not exist (02:30 on the night clocks go forward) fires at the first
    instant after the gap (03:00), as docs/schedules.md promises; Celery reads it with the offset
    before the gap and fires at 03:30. docs/compat.md says so.
    """
    if celery == ours:
        return True
    gap = _gap_end(ours, zone)
    return gap is not None and ours < celery < ours + gap


def test_the_table_covers_the_grammar_and_the_zones() -> None:
    assert len({json.dumps(row["fields"]) for row in ROWS}) >= 60
    assert {row["tz"] for row in ROWS} == {"UTC", "Europe/Berlin", "America/New_York"}


def _mismatch(row: dict[str, Any]) -> str | None:
    """What is wrong with the facade's answer for ``row``; None when it is Celery's."""
    if "error" in row:
        try:
            _next_runs(row)
        except ValueError:
            return None
        return f"Celery raised {row['error']}, the facade did not"
    got = [datetime.fromisoformat(t) for t in _next_runs(row)]
    want = [datetime.fromisoformat(t) for t in row["runs"]]
    if all(_agrees(c, o, ZoneInfo(row["tz"])) for c, o in zip(want, got, strict=True)):
        return None
    return f"Celery {[t.isoformat() for t in want]}, facade {[t.isoformat() for t in got]}"


def test_next_runs_are_celerys() -> None:
    """One test over every row (1260 of them): a list of every mismatch, each with its row."""
    wrong = [f"{_key(row)}: {why}" for row in ROWS if (why := _mismatch(row)) is not None]
    assert not wrong, "\n".join(wrong[:20])


def test_the_gap_rule_is_the_only_difference_and_it_is_exercised() -> None:
    differing = [row for row in ROWS if "runs" in row
                 and [datetime.fromisoformat(t) for t in _next_runs(row)] != [datetime.fromisoformat(t)
                                                                             for t in row["runs"]]]
    assert differing, "no row falls in a DST gap: the table lost its spring-forward cases"
    assert {row["tz"] for row in differing} == {"Europe/Berlin", "America/New_York"}
