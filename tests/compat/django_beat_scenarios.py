"""django-celery-beat's tables read by jobbridge schedulers, inside the sample Django project (`main`).

Run by ``manage.py shell`` with ``DJANGO_SETTINGS_MODULE=proj.settings_beat``
(django_celery_beat installed) and ``JOBBRIDGE_DATABASE_URL=django://default``:
the rows, the jobs and each entry's last tick all live in the project's own
database. Each scenario makes ``PeriodicTask`` rows through the ORM, as the
admin would, and steps several schedulers (each on a JobBridge of its own over
the same store) on one `FixedClock`; the last line printed is one JSON
object, scenario name -> observations, which tests/compat/test_django_beat.py
asserts on.

A row's ``date_changed`` is the moment its admin saved it (``auto_now``, the
wall clock); `saved` sets it to a moment of the fixed clock instead, as if the
admin had saved the row then, and bumps ``PeriodicTasks`` as a save does.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.core.management import call_command
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    PeriodicTasks,
    SolarSchedule,
)

from jobbridge import Job, JobBridge, JobContext, signals
from jobbridge.drivers.schedule_port import Fire
from jobbridge.integrations.django_beat import attach
from jobbridge.scheduling.entries import SCHEDULE_HEADER, TICK_HEADER
from jobbridge.scheduling.scheduler import SOURCE_POLL, Fired, Scheduler
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock

SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {}
T0 = datetime(2024, 6, 5, 12, 0, tzinfo=UTC).timestamp()  # a Wednesday, 14:00 in Berlin
T1 = T0 + 86400  # a scenario of its own: the store keeps each entry name's last tick across scenarios
STEP = 10.0
RAN: list[tuple[str, float]] = []


class Record(Job, name="beat.record", queue="beat"):
    label: str

    def handle(self, ctx: JobContext) -> None:
        RAN.append((self.label, float(ctx.headers[TICK_HEADER])))


def scenario(fun: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    SCENARIOS[fun.__name__] = fun
    return fun


def at(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def every(n: int, period: str = IntervalSchedule.MINUTES) -> IntervalSchedule:
    return IntervalSchedule.objects.get_or_create(every=n, period=period)[0]


def task(name: str, label: str | None = None, **fields: Any) -> PeriodicTask:
    """A row as the admin saves it; its job records ``label`` (the name, unless given)."""
    kwargs = json.dumps({"label": label or name})
    return PeriodicTask.objects.create(name=name, task="beat.record", kwargs=kwargs, **fields)


def saved(moment: float, *names: str) -> None:
    """The rows ``names`` as saved by the admin at ``moment`` (of the fixed clock)."""
    PeriodicTask.objects.filter(name__in=names).update(date_changed=at(moment))
    PeriodicTasks.update_changed()


def bridges(clock: FixedClock, n: int) -> list[JobBridge]:
    made = []
    for _ in range(n):
        bridge = JobBridge(Settings.from_mapping({"database_url": "django://default"}), jobs=[Record], clock=clock)
        attach(bridge)
        attach(bridge)  # a second call adds nothing
        made.append(bridge)
    return made


class Run:
    """Several schedulers over one store, stepped in a shuffled order at each moment of the fixed clock."""

    def __init__(self, n: int, start: float, seed: int = 7) -> None:
        self.start = start
        self.clock = FixedClock(start)
        self.bridges = bridges(self.clock, n)
        self.schedulers = [Scheduler(bridge) for bridge in self.bridges]
        self.pushed: list[tuple[str, float]] = []
        self.pushers: set[int] = set()
        self._random = random.Random(seed)

    def until(self, end: float) -> None:
        while self.clock.now() <= end:
            order = list(self.schedulers)
            self._random.shuffle(order)
            for scheduler in order:
                self._count(self.schedulers.index(scheduler), scheduler.step())
            self.clock.advance(STEP)

    def _count(self, index: int, fired: Sequence[Fired]) -> None:
        for one in fired:
            if one.outcome is Fire.PUSHED:
                self.pushed.append((one.entry, one.tick))
                self.pushers.add(index)

    def ticks(self, name: str) -> list[float]:
        """Minutes after the run's start of each pushed tick of ``name``, in order."""
        return [round((tick - self.start) / 60, 2) for entry, tick in self.pushed if entry == name]

    def run_jobs(self) -> list[tuple[str, float]]:
        RAN.clear()
        self.bridges[0].run_pending(["beat"])
        return sorted((label, round((tick - self.start) / 60, 2)) for label, tick in RAN)

    def close(self) -> None:
        for bridge in self.bridges:
            bridge.close()


@contextmanager
def dispatched() -> Iterator[list[Any]]:
    """The envelopes of the jobs schedulers pushed, as `signals.job_dispatched` reports them."""
    found: list[Any] = []

    def record(sender: Any, **kwargs: Any) -> None:
        found.append(kwargs["envelope"])

    signals.job_dispatched.connect(record)
    try:
        yield found
    finally:
        signals.job_dispatched.disconnect(record)


@contextmanager
def logged() -> Iterator[list[str]]:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.levelname} {record.getMessage()}")

    handler, logger = Keep(), logging.getLogger("jobbridge.schedule")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def fresh() -> None:
    PeriodicTask.objects.all().delete()
    for model in (IntervalSchedule, CrontabSchedule, ClockedSchedule, SolarSchedule):
        model.objects.all().delete()


@scenario
def every_kind_once() -> dict[str, Any]:
    """Interval, crontab, one-off, clocked, start/end bounds, disabled and refused rows: 3 schedulers, one hour."""
    fresh()
    quarter = CrontabSchedule.objects.create(minute="*/15", hour="*", timezone="Europe/Berlin")
    lunch = CrontabSchedule.objects.create(minute="5", hour="14", day_of_week="wed", day_of_month="5",
                                           timezone="Europe/Berlin")
    task("every-minute", interval=every(1), queue="beat", headers=json.dumps({"team": "ops"}))
    task("quarter-hour", crontab=quarter, expire_seconds=120)
    task("lunch-in-berlin", crontab=lunch)
    task("thursday-the-5th", crontab=CrontabSchedule.objects.create(  # both day fields must match: never today
        minute="5", hour="14", day_of_week="thu", day_of_month="5", timezone="Europe/Berlin"))
    task("one-off", interval=every(10), one_off=True)
    task("clocked", clocked=ClockedSchedule.objects.create(clocked_time=at(T0 + 330)), one_off=True)
    task("disabled", interval=every(1), enabled=False)
    task("starts-later", interval=every(1), start_time=at(T0 + 1800))
    task("ends-early", interval=every(1), expires=at(T0 + 600))
    task("bad-json", interval=every(1))
    PeriodicTask.objects.filter(name="bad-json").update(args="[1, 2")
    task("solar", solar=SolarSchedule.objects.create(event="sunset", latitude=52.5, longitude=13.4))
    task("priority", interval=every(1), priority=5)
    task("unknown-task", interval=every(1))
    PeriodicTask.objects.filter(name="unknown-task").update(task="no.such")
    saved(T0 - 1, *PeriodicTask.objects.values_list("name", flat=True))
    with logged() as lines, dispatched() as envelopes:
        run = Run(3, T0)
        listed = sorted(entry.name for entry in run.schedulers[0].entries)
        run.until(T0 + 3599)
    by_name: dict[str, Any] = {}
    for env in envelopes:
        by_name.setdefault(env.headers[SCHEDULE_HEADER], env)
    rows = {row.name: row for row in PeriodicTask.objects.all()}
    found = {
        "listed": listed, "pushed": len(run.pushed), "distinct": len(set(run.pushed)), "pushers": len(run.pushers),
        "ticks": {name: run.ticks(name) for name in sorted(rows)},
        "ran": len(run.run_jobs()),
        "headers": {k: by_name["every-minute"].headers.get(k) for k in ("team", "periodic_task_name")},
        "queue": by_name["every-minute"].queue,
        "expires_after_tick": by_name["quarter-hour"].expires_at - by_name["quarter-hour"].headers[TICK_HEADER],
        "ends_early_expires_at": round((by_name["ends-early"].expires_at - T0) / 60, 2),
        "counts": {name: rows[name].total_run_count for name in ("every-minute", "one-off", "disabled")},
        "last_run_minute": round((rows["every-minute"].last_run_at.timestamp() - T0) / 60, 2),
        "enabled": {name: rows[name].enabled for name in ("one-off", "clocked", "every-minute")},
        "errors": sorted(line for line in lines if line.startswith("ERROR")),
    }
    run.close()
    return found


@scenario
def changes_picked_up() -> dict[str, Any]:
    """Rows added, removed, re-scheduled, disabled and enabled again while two schedulers run."""
    fresh()
    task("change-me", interval=every(1))
    task("remove-me", interval=every(1))
    task("toggled", interval=every(1))
    task("one-off", interval=every(1), one_off=True)
    saved(T1 - 1, "change-me", "remove-me", "toggled", "one-off")
    run = Run(2, T1)
    run.until(T1 + 190)  # three minutes and a bit: ticks 0, 1, 2, 3
    moment = run.clock.now()
    row = PeriodicTask.objects.get(name="change-me")
    row.interval, row.crontab = None, CrontabSchedule.objects.create(minute="*/5", timezone="UTC")
    row.save()
    PeriodicTask.objects.get(name="remove-me").delete()
    task("added", interval=every(1))
    toggled = PeriodicTask.objects.get(name="toggled")
    toggled.enabled = False
    toggled.save()
    saved(moment, "change-me", "added", "toggled")
    run.until(T1 + 7 * 60 + 20)
    toggled.refresh_from_db()
    toggled.enabled = True
    toggled.save()
    again = PeriodicTask.objects.get(name="one-off")
    again.enabled = True
    again.save()
    saved(run.clock.now(), "toggled", "one-off")  # 7 min 30 s: ticks 7:00 and before are not theirs
    run.until(T1 + 12 * 60)
    found = {name: run.ticks(name) for name in ("change-me", "remove-me", "added", "toggled", "one-off")}
    found["distinct"] = len(set(run.pushed)) == len(run.pushed)
    found["listed"] = sorted(entry.name for entry in run.schedulers[1].entries)
    found["poll"] = SOURCE_POLL
    run.close()
    return found


@scenario
def facade_rows() -> dict[str, Any]:
    """The project's Celery app (CELERY_BEAT_SCHEDULER names django-celery-beat's): rows name its tasks."""
    from blog.models import Post
    from blog.tasks import publish

    from jobbridge.scheduling.commands import starting

    fresh()
    start = T0 + 2 * 86400
    app = publish.app
    app.jobbridge_options(clock=FixedClock(start))
    bridge = app.jobbridge_app()
    post = Post.objects.create(title="beat", body="one two three")
    PeriodicTask.objects.create(name="publish-post", task="blog.tasks.publish", interval=every(1),
                                args=json.dumps([post.pk]))
    PeriodicTask.objects.create(name="welcome", task="accounts.tasks.send_welcome", interval=every(1),
                                args=json.dumps([1]))
    PeriodicTask.objects.create(name="urgent", task="blog.tasks.publish", interval=every(1), priority=3,
                                args=json.dumps([post.pk]))
    # the row Celery's DatabaseScheduler adds by itself, and a task no module of the app declares
    crontab = CrontabSchedule.objects.create(minute="0", hour="4", timezone="UTC")
    PeriodicTask.objects.create(name="celery.backend_cleanup", task="celery.backend_cleanup", crontab=crontab)
    PeriodicTask.objects.create(name="elsewhere", task="other.tasks.thing", interval=every(1))
    saved(start - 1, "publish-post", "welcome", "urgent", "celery.backend_cleanup", "elsewhere")
    with logged() as lines, dispatched() as envelopes:
        scheduler = starting(bridge, embedded=False)  # the facade's receiver attaches the tables here
        fired = scheduler.step()
        ran = bridge.run_pending(["celery"]).processed
    post.refresh_from_db()
    queues = {env.headers[SCHEDULE_HEADER]: env.queue for env in envelopes}
    found = {"fired": sorted(f.entry for f in fired if f.outcome is Fire.PUSHED), "ran": ran,
             "published": post.published, "word_count": post.word_count, "queues": queues,
             "task_header": sorted({env.headers.get("task") for env in envelopes}),
             "errors": [line for line in lines if line.startswith("ERROR")]}
    bridge.close()
    return found


def main(names: Sequence[str]) -> None:
    """Migrate, run the scenarios named, in order, and print what each saw as the last line: one JSON object."""
    call_command("migrate", verbosity=0)
    print(json.dumps({name: SCENARIOS[name]() for name in names}))
