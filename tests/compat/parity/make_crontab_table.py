"""Write crontab_table.json: the next run times real Celery computes for a table of crontab expressions.

Run it with a Python that has Celery installed, in a virtualenv of its own (never the project's):

    python3 -m venv /tmp/celery-venv && /tmp/celery-venv/bin/pip install celery
    /tmp/celery-venv/bin/python tests/compat/parity/make_crontab_table.py

For each expression, time zone and start instant it records the next `RUNS` run times, found the way
Celery's beat finds them: ``remaining_estimate(last_run_at)`` with ``nowfun`` fixed at ``last_run_at``,
the run time being ``last_run_at`` plus that estimate (in elapsed time), which is then the next ``last_run_at``.
tests/compat/test_beat_parity.py checks the facade's crontab against the file, without Celery.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import celery
from celery import Celery
from celery.schedules import crontab

RUNS = 5
OUT = Path(__file__).with_name("crontab_table.json")

#: (minute, hour, day_of_week, day_of_month, month_of_year); lists are written as JSON lists
EXPRESSIONS: list[tuple[object, object, object, object, object]] = [
    ("*", "*", "*", "*", "*"),
    ("*/15", "*", "*", "*", "*"),
    ("0", "*/3", "*", "*", "*"),
    ("30", "2", "*", "*", "*"),
    (0, 0, "*", "*", "*"),
    ("0,30", "9-17", "*", "*", "*"),
    ("1,13,30-45,50-59/2", "*", "*", "*", "*"),
    ("0", "0,8-17/2", "*", "*", "*"),
    ("5-10", "4", "*", "*", "*"),
    ("0", "9", "mon-fri", "*", "*"),
    ("0", "9", "sat,sun", "*", "*"),
    ("0", "9", "fri-mon", "*", "*"),
    ("0", "12", "*/2", "*", "*"),
    ("0", "12", "monday", "*", "*"),
    ("15", "10", "1-5/2", "*", "*"),
    ("0", "7", 0, "*", "*"),
    ("0", "7", [1, 3, 5], "*", "*"),
    ("0", "0", "*", "1", "*"),
    ("0", "0", "*", "15", "*"),
    ("0", "0", "*", "31", "*"),
    ("0", "0", "*", "30", "*"),
    ("0", "0", "*", "29", "2"),
    ("0", "0", "*", "28-31", "*"),
    ("0", "0", "*", "2-30/2", "*"),
    ("0", "0", "*", "1-7,15-21", "*"),
    ("0", "0", "mon", "1-7", "*"),
    ("0", "0", "1", "1-7,15-21", "*"),
    ("0", "0", "sun", "*/7", "*"),
    ("0", "6", "fri", "13", "*"),
    ("0", "0", "*", "1", "*/3"),
    ("0", "0", "*", "1", "jan"),
    ("0", "0", "*", "1", "jan,jul"),
    ("0", "0", "*", "*", "2-12/2"),
    ("0", "0", "*", "1", "dec-feb"),
    ("30", "4", "*", "1,15", "mar-oct"),
    ("0", "12", "sun", "*", "feb"),
    ("0", "0", "*", "29", "*"),
    ("0", "0", "*", "31", "1-12"),
    ("0", "0", "*", "31", "apr,jun,jul"),
    ({0, 20, 40}, {6, 18}, "*", "*", "*"),
    ([0], [0], "*", [1], [1]),
    ("59", "23", "*", "*", "*"),
    ("59", "23", "*", "31", "12"),
    ("0", "0", "mon-fri", "1", "*"),
    ("*/10", "8-18", "mon-fri", "*", "*"),
    ("0", "2", "*", "*", "*"),
    ("30", "2", "sun", "*", "*"),
    ("0", "1-3", "*", "*", "*"),
    ("*/30", "1-3", "*", "*", "*"),
    ("45", "1", "*", "*", "*"),
    ("0", "3", "*", "*", "*"),
    ("0", "*", "sun", "*", "mar,oct,nov"),
    ("*/20", "0-4", "sun", "25-31", "3"),
    ("*/20", "0-4", "sun", "25-31", "10"),
    ("*/20", "0-3", "sun", "1-14", "3,11"),
    ("7", "*/5", "tue,thu", "*", "*"),
    ("0", "22-2", "*", "*", "*"),
    ("0", "12", "*", "*", "JAN-MAR"),
    ("0", "12", "Wed", "*", "*"),
    ("0", "0", "sat", "29", "2"),
    # what Celery refuses: a step with no range before it, a day of week of 7, a date no month has
    ("5/15", "*", "*", "*", "*"),
    ("0", "0", "7", "*", "*"),
    ("0", "0", "*", "30", "feb"),
    ("0", "24", "*", "*", "*"),
]

ZONES = ("UTC", "Europe/Berlin", "America/New_York")
#: local start times in each zone: an ordinary week, the weeks of both DST changes in each zone, Feb 29
STARTS = (
    "2025-06-11T10:17:30",
    "2026-02-27T23:59:00",
    "2028-02-28T12:00:00",
    "2026-03-07T00:05:00",
    "2026-03-28T23:40:00",
    "2026-10-24T23:40:00",
    "2026-10-31T22:00:00",
)


def runs(app: Celery, spec: tuple[object, ...], zone: str, start: str) -> list[str]:
    """The next RUNS run times (ISO, with offset) after ``start`` read in ``zone``."""
    tz = ZoneInfo(zone)
    last = datetime.fromisoformat(start).replace(tzinfo=tz)
    found: list[str] = []
    for _ in range(RUNS):
        moment = last
        entry = crontab(*spec, app=app, nowfun=lambda moment=moment: moment)
        # the estimate is elapsed time: added in UTC (aware arithmetic in one zone is wall-clock arithmetic)
        following = (moment.astimezone(UTC) + entry.remaining_estimate(moment)).astimezone(tz)
        found.append(following.isoformat())
        last = following
    return found


def main() -> None:
    rows = []
    for zone in ZONES:
        app = Celery("parity", set_as_current=False)
        app.conf.timezone = zone
        app.conf.enable_utc = True
        for spec in EXPRESSIONS:
            for start in STARTS:
                fields = [sorted(v) if isinstance(v, set | list) else v for v in spec]
                try:
                    rows.append({"fields": fields, "tz": zone, "start": start, "runs": runs(app, spec, zone, start)})
                except Exception as exc:  # recorded: the facade must fail the same way
                    rows.append({"fields": fields, "tz": zone, "start": start, "error": type(exc).__name__})
    head = json.dumps({"celery": celery.__version__, "python": sys.version.split()[0]})[:-1]
    body = ",\n".join(json.dumps(row) for row in rows)
    OUT.write_text(f'{head}, "rows": [\n{body}\n]}}\n')  # one row a line, for a readable diff
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
