"""The beat project under real processes: ``jobbridge worker -A beatproj -B``, and ``jobbridge beat`` beside a worker.

On SQLite and Redis. The project declares an every-second interval, an every-two-seconds
``add_periodic_task`` (from ``on_after_configure``) and an every-minute crontab. Each tick's task
must run once: the ticks recorded by the tasks are distinct, on their grids, and (for the
interval entries) consecutive. Whether the crontab's minute falls inside the few seconds a test
runs depends on the wall clock, so here it is only held to once per tick; the in-process tests
(test_beat.py) fire it on a fixed clock.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .projects import PROJECTS, Worker, of, start

pytestmark = pytest.mark.slow


def ticks(events: list[list[Any]], what: str) -> list[float]:
    return [float(e[2]) for e in of(events, "tick") if e[1] == what]


def enough(events: list[list[Any]]) -> bool:
    return len(ticks(events, "interval")) >= 4 and len(ticks(events, "periodic")) >= 2


def each_tick_once(events: list[list[Any]]) -> None:
    for what, period in (("interval", 1.0), ("periodic", 2.0), ("cron", 60.0)):
        found = ticks(events, what)
        assert all(n == 1 for n in Counter(found).values()), (what, found)  # no tick ran twice
        assert all(t % period == 0 for t in found), (what, found)  # on the entry's grid
        if what != "cron":
            ordered = sorted(found)
            # no tick skipped between the first and the last that ran (a task in flight at the stop may be missing)
            assert ordered == [ordered[0] + period * i for i in range(len(ordered))], (what, ordered)


def test_worker_with_beat(tmp_path: Path, store: dict[str, str]) -> None:
    worker = start(tmp_path, "beatproj", store, "-B", "-c", "4")
    try:
        events = worker.wait_for(enough, "the periodic tasks to run")
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
    events = worker.events()
    each_tick_once(events)
    assert "scheduler started: 3 entries" in worker.output()


def test_beat_beside_a_plain_worker(tmp_path: Path, store: dict[str, str]) -> None:
    worker = start(tmp_path / "worker", "beatproj", store, "-c", "4")
    beat = Beat(tmp_path / "beat", store, worker.events_file)
    try:
        worker.wait_for(enough, "the periodic tasks beat sends to run")
        assert beat.stop() == 0, beat.output()
        assert worker.stop() == 0, worker.output()
    finally:
        beat.kill()
        worker.kill()
    each_tick_once(worker.events())
    assert "-s celerybeat-schedule: the schedule file is not used" in beat.output()


class Beat(Worker):
    """``jobbridge beat -A beatproj -s celerybeat-schedule --max-interval 5``, writing to the worker's event file."""

    def __init__(self, tmp: Path, store: dict[str, str], events_file: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        extra = {k: v for k, v in store.items() if k != "CELERY_BROKER_URL"}
        super().__init__(tmp, "beatproj", store["CELERY_BROKER_URL"], env=extra)
        self.proc.kill()  # the worker the base class started: replaced by beat below
        self.proc.wait(10)
        self.events_file = events_file
        self.env["COMPAT_EVENTS"] = str(events_file)
        command = self.proc.args[:1] if isinstance(self.proc.args, list) else ["jobbridge"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([*command, "beat", "-A", "beatproj", "-s", "celerybeat-schedule",
                                          "--max-interval", "5"], cwd=PROJECTS, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT)
