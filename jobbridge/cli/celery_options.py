"""The Celery worker options jobbridge cannot honour, each refused by name with the reason and what to use.

``-E/--task-events`` is accepted (cookiecutter-django's compose files pass it for Flower): the worker
starts, and says in one warning line that no Celery events are sent and what to watch instead.

A Celery user's command line comes over as it was: the spellings jobbridge
shares (``-Q``, ``-c``, ``-l``, ``-n``, ``--max-tasks-per-child``) work, and an
option it cannot honour is an error naming it, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from jobbridge.loading import TASK_EVENTS_ASKED

F = TypeVar("F", bound=Callable[..., Any])

NO_DAEMON = "run the worker in the foreground under systemd or another process manager (docs/deployment.md)"
#: Celery worker options jobbridge cannot honour: (names, takes a value, why and what to use instead)
CELERY_REFUSED: tuple[tuple[tuple[str, ...], bool, str], ...] = (
    (("-P", "--pool"), True, "jobbridge runs sync jobs on threads and async jobs on one event loop per "
     "process, so there is no pool to choose; use --concurrency (threads) and --processes"),
    (("--autoscale",), True, "the number of threads is fixed; set --concurrency and --processes, and scale "
     "by running more worker processes"),
    (("--without-gossip", "--without-mingle"), False, "workers do not talk to each other, so there is no "
     "gossip or mingle to turn off; drop the option"),
    (("--without-heartbeat",), False, "the heartbeat renews running jobs' reservations; drop the option"),
    (("--heartbeat-interval",), True, "the heartbeat runs every quarter of the connection's reservation; "
     "set reservation instead"),
    (("--prefetch-multiplier",), True, "the worker reserves only what its threads will start soon (about "
     "20 ms of work ahead while jobs are short); drop the option"),
    (("--time-limit", "--soft-time-limit"), True, "a time limit belongs to each job: set timeout= on the "
     "job class, or with the Celery facade @app.task(time_limit=..., soft_time_limit=...) or the "
     "task_time_limit / task_soft_time_limit settings"),
    (("--max-memory-per-child",), True, "memory is not measured; recycle by count with "
     "--max-tasks-per-child, or cap memory in the process manager (systemd MemoryMax=)"),
    (("--purge", "--discard"), False, "a worker never discards waiting jobs; `jobbridge flush` deletes the "
     "failed ones"),
    (("-D", "--detach"), False, NO_DAEMON),
    (("--pidfile",), True, NO_DAEMON),
    (("-f", "--logfile"), True, "the worker logs to stderr; let the process manager (journald) keep it"),
    (("-S", "--statedb"), True, "a worker keeps no state of its own; everything is in the store"),
    (("-X", "--exclude-queues"), True, "name the queues to work with -Q/--queue, in priority order"),
    (("-I", "--include"), True, "import your job modules from the module that -A names"),
    (("--uid", "--gid", "--umask"), True, "set User=, Group= and UMask= in the systemd unit"),
)


#: the ``-S/--scheduler`` values a scheduler takes: jobbridge's own (Celery's default names it), and
#: django-celery-beat's, whose tables the Celery facade then reads as well
SCHEDULERS = ("celery.beat:PersistentScheduler", "celery.beat.PersistentScheduler", "celery.beat:Scheduler",
              "celery.beat.Scheduler", "jobbridge", "django_celery_beat.schedulers:DatabaseScheduler",
              "django_celery_beat.schedulers.DatabaseScheduler")
STATE_IN_STORE = ("the schedule file is not used: each entry's last tick is kept in the store, beside the jobs, "
                  "so that any number of schedulers agree on it")


def check_scheduler(value: str | None) -> str | None:
    """``-S/--scheduler``: the default or django-celery-beat's; any other is a usage error saying why."""
    if value is None or value in SCHEDULERS:
        return value
    raise click.UsageError(f"--scheduler {value!r}: jobbridge runs its own scheduler, which keeps each entry's "
                           "last tick in the store so that any number of schedulers fire each tick once; it takes "
                           "celery.beat:PersistentScheduler (the default) or "
                           "django_celery_beat.schedulers:DatabaseScheduler (whose tables the Celery facade "
                           "reads as well). Drop the option, or name one of those")


def _refuse_option(names: Sequence[str], why: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value not in (None, False):
            raise click.UsageError(f"{'/'.join(names)} is a Celery worker option that jobbridge does not "
                                   f"honour: {why}.", ctx)

    return callback


def _task_events(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """``-E``: accepted, so a Celery command line runs; the worker says once that no events are sent."""
    if value:
        ctx.meta[TASK_EVENTS_ASKED] = True


def refused_celery_options(func: F) -> F:
    """Every refused option as a hidden option of the command, whose use is a usage error saying why;
    and ``-E/--task-events``, accepted with one warning line at the worker's start (jobbridge/loading.py)."""
    for names, takes_value, why in CELERY_REFUSED:
        func = click.option(*names, is_flag=not takes_value, hidden=True, expose_value=False,
                            callback=_refuse_option(names, why))(func)
    return click.option("-E", "--task-events", is_flag=True, hidden=True, expose_value=False, is_eager=True,
                        callback=_task_events)(func)


#: the refused options' names, for the worker's --help
REFUSED_NAMES = ", ".join("/".join(names) for names, _, _ in CELERY_REFUSED)
