"""``beat_schedule`` entries and the beat settings, read and checked: what a scheduler of the facade fires.

An entry is Celery's dict (``task``, ``schedule``, ``args``, ``kwargs``,
``options``, ``relative``); every mistake fails naming the entry and the key.
The schedule may be a number of seconds, a timedelta, ``schedule(...)`` or
``crontab(...)``; ``solar`` and schedule classes of one's own are refused at the
entry, since every scheduler must compute the same ticks from it.

``beat_scheduler`` is checked only when a scheduler starts (`scheduler_kind`),
never when the setting is read: a Django project whose settings name
django-celery-beat's scheduler must still run ``manage.py migrate``, a plain
worker and ``delay()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from ..exceptions import ImproperlyConfigured, RefusedFeature
from ..schedules import SOLAR_REFUSED, BaseSchedule, crontab, schedule, solar

SchedulerKind = Literal["default", "django"]
#: the ``beat_scheduler`` values that mean jobbridge's own scheduler
DEFAULT_SCHEDULERS = frozenset({
    "celery.beat:PersistentScheduler", "celery.beat.PersistentScheduler", "celery.beat:Scheduler",
    "celery.beat.Scheduler", "jobbridge", "jobbridge.scheduling.scheduler:Scheduler",
    "jobbridge.scheduling.scheduler.Scheduler",
})
#: django-celery-beat's: its entries are read from its tables as well (jobbridge.integrations.django_beat)
DJANGO_SCHEDULERS = frozenset({"django_celery_beat.schedulers:DatabaseScheduler",
                               "django_celery_beat.schedulers.DatabaseScheduler"})
ENTRY_KEYS = ("task", "schedule", "args", "kwargs", "options", "relative")
#: options read by the scheduler, not by the message: seconds after the tick, what follows missed ticks
ENTRY_OPTIONS = ("expires", "catch_up")
_REFUSED_OPTIONS = {
    "task_id": "each tick's task gets an id of its own; one id for every tick would make them one task",
    "eta": "a fixed moment would hold every tick's task until then; use countdown= (seconds after the tick)",
    "transaction": "a tick has no caller whose transaction it could join",
}


@dataclass(frozen=True)
class BeatEntry:
    """One periodic task: the entry's name (its key in the store), the task, and when."""

    name: str
    task: str
    schedule: BaseSchedule
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    relative: bool = False
    expires: float | None = None
    catch_up: str = "latest"


def _fail(name: str, key: str, why: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"beat_schedule entry {name!r}: {key}: {why}")


def entries(beat_schedule: Any, periodic: Mapping[str, Mapping[str, Any]]) -> list[BeatEntry]:
    """The entries of ``beat_schedule`` and of ``add_periodic_task`` (which wins for one name, as in Celery)."""
    if beat_schedule is None:
        beat_schedule = {}
    if not isinstance(beat_schedule, Mapping):
        raise ImproperlyConfigured(f"beat_schedule must be a dict of entry name to entry, not "
                                   f"{type(beat_schedule).__name__}")
    merged = {**beat_schedule, **periodic}
    return [entry_of(str(name), spec) for name, spec in merged.items()]


def entry_of(name: str, spec: Any) -> BeatEntry:
    """One entry, every key checked."""
    if not isinstance(spec, Mapping):
        raise _fail(name, "entry", f"must be a dict with task and schedule, not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(ENTRY_KEYS))
    if unknown:
        raise _fail(name, unknown[0], f"is not a key of a beat entry (it takes {', '.join(ENTRY_KEYS)})")
    task = spec.get("task")
    if not isinstance(task, str) or not task:
        raise _fail(name, "task", "must be the task's name, a non-empty string")
    relative = spec.get("relative", False)
    if not isinstance(relative, bool):
        raise _fail(name, "relative", f"must be True or False, not {relative!r:.40}")
    options, expires, catch_up = _options(name, spec.get("options"))
    return BeatEntry(name, task, _schedule(name, spec.get("schedule"), relative), _args(name, spec.get("args")),
                     _kwargs(name, spec.get("kwargs")), options, relative, expires, catch_up)


def _schedule(name: str, value: Any, relative: bool) -> BaseSchedule:
    if isinstance(value, bool) or value is None:
        raise _fail(name, "schedule", "is required: seconds, a timedelta, schedule(...) or crontab(...)")
    if isinstance(value, int | float | timedelta):
        value = schedule(value, relative)
    if isinstance(value, solar):
        raise RefusedFeature(f"beat_schedule entry {name!r}: schedule: {SOLAR_REFUSED}")
    if not isinstance(value, BaseSchedule):
        raise _fail(name, "schedule", f"must be seconds, a timedelta, schedule(...) or crontab(...), not "
                                      f"{type(value).__name__}")
    if type(value) not in (schedule, crontab) and _overrides_is_due(value):
        raise RefusedFeature(f"beat_schedule entry {name!r}: schedule: {type(value).__name__} decides when it "
                             "is due by code of its own, which every scheduler would have to run alike to fire "
                             "each tick once; write it as a crontab(...) or an interval")
    if value.nowfun is not None:
        raise RefusedFeature(f"beat_schedule entry {name!r}: schedule: nowfun is refused here: every scheduler "
                             "judges ticks by the store's clock, so that all agree on when a tick is due; the "
                             "crontab is read in the app's timezone setting (remove nowfun)")
    if isinstance(value, schedule) and value.seconds < 1:
        raise _fail(name, "schedule", f"an interval of {value.seconds:g}s is shorter than the 1 s jobbridge's "
                                      "scheduler allows")
    return value


def _overrides_is_due(value: BaseSchedule) -> bool:
    base: type[BaseSchedule] = crontab if isinstance(value, crontab) else \
        schedule if isinstance(value, schedule) else BaseSchedule
    return type(value).is_due is not base.is_due or type(value).remaining_estimate is not base.remaining_estimate


def _args(name: str, value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise _fail(name, "args", f"must be a list or tuple, not {type(value).__name__}")
    return tuple(value)


def _kwargs(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _fail(name, "kwargs", "must be a dict with string keys")
    return dict(value)


def _options(name: str, value: Any) -> tuple[dict[str, Any], float | None, str]:
    """The message's options, the entry's expiry (seconds after the tick) and its catch_up."""
    if value is None:
        return {}, None, "latest"
    if not isinstance(value, Mapping):
        raise _fail(name, "options", f"must be a dict of apply_async options, not {type(value).__name__}")
    options = dict(value)
    for key, why in _REFUSED_OPTIONS.items():
        if options.get(key) is not None:
            raise RefusedFeature(f"beat_schedule entry {name!r}: options: {key} is refused: {why}")
    expires = options.pop("expires", None)
    if isinstance(expires, timedelta):
        expires = expires.total_seconds()
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float) or expires <= 0):
        raise _fail(name, "options: expires", "must be a positive number of seconds (or a timedelta) after the "
                                              f"tick, not {expires!r:.40}")
    catch_up = options.pop("catch_up", "latest")
    if catch_up not in ("latest", "none", "all"):
        raise _fail(name, "options: catch_up", f"must be 'latest', 'none' or 'all', not {catch_up!r:.40}")
    return options, None if expires is None else float(expires), catch_up


def scheduler_kind(value: Any, where: str = "beat_scheduler") -> SchedulerKind:
    """What ``beat_scheduler`` (or ``-S``) names: jobbridge's scheduler, or that plus django-celery-beat's tables."""
    if value is None or value == "":
        return "default"
    text = value if isinstance(value, str) else f"{getattr(value, '__module__', '')}:" \
        f"{getattr(value, '__qualname__', '')}"
    if text in DEFAULT_SCHEDULERS:
        return "default"
    if text in DJANGO_SCHEDULERS:
        return "django"
    raise RefusedFeature(
        f"{where} = {text!r:.80} is refused: jobbridge runs its own scheduler, which keeps each entry's last tick "
        "in the store so that any number of schedulers fire each tick once; it can also read django-celery-beat's "
        "tables. Write instead: remove it (or name celery.beat:PersistentScheduler, or "
        "django_celery_beat.schedulers:DatabaseScheduler)")


def max_wait(value: Any) -> float | None:
    """``beat_max_loop_interval``: the longest the scheduler waits between looks, in seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ImproperlyConfigured(f"beat_max_loop_interval must be a positive number of seconds, not {value!r:.40}")
    return float(value)


__all__ = ["DEFAULT_SCHEDULERS", "DJANGO_SCHEDULERS", "BeatEntry", "entries", "entry_of", "max_wait",
           "scheduler_kind"]
