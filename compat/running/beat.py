"""Beat on jobbridge's scheduler: each ``beat_schedule`` entry becomes a schedule entry of the app's JobBridge.

`declare` adds the entries when the app builds its JobBridge (every process
does, so ``jobbridge schedules -A proj`` lists them), each with an envelope
factory that builds the task message ``apply_async`` would send. Nothing is
checked against the registry then: the task is looked up when a scheduler
starts (the core builds every entry's envelope once, so an unknown task fails
the scheduler's boot naming the entry).

`on_scheduler_starting` runs when a scheduler of a facade app starts (the
core's ``scheduler_starting``): it checks ``beat_scheduler`` (or ``-S``), and
only there, so a setting that only a scheduler reads never fails a worker,
``delay()`` or ``manage.py migrate``; it attaches django-celery-beat's tables
when that scheduler is named; it sends ``beat_init`` (a scheduler alone) or
``beat_embedded_init`` (one inside a worker); and it returns
``beat_max_loop_interval`` (or ``--max-interval``), which caps the scheduler's
wait between looks.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from jobbridge import JobBridge
from jobbridge import signals as core
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError
from jobbridge.scheduling.entries import Tick
from jobbridge.scheduling.sources import use_task_messages
from jobbridge.scheduling.triggers import Every

from .. import signals
from ..canvas.signature import Signature
from ..config import beat as beat_config
from ..config.beat import BeatEntry
from ..exceptions import ImproperlyConfigured
from ..ports import AppPort
from ..schedules import zone_name
from . import calling, lifecycle

log = logging.getLogger("jobbridge.compat.beat")
#: the integration that reads django-celery-beat's tables (imported when such a scheduler starts)
DJANGO_BEAT = "jobbridge.integrations.django_beat"


def declare(app: AppPort, bridge: JobBridge, periodic: Mapping[str, Mapping[str, Any]], *,
            with_settings: bool = False) -> None:
    """Add the ``add_periodic_task`` entries (and with ``with_settings`` those of ``beat_schedule``) to ``bridge``."""
    tz = zone_name(calling.zone(app))
    for entry in beat_config.entries(app.conf["beat_schedule"] if with_settings else None, periodic):
        add(app, bridge, entry, tz)


def periodic_entry(schedule: Any, sig: Any, args: Sequence[Any], kwargs: Any, name: str | None,
                   options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``add_periodic_task``'s key and entry, as Celery makes them: the key is ``name``, else the call's repr."""
    call_kwargs = dict(kwargs) if kwargs else {}
    if isinstance(sig, Signature):
        sig = sig.clone(tuple(args), call_kwargs) if args or call_kwargs else sig
        task, sig_args, sig_kwargs, sig_options = sig.task, tuple(sig.args), dict(sig.kwargs), dict(sig.options)
    elif isinstance(getattr(sig, "name", None), str):  # a task: Celery calls it with args and kwargs
        task, sig_args, sig_kwargs, sig_options = sig.name, tuple(args), call_kwargs, {}
    else:
        raise TypeError(f"add_periodic_task() takes a signature (task.s(...)) or a task, not {type(sig).__name__}")
    key = name or _reprcall(task, sig_args, sig_kwargs)
    return key, {"schedule": schedule, "task": task, "args": sig_args, "kwargs": sig_kwargs,
                 "options": {**sig_options, **options}}


def _reprcall(task: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """``repr`` of a Celery signature (``proj.tasks.add(2, y=3)``), the default key of a periodic task."""
    shown = [*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())]
    return f"{task}({', '.join(shown)})"


def add(app: AppPort, bridge: JobBridge, entry: BeatEntry, tz: str) -> None:
    """One entry on ``bridge``: its trigger read in ``tz``, its ticks' messages built by `factory`."""
    try:
        trigger = entry.schedule.trigger(tz, entry.relative)
    except ConfigurationError as exc:
        raise ImproperlyConfigured(f"beat_schedule entry {entry.name!r}: schedule: {exc}") from None
    every, cron = (trigger.seconds, None) if isinstance(trigger, Every) else (None, trigger)
    try:
        bridge.schedules.add(entry.name, every=every, cron=cron, expires=entry.expires,
                             catch_up=entry.catch_up,  # type: ignore[arg-type]  # checked by beat_config
                             envelope=factory(app, entry))
    except ConfigurationError as exc:
        raise ImproperlyConfigured(f"beat_schedule entry {entry.name!r}: {exc}") from None


def factory(app: AppPort, entry: BeatEntry) -> Any:
    """The function of a tick that builds its task message, as ``apply_async(args, kwargs, **options)`` would."""
    def build(tick: Tick) -> Envelope:
        task = app.tasks.get(entry.task)
        if task is None:
            raise ImproperlyConfigured(
                f"beat_schedule entry {entry.name!r}: task {entry.task!r} is not registered in this app, so its "
                "routing and options are unknown; import its module from the app (include=, imports= or "
                "autodiscover_tasks()), or fix the name")
        try:
            return calling.prepare(app, entry.task, entry.args, entry.kwargs, entry.options, task).envelope()
        except (TypeError, ImproperlyConfigured) as exc:
            raise ImproperlyConfigured(f"beat_schedule entry {entry.name!r}: options: {exc}") from None

    return build


#: a row Celery's own DatabaseScheduler adds; jobbridge's result stores expire results by themselves
_BACKEND_CLEANUP = "celery.backend_cleanup"


def task_messages(app: AppPort) -> Any:
    """How a django-celery-beat row's task becomes a message: ``apply_async(args, kwargs, **options)``'s.

    A task this app does not register is refused, as in a ``beat_schedule`` entry (its
    routing and options are unknown); the row is then skipped, naming why.
    """
    def build(task: str, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any]) -> Envelope:
        found = app.tasks.get(task)
        if found is None and task == _BACKEND_CLEANUP:
            raise ImproperlyConfigured(f"task {task}: results expire in jobbridge's result store by themselves "
                                       "(result_expires); disable or delete this periodic task")
        if found is None:
            raise ImproperlyConfigured(f"task {task!r:.80} is not registered in this app; import its module from "
                                       "the app (autodiscover_tasks(), include= or imports=), or fix the name")
        return calling.prepare(app, task, args, kwargs, options, found).envelope()

    return build


class BeatService:
    """The ``sender`` of ``beat_init`` / ``beat_embedded_init``: what Celery's beat service offers."""

    def __init__(self, app: AppPort, scheduler_cls: str, max_interval: float | None, schedule: str | None) -> None:
        self.app = app
        self.scheduler_cls = scheduler_cls
        self.max_interval = max_interval
        self.schedule_filename = schedule

    def __repr__(self) -> str:
        return f"<Beat: {self.scheduler_cls} (jobbridge)>"


def on_scheduler_starting(sender: Any, embedded: bool = False, options: Mapping[str, Any] | None = None,
                          **kwargs: Any) -> float | None:
    """A scheduler of a facade app is starting: check and attach what beat's settings name; its max wait."""
    app = lifecycle._apps.get(sender) if isinstance(sender, JobBridge) else None
    if app is None:
        return None
    given = dict(options or {})
    named = given.get("scheduler") or app.conf["beat_scheduler"]
    where = "-S/--scheduler" if given.get("scheduler") else "beat_scheduler"
    kind = beat_config.scheduler_kind(named, where)
    wait = given.get("max_interval") or beat_config.max_wait(app.conf["beat_max_loop_interval"])
    if given.get("schedule_filename"):
        log.info("beat: the schedule file %s is not used: each entry's last tick is kept in the store, beside the "
                 "jobs, so that any number of schedulers agree on it", given["schedule_filename"])
    if kind == "django":
        use_task_messages(sender, task_messages(app))  # a row's task is sent as send_task would send it
        importlib.import_module(DJANGO_BEAT).attach(sender)
    service = BeatService(app, str(named or "celery.beat:PersistentScheduler"), wait,
                          given.get("schedule_filename"))
    (signals.beat_embedded_init if embedded else signals.beat_init).send(sender=service)
    return None if wait is None else float(wait)


def on_schedules_listing(sender: Any, **kwargs: Any) -> None:
    """``jobbridge schedules`` of a facade app: django-celery-beat's rows are listed when beat reads them."""
    app = lifecycle._apps.get(sender) if isinstance(sender, JobBridge) else None
    if app is None:
        return
    if beat_config.scheduler_kind(app.conf["beat_scheduler"], "beat_scheduler") == "django":
        use_task_messages(sender, task_messages(app))
        importlib.import_module(DJANGO_BEAT).attach(sender)


core.scheduler_starting.connect(on_scheduler_starting, weak=False)
core.schedules_listing.connect(on_schedules_listing, weak=False)

__all__ = ["BeatService", "declare", "factory", "on_scheduler_starting", "on_schedules_listing", "periodic_entry"]
