"""Schedule entries in code and in jobbridge.toml, their boot errors, missed ticks, ``expires``, and the CLI.

In-process, on the memory driver or a SQLite file, with a `FixedClock`: no test sleeps.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobbridge import Job, JobBridge, JobContext, signals
from jobbridge.cli import cli
from jobbridge.drivers.schedule_port import Fire
from jobbridge.errors import ConfigurationError
from jobbridge.results.base import REVOKED
from jobbridge.scheduling.entries import MANUAL_HEADER, SCHEDULE_HEADER, TICK_HEADER
from jobbridge.scheduling.scheduler import Scheduler
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock

NOON = datetime(2024, 6, 5, 12, 0, tzinfo=UTC).timestamp()
RAN: list[tuple[str, Any]] = []


class Report(Job, name="reports.nightly", store_result=True):
    region: str
    day: int = 0

    def handle(self, ctx: JobContext) -> None:
        RAN.append((self.region, ctx.headers.get(TICK_HEADER)))


@pytest.fixture(autouse=True)
def _forget_runs() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def memory_bridge(clock: FixedClock, **settings: Any) -> JobBridge:
    return JobBridge(Settings.from_mapping({"driver": "memory", **settings}), jobs=[Report], clock=clock)


def from_toml(tmp_path: Path, body: str, clock: FixedClock | None = None) -> JobBridge:
    (tmp_path / "jobbridge.toml").write_text('driver = "memory"\n' + textwrap.dedent(body))
    return JobBridge(Settings.from_file(tmp_path / "jobbridge.toml"), jobs=[Report], clock=clock or FixedClock(NOON))


# -- declaring entries ---------------------------------------------------------------------------


def test_an_entry_from_the_schedules_section_fires_its_job_with_the_payload_decoded(tmp_path: Path) -> None:
    clock = FixedClock(NOON)
    bridge = from_toml(tmp_path, """
        timezone = "Europe/Berlin"
        [schedules.nightly]
        job = "reports.nightly"
        cron = "0 14 * * *"
        queue = "reports"
        payload = { region = "eu", day = 3 }
    """, clock)
    (entry,) = bridge.schedules.entries()
    assert (entry.job, entry.trigger.zone_name) == ("reports.nightly", "Europe/Berlin")
    scheduler = Scheduler(bridge)
    assert [f.outcome for f in scheduler.step()] == [Fire.PUSHED]  # 14:00 in Berlin is noon UTC: on time
    clock.advance(86400 + 5)
    assert [f.outcome for f in scheduler.step()] == [Fire.PUSHED]
    bridge.run_pending(["reports"])
    assert RAN == [("eu", NOON), ("eu", NOON + 86400)]


@pytest.mark.parametrize(("body", "names"), [
    ('job = "reports.weekly"\nevery = 60', ["'nightly'", "job", "no job is registered as 'reports.weekly'"]),
    ('job = "reports.nightly"\ncron = "0 25 * * *"', ["'nightly'", "cron field hour", "25 is outside 0-23"]),
    ('job = "reports.nightly"\ncron = "0 3 * * *"\ntz = "Europe/Atlantis"',
     ["'nightly'", "tz", "not a time zone name"]),
    ('job = "reports.nightly"\nevery = 60\npayload = { region = 5 }', ["'nightly'", "payload", "region"]),
    ('job = "reports.nightly"\nevery = 60\npayload = { }', ["'nightly'", "payload", "region"]),
    ('job = "reports.nightly"\nevery = 60\nwhen = "always"', ["'nightly'", "when", "unknown key"]),
    ('job = "reports.nightly"\nevery = 60\ncatch_up = "some"', ["'nightly'", "catch_up"]),
    ('job = "reports.nightly"\nevery = 60\nexpires = -1', ["'nightly'", "expires"]),
    ('job = "reports.nightly"\nevery = 60\nconnection = "elsewhere"\npayload = { region = "eu" }',
     ["'nightly'", "connection", "elsewhere"]),
])
def test_every_boot_error_names_the_entry_and_the_field(tmp_path: Path, body: str, names: list[str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        from_toml(tmp_path, "[schedules.nightly]\n" + body).schedules.entries()
    for name in names:
        assert name in str(caught.value)


def test_a_payload_error_never_quotes_the_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        from_toml(tmp_path, '[schedules.n]\njob = "reports.nightly"\nevery = 60\npayload = { region = 9876543 }'
                  ).schedules.entries()
    assert "9876543" not in str(caught.value)


def test_entries_in_code_take_an_instance_or_a_class_with_fields() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    bridge.schedule("a", Report(region="a"), every=3600)
    bridge.schedule("b", Report, fields={"region": "b"}, cron="0 * * * *", tries=7)
    with pytest.raises(ConfigurationError, match="declared twice"):
        bridge.schedule("a", Report(region="a"), every=60)
    with pytest.raises(ConfigurationError, match="every="):
        bridge.schedule("c", Report(region="c"))
    Scheduler(bridge).step()
    envs = {r.envelope.headers[SCHEDULE_HEADER]: r.envelope for r in bridge.driver().reserve(["default"], 10)}
    assert envs["a"].payload == {"region": "a", "day": 0} and envs["b"].tries == 7
    assert envs["a"].headers[TICK_HEADER] == NOON


def test_a_job_not_registered_fails_when_the_entries_are_checked() -> None:
    class Stray(Job, name="stray"):
        def handle(self, ctx: JobContext) -> None: ...

    bridge = memory_bridge(FixedClock(NOON))
    bridge.schedule("stray", Stray(), every=60)
    with pytest.raises(ConfigurationError, match="schedule 'stray': job"):
        Scheduler(bridge)


def test_a_driver_that_cannot_fire_atomically_is_refused_saying_what_to_declare() -> None:
    settings = Settings.from_mapping({"connections": {
        "default": "bulk",
        "bulk": {"driver": "sqs", "queue_url": "sqs://000000000000/jobs", "endpoint": "http://127.0.0.1:9",
                 "region": "us-east-1"},
        "db": {"driver": "memory"}}})
    bridge = JobBridge(settings, jobs=[Report])
    bridge.schedule("on-sqs", Report(region="x"), every=60)
    with pytest.raises(ConfigurationError, match=r"'on-sqs'.*sqs driver.*connection = \"<name>\""):
        Scheduler(bridge)
    bridge.schedules = type(bridge.schedules)(bridge)
    bridge.schedule("on-db", Report(region="x"), every=60, connection="db")
    assert [e.name for e in Scheduler(bridge).entries] == ["on-db"]


# -- ticks: new entries, missed ones, expiry -------------------------------------------------------


def test_a_new_nightly_entry_deployed_at_noon_first_fires_that_night() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    bridge.schedule("nightly", Report(region="n"), cron="30 2 * * *")
    scheduler = Scheduler(bridge)
    assert [f.outcome for f in scheduler.step()] == [Fire.ADVANCED]  # 02:30 today was ten hours ago
    clock.set(datetime(2024, 6, 6, 2, 30, 1, tzinfo=UTC))
    assert [f.outcome for f in scheduler.step()] == [Fire.PUSHED]
    assert scheduler.until_due() == 30.0  # nothing due for a day: it looks again after MAX_WAIT


def test_a_tick_whose_job_expired_before_it_fired_is_recorded_not_pushed() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    bridge.schedule("m", Report(region="m"), every=60, expires=20, catch_up="all")
    scheduler = Scheduler(bridge)
    scheduler.step()
    clock.advance(150 + 10)  # ticks at +60 and +120 were missed; +120 is 40 s old, past its 20 s
    outcomes = [(f.tick - NOON, f.outcome) for f in scheduler.step()]
    assert outcomes == [(60.0, Fire.ADVANCED), (120.0, Fire.ADVANCED)]
    assert len(bridge.driver().reserve(["default"], 10)) == 1  # only the first tick's job


def test_expires_next_drops_a_tick_job_no_worker_started_before_the_next_tick() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    bridge.schedule("m", Report(region="m"), every=60, expires="next")
    scheduler = Scheduler(bridge)
    scheduler.step()
    clock.advance(60)
    scheduler.step()
    stats = bridge.run_pending()
    assert (stats.expired, stats.succeeded) == (1, 1)
    assert RAN == [("m", NOON + 60)]


def test_a_manual_run_is_a_tick_of_its_own_and_the_grid_tick_still_fires() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    bridge.schedule("m", Report(region="m"), every=60)
    scheduler = Scheduler(bridge)
    scheduler.step()
    clock.advance(30)
    job_id = scheduler.fire_now("m")
    assert scheduler.last_ticks()["m"].tick == NOON  # the grid's last tick is untouched
    clock.advance(30)
    assert [f.outcome for f in scheduler.step()] == [Fire.PUSHED]
    manual = [r.envelope for r in bridge.driver().reserve(["default"], 10) if r.id == job_id]
    assert manual and manual[0].headers[MANUAL_HEADER] is True


# -- expires on any dispatch -----------------------------------------------------------------------


def test_a_dispatch_with_expires_not_started_in_time_is_acknowledged_unrun_and_reported(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    heard: list[str] = []

    def on_expired(sender: Any, envelope: Any, **_: Any) -> None:
        heard.append(envelope.id)

    signals.job_expired.connect(on_expired)
    try:
        late = bridge.dispatch(Report(region="late"), expires=timedelta(seconds=30))
        in_time = bridge.dispatch(Report(region="ok"), expires=datetime.fromtimestamp(NOON + 300, UTC))
        clock.advance(60)
        with caplog.at_level(logging.INFO, logger="jobbridge.job"):
            stats = bridge.run_pending()
    finally:
        signals.job_expired.disconnect(on_expired)
    assert (stats.expired, stats.succeeded) == (1, 1) and RAN == [("ok", None)]
    assert heard == [late]
    assert any(f"job_id={late}" in r.message and "outcome=expired" in r.message for r in caplog.records)
    record = bridge.result(str(late))
    assert record is not None and record.state == REVOKED
    assert bridge.result(str(in_time)).state == "SUCCESS"  # type: ignore[union-attr]
    assert bridge.driver().counts() == [] or all(c.pending == 0 for c in bridge.driver().counts())


def test_expires_travels_in_the_stored_envelope() -> None:
    clock = FixedClock(NOON)
    bridge = memory_bridge(clock)
    env = bridge.envelope(Report(region="x"), expires=90)
    assert env.expires_at == NOON + 90
    assert type(env).decode(env.encode()).expires_at == NOON + 90
    plain = bridge.envelope(Report(region="x"))
    assert b"expires_at" not in plain.encode()


# -- the commands ----------------------------------------------------------------------------------


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An app on a SQLite file, importable as ``sched_app`` from the working directory."""
    (tmp_path / "sched_app.py").write_text(textwrap.dedent(f"""
        from jobbridge import JobBridge
        from jobbridge.settings import Settings
        from tests.unit.test_schedules import Report

        bridge = JobBridge(Settings.from_mapping({{"database_url": "sqlite:///{tmp_path / 'jobs.sqlite3'}"}}),
                           jobs=[Report])
        bridge.schedule("hourly-eu", Report(region="eu"), cron="0 * * * *", tz="Europe/Berlin")
        bridge.schedule("minutely", Report(region="m"), every=60)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "sched_app:bridge"


def test_schedules_lists_each_entry_and_run_fires_one(app_module: str) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["schedules", "-A", app_module])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["entry", "job", "trigger", "tz", "next", "due", "last", "fired", "last", "job"]
    assert "hourly-eu" in lines[1] and "cron 0 * * * *" in lines[1] and "Europe/Berlin" in lines[1]
    assert lines[2].split()[-2:] == ["-", "-"]  # never fired
    fired = runner.invoke(cli, ["schedules", "-A", app_module, "run", "minutely"])
    assert fired.exit_code == 0 and fired.output.startswith("fired minutely: job ")
    unknown = runner.invoke(cli, ["schedules", "run", "nope", "-A", app_module])
    assert unknown.exit_code == 1 and "no schedule entry is named 'nope'" in unknown.output


def test_the_worker_takes_schedule_and_still_refuses_celerys_scheduler_options() -> None:
    runner = CliRunner()
    assert "--schedule" in runner.invoke(cli, ["worker", "--help"]).output
    refused = runner.invoke(cli, ["worker", "-A", "x:y", "--scheduler", "z"])
    assert refused.exit_code == 2 and "--schedule" in refused.output
