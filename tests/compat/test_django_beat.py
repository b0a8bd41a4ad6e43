"""django-celery-beat's tables as schedule entries, in the sample Django project on SQLite.

The scenarios (tests/compat/django_beat_scenarios.py) run in one ``manage.py
shell`` with ``proj.settings_beat`` (django_celery_beat installed): rows made
through the ORM as the admin makes them, several schedulers stepped on a
`FixedClock` over the project's own database. Then real processes: a worker
with ``--schedule`` and a ``jobbridge scheduler`` side by side firing a 1 s
interval row, and the project with ``CELERY_BEAT_SCHEDULER`` naming
django-celery-beat's scheduler (the cookiecutter-django default) migrated and
served by a plain worker.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from .django_project import (
    BIN,
    PROJECT,
    Database,
    ProjectWorker,
    environment,
    fresh_database,
    jobbridge,
    manage,
    shell,
)

pytestmark = pytest.mark.slow

DEADLINE = 60.0
MINUTES = [float(m) for m in range(60)]


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("beat")
    with fresh_database("sqlite", folder) as db:
        env = environment(db, DJANGO_SETTINGS_MODULE="proj.settings_beat_scheduler",
                          JOBBRIDGE_DATABASE_URL="django://default")
        found: dict[str, Any] = shell(env, "import django_beat_scenarios as s; "
                                           "s.main(['every_kind_once', 'changes_picked_up', 'facade_rows'])")
    return found


def test_every_tick_of_every_kind_of_row_is_pushed_once_by_three_schedulers(seen: dict[str, Any]) -> None:
    found = seen["every_kind_once"]
    assert found["pushed"] == found["distinct"] == 107
    assert found["pushers"] == 3  # whichever looked first fired a tick; none fired one twice
    ticks = found["ticks"]
    assert ticks["every-minute"] == MINUTES
    assert ticks["quarter-hour"] == [0.0, 15.0, 30.0, 45.0]
    assert ticks["lunch-in-berlin"] == [5.0]  # 14:05 in Berlin on Wednesday the 5th
    assert ticks["thursday-the-5th"] == []  # Celery's rule: both day fields must match
    assert ticks["starts-later"] == MINUTES[30:]
    assert ticks["ends-early"] == MINUTES[:10]
    assert ticks["one-off"] == [0.0] and ticks["clocked"] == [5.5]
    assert ticks["disabled"] == []


def test_options_of_a_row_travel_with_its_jobs(seen: dict[str, Any]) -> None:
    found = seen["every_kind_once"]
    assert found["headers"] == {"team": "ops", "periodic_task_name": "every-minute"}
    assert found["queue"] == "beat"
    assert found["expires_after_tick"] == 120.0  # expire_seconds
    assert found["ends_early_expires_at"] == 10.0  # expires: the row's end is each job's expiry too
    # every job ran once, but those expired by the time the worker looked (an hour later): 4 + 10
    assert found["ran"] == found["pushed"] - 14


def test_the_pushing_scheduler_records_runs_in_the_row_and_disables_a_spent_one_off(seen: dict[str, Any]) -> None:
    found = seen["every_kind_once"]
    assert found["counts"] == {"every-minute": 60, "one-off": 1, "disabled": 0}
    assert found["last_run_minute"] == 59.0
    assert found["enabled"] == {"one-off": False, "clocked": False, "every-minute": True}


def test_a_row_that_cannot_fire_is_logged_once_naming_it_and_the_others_fire(seen: dict[str, Any]) -> None:
    found = seen["every_kind_once"]
    errors = found["errors"]
    for name, why in (("bad-json", "args: is not JSON"), ("solar", "solar: schedules by sunrise and sunset"),
                      ("priority", "priority: jobbridge orders work by queue"),
                      ("unknown-task", "task: no job is registered as 'no.such'")):
        lines = [line for line in errors if f"entry {name!r}: " in line]
        assert len(lines) == 3, (name, errors)  # once per scheduler (three of them), not at every re-read
        assert why in lines[0], lines
        assert found["ticks"][name] == []
    assert {"bad-json", "solar", "priority", "unknown-task", "disabled"}.isdisjoint(found["listed"])


def test_changes_in_the_tables_are_picked_up_without_firing_past_ticks(seen: dict[str, Any]) -> None:
    found = seen["changes_picked_up"]
    assert found["change-me"] == [0.0, 1.0, 2.0, 3.0, 5.0, 10.0]  # every minute, then */5 from 3:10
    assert found["remove-me"] == [0.0, 1.0, 2.0, 3.0]
    assert found["added"] == [float(m) for m in range(4, 13)]
    # disabled at 3:10, enabled again at 7:30: the 7:00 tick is not fired late as a missed one
    assert found["toggled"] == [0.0, 1.0, 2.0, 3.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    assert found["one-off"] == [0.0, 8.0]  # enabled again after it ran: once more
    assert found["distinct"] is True
    assert found["listed"] == ["added", "change-me", "toggled"]


def test_rows_naming_the_apps_tasks_are_sent_as_send_task_sends_them(seen: dict[str, Any]) -> None:
    found = seen["facade_rows"]
    assert found["fired"] == ["publish-post", "welcome"]
    assert found["queues"] == {"publish-post": "celery", "welcome": "mail"}  # CELERY_TASK_ROUTES applies
    assert found["task_header"] == ["accounts.tasks.send_welcome", "blog.tasks.publish"]
    assert (found["published"], found["word_count"]) == (True, 3)
    assert found["ran"] == 1  # the queue named; the welcome waits on "mail"
    urgent, cleanup, elsewhere = (next(line for line in found["errors"] if f"entry {name!r}" in line)
                                  for name in ("urgent", "celery.backend_cleanup", "elsewhere"))
    assert "priority" in urgent, urgent
    assert "results expire in jobbridge's result store by themselves" in cleanup, cleanup
    assert "task 'other.tasks.thing' is not registered in this app" in elsewhere, elsewhere
    assert len(found["errors"]) == 3, found["errors"]


# -- real processes -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Database, dict[str, str], Path]]:
    folder = tmp_path_factory.mktemp("beat-processes")
    with fresh_database("sqlite", folder) as db:
        env = environment(db, DJANGO_SETTINGS_MODULE="proj.settings_beat", JOBBRIDGE_DATABASE_URL="django://default")
        manage(env, "migrate", "-v", "0")
        yield db, env, folder


def test_a_worker_and_a_scheduler_fire_a_one_second_row_once_per_tick(
        project: tuple[Database, dict[str, str], Path]) -> None:
    db, env, folder = project
    shell(env, "import json; from django_celery_beat.models import IntervalSchedule, PeriodicTask; "
               "every = IntervalSchedule.objects.create(every=1, period='seconds'); "
               "PeriodicTask.objects.create(name='every-second', task='blog.beat-tick', interval=every, "
               "kwargs=json.dumps({'label': 'tick'})); print(json.dumps(True))")
    worker = ProjectWorker(env, folder / "worker.log", "-A", "blog.beat", "--schedule", "-Q", "beat", "-c", "1",
                           "--sleep", "0.05")
    scheduler = Scheduler(env, folder / "scheduler.log")
    try:
        _wait_for_titles(db, worker, 3)
    finally:
        assert worker.stop() == 0, worker.output()
        assert scheduler.stop() == 0, scheduler.output()
    titles = _titles(db)
    assert len(titles) >= 3 and len(set(titles)) == len(titles), titles  # no tick ran twice
    counted = shell(env, "import json; from django_celery_beat.models import PeriodicTask; "
                         "print(json.dumps(PeriodicTask.objects.get(name='every-second').total_run_count))")
    assert counted >= len(titles)


class Scheduler(ProjectWorker):
    """``jobbridge scheduler -A blog.beat`` in the project's folder, its output in a file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen([str(BIN / "jobbridge"), "scheduler", "-A", "blog.beat"], cwd=PROJECT,
                                         env=env, stdout=out, stderr=subprocess.STDOUT)


def _titles(db: Database) -> list[str]:
    engine = db.engine()
    try:
        with engine.connect() as conn:
            return [row[0] for row in conn.execute(text("SELECT title FROM blog_post WHERE body = 'beat'"))]
    finally:
        engine.dispose()


def _wait_for_titles(db: Database, worker: ProjectWorker, count: int) -> list[str]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        titles = _titles(db)
        if len(titles) >= count:
            return titles
        assert worker.alive(), worker.output()
        time.sleep(0.2)
    raise AssertionError(f"only {_titles(db)} ran:\n{worker.output()}")


def test_the_cookiecutter_setting_breaks_neither_migrate_nor_a_plain_worker(tmp_path: Path) -> None:
    with fresh_database("sqlite", tmp_path) as db:
        env = environment(db, DJANGO_SETTINGS_MODULE="proj.settings_beat_scheduler")
        manage(env, "migrate", "-v", "0")
        done = jobbridge(env, "status", "-A", "proj")
        assert done.returncode == 0, done.stderr
        worker = ProjectWorker(env, tmp_path / "worker.log", "-A", "proj", "-Q", "celery", "-c", "1",
                               "--sleep", "0.05")
        try:
            found = shell(env, "import json; from blog.models import Post; from blog.tasks import publish; "
                               "post = Post.objects.create(title='t', body='one two'); "
                               "print(json.dumps(publish.delay(post.pk).get(timeout=30)))")
        finally:
            assert worker.stop() == 0, worker.output()
        assert found == 2


def test_jobbridge_schedules_lists_the_tables_rows_for_a_facade_app(tmp_path: Path) -> None:
    """The project's Celery app names django-celery-beat's scheduler: its rows are listed beside beat_schedule's."""
    with fresh_database("sqlite", tmp_path) as db:
        env = environment(db, DJANGO_SETTINGS_MODULE="proj.settings_beat_scheduler")
        manage(env, "migrate", "-v", "0")
        shell(env, "import json; from django_celery_beat.models import IntervalSchedule, PeriodicTask; "
                   "every = IntervalSchedule.objects.create(every=90, period='seconds'); "
                   "PeriodicTask.objects.create(name='publish-every-90s', task='blog.tasks.publish', "
                   "interval=every, args=json.dumps([1])); print(json.dumps(True))")
        done = jobbridge(env, "schedules", "-A", "proj")
        assert done.returncode == 0, done.stderr
        (row,) = [line for line in done.stdout.splitlines() if line.startswith("publish-every-90s")]
        assert row.split()[1:4] == ["blog.tasks.publish", "every", "90s"], done.stdout
