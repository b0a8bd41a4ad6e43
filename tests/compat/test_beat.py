"""Beat on the facade, in this process (memory driver, fixed clock): beat_schedule, add_periodic_task, crontab.

Each entry becomes a schedule entry of the app's JobBridge; a scheduler started the way the CLI
starts one (`jobbridge.scheduling.commands.starting`) fires its ticks, and the worker runs the tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from jobbridge.compat import Celery, signals
from jobbridge.compat.exceptions import ImproperlyConfigured, RefusedFeature
from jobbridge.compat.schedules import InvalidCrontab, crontab, schedule, solar

from jobbridge.drivers.schedule_port import Fire
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.commands import starting
from jobbridge.testing import FixedClock

MONDAY_NOON = datetime(2024, 6, 3, 12, 0, tzinfo=UTC).timestamp()
MakeApp = Callable[..., Celery]


def beat_app(make_app: MakeApp, clock: FixedClock, **settings: Any) -> tuple[Celery, list[Any]]:
    clock.set(MONDAY_NOON)
    app = make_app("beatproj", **settings)
    ran: list[Any] = []

    @app.task(name="beatproj.record")
    def record(what: str, n: int = 0) -> str:
        ran.append((what, n))
        return what

    return app, ran


def fire(app: Celery) -> list[Fire]:
    scheduler = starting(app.jobbridge_app(), embedded=False)
    return [f.outcome for f in scheduler.step()]


# -- beat_schedule ---------------------------------------------------------------------------------


def test_beat_schedule_entries_fire_their_tasks_with_args_kwargs_and_queue(make_app: MakeApp,
                                                                           clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock, beat_schedule={
        "every-minute": {"task": "beatproj.record", "schedule": crontab(), "args": ("cron",),
                         "kwargs": {"n": 1}, "options": {"queue": "beats"}},
        "every-30s": {"task": "beatproj.record", "schedule": timedelta(seconds=30), "args": ["interval"]},
        "every-10s": {"task": "beatproj.record", "schedule": schedule(run_every=10), "args": ["schedule"]},
    })
    bridge = app.jobbridge_app()
    assert {e.name for e in bridge.schedules.entries()} == {"every-minute", "every-30s", "every-10s"}
    assert fire(app) == [Fire.PUSHED] * 3  # noon is a tick of each
    bridge.run_pending(["celery", "beats"])
    assert sorted(ran) == [("cron", 1), ("interval", 0), ("schedule", 0)]


def test_a_crontab_is_read_in_the_apps_timezone_with_both_day_fields_required(make_app: MakeApp,
                                                                              clock: FixedClock) -> None:
    app, _ = beat_app(make_app, clock, timezone="Europe/Berlin", beat_schedule={
        "first-monday": {"task": "beatproj.record", "schedule": crontab(minute=0, hour=14, day_of_week="mon",
                                                                        day_of_month="1-7"), "args": ["x"]},
    })
    (entry,) = app.jobbridge_app().schedules.entries()
    assert entry.trigger.zone_name == "Europe/Berlin"
    following = entry.trigger.next_after(MONDAY_NOON)
    assert following is not None
    # 3 June 2024 is the first Monday: 14:00 in Berlin is noon UTC, already passed; the next first Monday is 1 July
    assert datetime.fromtimestamp(following, ZoneInfo("Europe/Berlin")) == datetime(
        2024, 7, 1, 14, 0, tzinfo=ZoneInfo("Europe/Berlin"))


def test_an_unknown_task_fails_the_schedulers_boot_naming_the_entry(make_app: MakeApp, clock: FixedClock) -> None:
    app, _ = beat_app(make_app, clock, beat_schedule={"nightly": {"task": "beatproj.nope", "schedule": 60}})
    app.jobbridge_app()  # a process that does not schedule is not stopped by it
    with pytest.raises(ConfigurationError, match=r"'nightly'.*beatproj.nope.*not registered"):
        fire(app)


@pytest.mark.parametrize(("entry", "says"), [
    ({"schedule": 60}, "'bad': task"),
    ({"task": "beatproj.record"}, "'bad': schedule: is required"),
    ({"task": "beatproj.record", "schedule": "often"}, "'bad': schedule: must be seconds"),
    ({"task": "beatproj.record", "schedule": 60, "when": 1}, "'bad': when: is not a key"),
    ({"task": "beatproj.record", "schedule": 60, "args": "x"}, "'bad': args"),
    ({"task": "beatproj.record", "schedule": 60, "options": {"expires": -1}}, "'bad': options: expires"),
    ({"task": "beatproj.record", "schedule": 60, "options": {"task_id": "x"}}, "'bad': options: task_id"),
    ({"task": "beatproj.record", "schedule": 0.5}, "'bad': schedule: an interval of 0.5s"),
    ({"task": "beatproj.record", "schedule": solar("sunrise", 52.5, 13.4)}, "'bad': schedule: solar"),
    ({"task": "beatproj.record", "schedule": crontab(nowfun=lambda: datetime.now(UTC))}, "'bad': schedule: nowfun"),
])
def test_a_bad_entry_fails_naming_the_entry_and_the_key(make_app: MakeApp, clock: FixedClock,
                                                        entry: dict[str, Any], says: str) -> None:
    app, _ = beat_app(make_app, clock, beat_schedule={"bad": entry})
    with pytest.raises(ImproperlyConfigured, match=says):
        app.jobbridge_app()


def test_an_option_the_facade_refuses_elsewhere_is_refused_at_the_entry(make_app: MakeApp, clock: FixedClock) -> None:
    app, _ = beat_app(make_app, clock, beat_schedule={
        "urgent": {"task": "beatproj.record", "schedule": 60, "args": ["x"], "options": {"priority": 9}}})
    with pytest.raises(ConfigurationError, match=r"'urgent'.*priority"):
        fire(app)


def test_options_expires_drops_a_ticks_task_no_worker_started_in_time(make_app: MakeApp, clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock, beat_schedule={
        "fresh": {"task": "beatproj.record", "schedule": 60, "args": ["x"], "options": {"expires": 20}}})
    assert fire(app) == [Fire.PUSHED]
    clock.advance(30)
    app.jobbridge_app().run_pending(["celery"])
    assert ran == []


# -- add_periodic_task and the app's signals ---------------------------------------------------------


def test_add_periodic_task_from_on_after_configure_and_on_after_finalize(make_app: MakeApp, clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock)
    keys: list[str] = []

    @app.on_after_configure.connect
    def setup_periodic_tasks(sender: Celery, **kwargs: Any) -> None:
        keys.append(sender.add_periodic_task(10.0, app.tasks["beatproj.record"].s("configured", n=2)))
        keys.append(sender.add_periodic_task(crontab(), app.tasks["beatproj.record"].s("named"), name="by-name"))

    @app.on_after_finalize.connect
    def more(sender: Celery, **kwargs: Any) -> None:
        keys.append(sender.add_periodic_task(30, app.tasks["beatproj.record"], args=("finalized",)))

    assert fire(app) == [Fire.PUSHED] * 3
    # the default key is Celery's repr of the call, so every process names the entry alike
    assert keys == ["beatproj.record('configured', n=2)", "by-name", "beatproj.record('finalized')"]
    app.jobbridge_app().run_pending(["celery"])
    assert sorted(ran) == [("configured", 2), ("finalized", 0), ("named", 0)]


def test_add_periodic_task_after_the_app_was_built_fires_too(make_app: MakeApp, clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock)
    app.jobbridge_app()
    app.add_periodic_task(60, app.tasks["beatproj.record"].s("late"))
    assert fire(app) == [Fire.PUSHED]
    app.jobbridge_app().run_pending(["celery"])
    assert ran == [("late", 0)]


# -- beat_scheduler, beat signals, max wait -----------------------------------------------------------


def test_a_foreign_scheduler_fails_only_a_process_that_schedules(make_app: MakeApp, clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock, beat_scheduler="redbeat.RedBeatScheduler",
                        beat_schedule={"m": {"task": "beatproj.record", "schedule": 60, "args": ["x"]}})
    app.tasks["beatproj.record"].delay("plain")
    app.jobbridge_app().run_pending(["celery"])
    assert ran == [("plain", 0)]
    with pytest.raises(RefusedFeature, match=r"beat_scheduler = 'redbeat.RedBeatScheduler' is refused"):
        fire(app)


@pytest.mark.parametrize("name", ["celery.beat:PersistentScheduler", "celery.beat.PersistentScheduler", "jobbridge"])
def test_the_default_scheduler_names_are_accepted(make_app: MakeApp, clock: FixedClock, name: str) -> None:
    app, _ = beat_app(make_app, clock, beat_scheduler=name)
    assert fire(app) == []


def test_django_celery_beats_scheduler_does_not_break_what_does_not_schedule(make_app: MakeApp,
                                                                             clock: FixedClock) -> None:
    app, ran = beat_app(make_app, clock, beat_scheduler="django_celery_beat.schedulers:DatabaseScheduler")
    app.tasks["beatproj.record"].delay("plain")
    app.jobbridge_app().run_pending(["celery"])
    assert ran == [("plain", 0)]


def test_django_celery_beats_scheduler_attaches_its_tables_when_a_scheduler_starts(
        make_app: MakeApp, clock: FixedClock) -> None:
    django_beat = pytest.importorskip("jobbridge.integrations.django_beat")
    attached: list[Any] = []
    app, _ = beat_app(make_app, clock, beat_scheduler="django_celery_beat.schedulers.DatabaseScheduler")
    mp = pytest.MonkeyPatch()
    mp.setattr(django_beat, "attach", attached.append)
    try:
        fire(app)
    finally:
        mp.undo()
    assert attached == [app.jobbridge_app()]


def test_beat_init_and_beat_embedded_init_fire_when_a_scheduler_starts(make_app: MakeApp, clock: FixedClock) -> None:
    app, _ = beat_app(make_app, clock, beat_max_loop_interval=5)
    seen: list[tuple[str, Any]] = []

    def alone_started(sender: Any, **kw: Any) -> None:
        seen.append(("beat_init", sender.app))

    def embedded_started(sender: Any, **kw: Any) -> None:
        seen.append(("embedded", sender.app))

    signals.beat_init.connect(alone_started)
    signals.beat_embedded_init.connect(embedded_started)
    try:
        alone = starting(app.jobbridge_app(), embedded=False)
        starting(app.jobbridge_app(), embedded=True)
    finally:
        signals.beat_init.disconnect(alone_started)
        signals.beat_embedded_init.disconnect(embedded_started)
    assert seen == [("beat_init", app), ("embedded", app)]
    assert alone.until_due() <= 5  # beat_max_loop_interval caps the wait


# -- the schedule types -----------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "says"), [
    ({"minute": "5/15"}, "minute: '5/15': a step needs a range"),
    ({"day_of_week": "7"}, "day_of_week: 7 is outside 0-6"),
    ({"day_of_week": 7}, "day_of_week: 7 is outside 0-6"),
    ({"hour": "24"}, "hour: 24 is outside 0-23"),
    ({"day_of_month": 30, "month_of_year": "feb"}, "day_of_month: no day"),
    ({"minute": "often"}, "minute: 'often' is neither"),
    ({"minute": ["1"]}, "minute: a set or list must hold whole numbers"),
])
def test_a_bad_crontab_field_fails_as_in_celery_naming_the_field(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidCrontab, match=says) as caught:
        crontab(**fields)
    assert isinstance(caught.value, ValueError)  # what Celery raises


def test_celerys_grammar_names_steps_and_wrapping_ranges() -> None:
    assert crontab(day_of_week="fri-mon").day_of_week == {5, 6, 0, 1}
    assert crontab(day_of_week="Monday,wednesday").day_of_week == {1, 3}
    assert crontab(month_of_year="jan-mar,dec").month_of_year == {1, 2, 3, 12}
    assert crontab(minute="1,13,30-45,50-59/2").minute == {1, 13, *range(30, 46), *range(50, 60, 2)}
    assert crontab(hour={6, 18}).hour == {6, 18}
    assert crontab.from_string("*/15 9-17 * * mon-fri").minute == {0, 15, 30, 45}


def test_remaining_estimate_and_is_due_answer_as_celerys_do() -> None:
    now = datetime(2024, 6, 3, 12, 0, 30, tzinfo=UTC)
    every_quarter = crontab(minute="*/15", nowfun=lambda: now)
    assert every_quarter.remaining_estimate(now) == timedelta(minutes=14, seconds=30)
    assert every_quarter.is_due(now - timedelta(minutes=20)) == (True, 14 * 60 + 30)
    assert every_quarter.is_due(now) == (False, 14 * 60 + 30)
    interval = schedule(timedelta(seconds=30), nowfun=lambda: now)
    assert interval.is_due(now - timedelta(seconds=31)) == (True, 30)
    assert interval.is_due(now - timedelta(seconds=10)) == (False, 20)


def test_solar_constructs_and_is_refused_when_run() -> None:
    sunrise = solar("sunrise", 52.5, 13.4)
    with pytest.raises(RefusedFeature, match="crontab"):
        sunrise.is_due(datetime.now(UTC))


# -- jobbridge beat's Celery options ----------------------------------------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (["--detach"], "systemd"),
    (["--pidfile", "beat.pid"], "systemd"),
    (["-S", "redbeat.RedBeatScheduler"], "django_celery_beat.schedulers:DatabaseScheduler"),
    (["-n", "beat@host"], "remote control"),
])
def test_beat_refuses_the_options_it_cannot_honour_with_the_reason(args: list[str], says: str) -> None:
    from click.testing import CliRunner

    from jobbridge.cli import cli

    result = CliRunner().invoke(cli, ["beat", "-A", "tests.unit.test_cli:memory_app", *args])
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
