"""``jobbridge beat``: Celery's ``celery beat`` command line, running jobbridge's scheduler alone.

It is ``jobbridge scheduler`` with Celery's options: ``-l/--loglevel``,
``--max-interval`` (the longest wait between looks), ``-s/--schedule FILE``
(accepted, with a log line: the state lives in the store) and
``-S/--scheduler`` (the default or django-celery-beat's; any other refused).
Unlike ``celery beat``, any number may run, on any host, beside workers
started with ``-B``: each tick is dispatched once.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from jobbridge.cli.celery_options import NO_DAEMON, STATE_IN_STORE, check_scheduler
from jobbridge.cli.options import load_bridge
from jobbridge.cli.working import LEVELS, configure_logging
from jobbridge.scheduling.commands import run_alone

log = logging.getLogger("jobbridge.schedule")
#: Celery beat options jobbridge cannot honour: (names, takes a value, why and what to use instead)
_REFUSED: tuple[tuple[tuple[str, ...], bool, str], ...] = (
    (("--detach",), False, NO_DAEMON.replace("the worker", "jobbridge beat")),
    (("--pidfile",), True, NO_DAEMON.replace("the worker", "jobbridge beat")),
    (("-f", "--logfile"), True, "jobbridge beat logs to stderr; let the process manager (journald) keep it"),
    (("--uid", "--gid", "--umask"), True, "set User=, Group= and UMask= in the systemd unit"),
    (("-n", "--hostname"), True, "a scheduler answers no remote control, so it needs no node name; drop it"),
    (("--enable-remote-control",), False, "a scheduler answers no remote control; drop it"),
)


def _refuse(names: tuple[str, ...], why: str) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value not in (None, False):
            raise click.UsageError(f"{'/'.join(names)} is a Celery beat option that jobbridge does not honour: "
                                   f"{why}.", ctx)

    return callback


def _refused_options(func: Any) -> Any:
    for names, takes_value, why in _REFUSED:
        func = click.option(*names, is_flag=not takes_value, hidden=True, expose_value=False,
                            callback=_refuse(names, why))(func)
    return func


@click.command(epilog="Celery options refused, each with the reason: "
                      + ", ".join("/".join(names) for names, _, _ in _REFUSED) + ".")
@click.option("-A", "--app", "app", metavar="MODULE[:ATTR]", required=True,
              help="Your Celery facade app (or a JobBridge): its beat_schedule and add_periodic_task entries.")
@click.option("-l", "--loglevel", default="INFO", show_default=True, type=click.Choice(LEVELS, case_sensitive=False),
              help="Logging level; at INFO one line per fired tick (logger jobbridge.schedule).")
@click.option("--max-interval", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="The longest wait between looks at the entries (default: beat_max_loop_interval, else 30 s); "
                   "the scheduler wakes for each tick anyway.")
@click.option("-s", "--schedule", "schedule_filename", metavar="FILE",
              help="Celery's state file: accepted and not used; the state lives in the store.")
@click.option("-S", "--scheduler", metavar="CLASS", callback=lambda ctx, param, value: check_scheduler(value),
              help="celery.beat:PersistentScheduler (the default) or django_celery_beat.schedulers:DatabaseScheduler "
                   "(its tables' entries fire too); any other is refused.")
@_refused_options
def beat(app: str, loglevel: str, max_interval: float | None, schedule_filename: str | None,
         scheduler: str | None) -> None:
    """Fire the app's periodic tasks (beat_schedule, add_periodic_task): jobbridge's scheduler, alone.

    Run as many as you like, on as many hosts, beside workers started with -B:
    each tick's task is sent once whichever fires it, because the store records
    the tick in the same step as the push. SIGTERM or Ctrl-C stops it.
    """
    bridge = load_bridge(app)
    configure_logging(loglevel.upper().replace("FATAL", "CRITICAL"))
    if schedule_filename:
        log.info("-s %s: %s", schedule_filename, STATE_IN_STORE)
    options = {"scheduler": scheduler, "schedule_filename": schedule_filename, "max_interval": max_interval}
    run_alone(bridge, {k: v for k, v in options.items() if v is not None})
