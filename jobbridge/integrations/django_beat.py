"""django-celery-beat's tables as an entry source: the Django admin stays where periodic tasks are edited.

With ``CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"``
a project keeps its periodic tasks in django-celery-beat's tables and edits
them in the admin. `attach` makes a bridge's schedulers read those rows
(through the Django ORM, Django set up by ``-A`` loading) beside the entries
declared in code, and fire them with the same guarantee: each tick goes
through the schedule store (`jobbridge.drivers.schedule_port`), so it is
dispatched exactly once however many schedulers run. What is read, per
enabled ``PeriodicTask``:

- its schedule: an ``IntervalSchedule`` (a fixed grid of ``every`` times ``period``
  from the epoch, as every jobbridge interval), a ``CrontabSchedule`` (read in
  its own ``timezone``; in the app's when ``DJANGO_CELERY_BEAT_TZ_AWARE`` is
  False; both day fields must match, Celery's rule), or a ``ClockedSchedule``
  (one tick at its time); a ``SolarSchedule`` is refused, per entry;
- ``task``, ``args``, ``kwargs`` (JSON), ``queue``, ``exchange``,
  ``routing_key``, ``priority``, ``headers`` (JSON, with
  ``periodic_task_name``), handed to the bridge's task-message builder
  (`jobbridge.scheduling.sources.task_message`: the facade's, so the job is the
  message ``send_task`` would push; which refuses what it refuses elsewhere);
- ``start_time`` (no tick before it), ``expires`` (no tick from then on, and
  each tick's job expires then), ``expire_seconds`` (each tick's job expires
  that long after its tick), ``one_off`` (one tick, then the row is disabled).

Changes are picked up: each scheduler reads ``PeriodicTasks.last_update``
(one row, bumped by django-celery-beat on every save and delete) at most every
`jobbridge.scheduling.scheduler.SOURCE_POLL` seconds and reads the rows again
when it moved. Ticks of a row are bounded to those after the row's
``date_changed``, so an edit never fires the new schedule's past ticks as
missed ones, and a row disabled and enabled again does not fire what fell
while it was off; every scheduler draws that line alike, from the row.

A row that cannot be fired (bad JSON, a refused option, a solar schedule) is
logged at ERROR naming it and skipped; the others fire. The scheduler that
pushed a tick records it in the row (``last_run_at``, ``total_run_count``,
what the admin shows) with a plain UPDATE that bumps neither ``date_changed``
nor ``last_update``; a one-off row is disabled there, and ``last_update``
bumped so that every scheduler drops it. That bookkeeping is for display: the
schedule store is what keeps a tick from firing twice, so a scheduler killed
between the push and the UPDATE costs a count, never a dispatch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections
from django.db.models import F
from django.utils import timezone as django_time

from jobbridge.app import JobBridge
from jobbridge.drivers.schedule_port import Fire
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.cron import Cron
from jobbridge.scheduling.entries import Entry, Tick
from jobbridge.scheduling.scheduler import Fired
from jobbridge.scheduling.sources import TaskMessage, task_message
from jobbridge.scheduling.triggers import Every, Trigger
from jobbridge.scheduling.windows import Once, Window

__all__ = ["APP", "SCHEDULER", "BeatSource", "attach"]

log = logging.getLogger("jobbridge.schedule")

APP = "django_celery_beat"
#: the ``beat_scheduler`` value that names this source
SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
PERIODS = {"days": 86400.0, "hours": 3600.0, "minutes": 60.0, "seconds": 1.0, "microseconds": 1e-6}
_SOLAR = ("solar: schedules by sunrise and sunset are not provided; give the task a crontab schedule at the "
          "local time it should run instead")


def attach(bridge: JobBridge) -> None:
    """Make ``bridge``'s schedulers read django-celery-beat's entries too; a second call does nothing.

    Called when a scheduler starts for an app whose ``beat_scheduler`` names
    django-celery-beat's DatabaseScheduler (the Celery facade does), after Django is set up.
    """
    if any(isinstance(source, BeatSource) for source in bridge.schedules.sources()):
        return
    if not settings.configured or not apps.ready:
        raise ConfigurationError(f"beat_scheduler {SCHEDULER!r}: Django is not set up in this process; run the "
                                 "scheduler with -A naming the Django project (its celery.py sets "
                                 "DJANGO_SETTINGS_MODULE)")
    if not apps.is_installed(APP):
        raise ConfigurationError(f"beat_scheduler {SCHEDULER!r}: {APP!r} is not in INSTALLED_APPS; add it (and "
                                 "run manage.py migrate), or remove the setting")
    bridge.schedules.add_source(BeatSource(bridge))


class BeatSource:
    """The enabled rows of django-celery-beat's ``PeriodicTask`` table, as entries (see the module docstring)."""

    name = "django-celery-beat"

    def __init__(self, bridge: JobBridge, message: TaskMessage | None = None) -> None:
        self.bridge = bridge
        self._message = message
        self._one_off: set[str] = set()
        self._refused: dict[str, str] = {}

    def version(self) -> object:
        """``PeriodicTasks.last_update``: one row by its primary key."""
        from django_celery_beat.models import PeriodicTasks

        try:
            return PeriodicTasks.last_change()
        finally:
            _close_stale()

    def entries(self) -> list[Entry]:
        from django_celery_beat.models import PeriodicTask

        try:
            rows = list(PeriodicTask.objects.filter(enabled=True)
                        .select_related("interval", "crontab", "solar", "clocked").order_by("name"))
        finally:
            _close_stale()
        message = self._message or task_message(self.bridge)
        found: list[Entry] = []
        refused: dict[str, str] = {}
        for row in rows:
            try:
                entry = self._entry(row, message)
            except Exception as exc:  # an entry edited in the admin must never stop the scheduler
                refused[row.name] = why = str(exc)
                if self._refused.get(row.name) != why:  # once per process, not at every re-read
                    log.error("django-celery-beat entry %r: %s; it is skipped until it is fixed",
                              str(row.name)[:200], why)
                continue
            if entry is not None:
                found.append(entry)
        self._one_off = {entry.name for entry in found if entry.first_fires_late}
        self._refused = refused
        return found

    def fired(self, fired: Sequence[Fired]) -> None:
        """The pushing scheduler's bookkeeping: ``last_run_at`` and ``total_run_count``; one-off rows disabled."""
        from django_celery_beat.models import PeriodicTask, PeriodicTasks

        try:
            for done in fired:
                if done.outcome is Fire.PUSHED:
                    PeriodicTask.objects.filter(name=done.entry).update(
                        last_run_at=_stored(done.tick), total_run_count=F("total_run_count") + 1)
            spent = [done.entry for done in fired if done.entry in self._one_off and done.outcome is not Fire.TAKEN]
            if spent:
                PeriodicTask.objects.filter(name__in=spent).update(enabled=False)
                PeriodicTasks.update_changed()
        finally:
            _close_stale()

    def _entry(self, row: Any, message: TaskMessage) -> Entry | None:
        """The row's entry; None when it has no tick left (a one-off past its ``expires``)."""
        trigger, zone_name = self._trigger(row)
        defined, begins = _moment(row.date_changed), _moment(row.start_time)
        start = defined if defined is not None else self.bridge.clock.now()
        start = start if begins is None else max(start, begins)
        end = _moment(row.expires)
        once = bool(row.one_off) or row.clocked_id is not None
        bounded: Trigger = Window(trigger, start, end)
        if once:
            first = _one_tick(row, Window(trigger, start, end), start)
            if first is None or (end is not None and first >= end):
                log.info("django-celery-beat entry %r: its one tick would fall after its expires; nothing fires",
                         row.name)
                return None
            bounded = Once(first, zone_name)
        task, args, kwargs, options = _call(row)

        def build(tick: Tick) -> Envelope:
            return message(task, args, kwargs, options)

        entry = Entry(row.name, bounded, build, task, expires=float(row.expire_seconds or 0) or None,
                      first_fires_late=once)
        entry.envelope(Tick(entry.name, self.bridge.clock.now()))  # what cannot be dispatched is refused now
        return entry

    def _trigger(self, row: Any) -> tuple[Trigger, str]:
        """The row's schedule as a trigger, and the zone it is shown in."""
        if row.interval_id is not None:
            interval = row.interval
            if interval.period not in PERIODS:
                raise ConfigurationError(f"interval: period {interval.period!r:.40} is not one of "
                                         f"{', '.join(PERIODS)}")
            try:
                return Every(float(interval.every) * PERIODS[interval.period]), "UTC"
            except ConfigurationError as exc:
                raise ConfigurationError(f"interval: {exc}") from None
        if row.crontab_id is not None:
            return self._crontab(row.crontab)
        if row.clocked_id is not None:
            return Once(_moment(row.clocked.clocked_time) or 0.0), "UTC"
        if row.solar_id is not None:
            raise ConfigurationError(_SOLAR)
        raise ConfigurationError("schedule: the entry names no interval, crontab or clocked schedule")

    def _crontab(self, crontab: Any) -> tuple[Trigger, str]:
        aware = getattr(settings, "DJANGO_CELERY_BEAT_TZ_AWARE", True)
        tz = str(crontab.timezone) if aware and crontab.timezone else self.bridge.settings.timezone
        try:
            trigger = Cron.of(minute=crontab.minute, hour=crontab.hour, day_of_month=crontab.day_of_month,
                              month_of_year=crontab.month_of_year, day_of_week=crontab.day_of_week, days="both",
                              tz=tz)
        except ConfigurationError as exc:
            raise ConfigurationError(f"crontab: {exc}") from None
        return trigger, trigger.zone_name


def _one_tick(row: Any, window: Window, start: float) -> float | None:
    """A one-off row's one tick: its schedule's first at or after ``start``; a clocked row's time, or ``start``.

    ``start`` is when the row was last saved (or its ``start_time``, if later), so every
    scheduler picks the same tick, and a one-off enabled again in the admin fires once more.
    A clocked time already past when the row was saved fires at once, as it would under Celery.
    """
    if row.clocked_id is not None:
        clocked = _moment(row.clocked.clocked_time)
        return start if clocked is None else max(clocked, start)
    return window.first_from(start)


def _call(row: Any) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]]:
    """The row's task, args, kwargs and send options (only those it sets, as django-celery-beat sends them)."""
    args, kwargs, headers = (_json(row, "args", "[]", list), _json(row, "kwargs", "{}", dict),
                             _json(row, "headers", "{}", dict))
    options: dict[str, Any] = {key: getattr(row, key) for key in ("queue", "exchange", "routing_key", "priority")
                               if getattr(row, key) is not None}
    options["headers"] = {**headers, "periodic_task_name": row.name}
    if row.expires is not None:
        options["expires"] = row.expires
    return str(row.task), args, kwargs, options


def _json(row: Any, field: str, empty: str, kind: type) -> Any:
    try:
        value = json.loads(getattr(row, field) or empty)
    except ValueError:
        raise ConfigurationError(f"{field}: is not JSON") from None
    if not isinstance(value, kind):
        raise ConfigurationError(f"{field}: must be a JSON {'list' if kind is list else 'object'}, not a "
                                 f"{type(value).__name__}")
    return value


def _moment(value: datetime | None) -> float | None:
    """A stored datetime as epoch seconds; a naive one (USE_TZ = False) is in Django's TIME_ZONE."""
    if value is None:
        return None
    if django_time.is_naive(value):
        value = django_time.make_aware(value, django_time.get_default_timezone())
    return value.timestamp()


def _stored(tick: float) -> datetime:
    """A tick as Django stores a datetime: aware UTC, or naive in TIME_ZONE when USE_TZ is False."""
    moment = datetime.fromtimestamp(tick, UTC)
    return moment if settings.USE_TZ else django_time.make_naive(moment, django_time.get_default_timezone())


def _close_stale() -> None:
    """This thread's connections closed when broken or past CONN_MAX_AGE, as each request's end would do.

    A scheduler thread serves no requests, so without this its connection would stay open for good.
    A connection inside an atomic block is the caller's own (a test's), left alone.
    """
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()
