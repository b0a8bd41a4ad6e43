"""Schedules: periodic jobs that any number of schedulers can run, one dispatch per tick, no leader.

- `triggers` and `cron`: when an entry fires (`Every`, `Cron`), a pure function of time;
- `entries`: an entry (`Entry`), what a tick's envelope is, what to do with missed ticks;
- `book` and `config`: the entries of an app, from ``bridge.schedule(...)`` and the ``schedules`` section;
- `scheduler`: the loop that hands due ticks to the store (`jobbridge.drivers.schedule_port`);
- `commands`: ``jobbridge scheduler``, ``jobbridge schedules``, and the worker's ``--schedule``.

docs/schedules.md is the manual.
"""

from jobbridge.scheduling.cron import Cron
from jobbridge.scheduling.entries import CATCH_UP_LIMIT, Entry, Tick
from jobbridge.scheduling.triggers import Every

__all__ = ["CATCH_UP_LIMIT", "Cron", "Entry", "Every", "Tick"]
