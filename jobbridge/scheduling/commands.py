"""``jobbridge scheduler``, ``jobbridge schedules`` (and ``schedules run NAME``), and the worker's ``--schedule``.

The commands are added to the CLI's group by `add_commands`, which the CLI
calls with its own ``-A`` loader and logging set-up, so that this module never
imports the CLI. `running_beside` is what ``jobbridge worker --schedule`` runs
its worker inside: one scheduler thread per worker command, in the process
that supervises the others (never in each child), stopped when the worker stops.

Every scheduler these commands start is announced first (`starting`: the
``scheduler_starting`` signal), before its entries are read, so that an app
may add entries from a source of its own, refuse a setting that only a
scheduler uses, or cap the scheduler's wait between looks (the Celery facade
does all three; the core never imports it). The listing announces itself
with ``schedules_listing`` instead (`listed`): the same sources, no start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from jobbridge import signals
from jobbridge.scheduling.cron import zone
from jobbridge.scheduling.entries import Entry
from jobbridge.scheduling.scheduler import Scheduler, SchedulerThread
from jobbridge.wake import Wake
from jobbridge.worker_process import on_stop_signals

if TYPE_CHECKING:
    from jobbridge.app import JobBridge

LoadBridge = Callable[[str | None], "JobBridge"]
_APP_HELP = ("Your app: a JobBridge, a Celery facade app, or a function returning one; it declares the "
             "entries (bridge.schedule) and registers their jobs. Without it: the schedules section of "
             "jobbridge.toml, whose jobs then no module registers.")


class _Capped(Scheduler):
    """A scheduler that looks at least every ``max_wait`` seconds (an app asked for it at `starting`)."""

    def __init__(self, bridge: JobBridge, max_wait: float) -> None:
        super().__init__(bridge)
        self.max_wait = max_wait

    def until_due(self) -> float:
        return min(super().until_due(), self.max_wait)


def starting(bridge: JobBridge, *, embedded: bool, options: dict[str, Any] | None = None) -> Scheduler:
    """A scheduler for ``bridge``, announced first (``scheduler_starting``); a receiver's error is raised."""
    answers = signals.scheduler_starting.send(bridge, embedded=embedded, options=dict(options or {}))
    waits = [float(answer) for _, answer in answers
             if isinstance(answer, int | float) and not isinstance(answer, bool) and answer > 0]
    return _Capped(bridge, min(waits)) if waits else Scheduler(bridge)


def listed(bridge: JobBridge) -> Scheduler:
    """A scheduler for ``bridge`` that only lists (or runs one by hand), its app told first (``schedules_listing``).

    An app whose entries come from a source it attaches when a scheduler starts (the facade's
    django-celery-beat tables) attaches it here too, so the listing shows what a scheduler would fire.
    """
    signals.schedules_listing.send(bridge)
    return Scheduler(bridge)


@contextlib.contextmanager
def running_beside(bridge: JobBridge, enabled: bool, options: dict[str, Any] | None = None) -> Iterator[None]:
    """Run a scheduler thread for the duration of the block (the worker's ``--schedule``)."""
    if not enabled:
        yield
        return
    # a bad entry fails here, before any job runs
    thread = SchedulerThread(starting(bridge, embedded=True, options=options)).start()
    try:
        yield
    finally:
        thread.stop()


def add_commands(group: click.Group, load: LoadBridge, configure_logging: Callable[[str], None]) -> None:
    """Add ``scheduler`` and ``schedules`` to the CLI's ``group``."""
    group.add_command(_scheduler_command(load, configure_logging))
    group.add_command(_schedules_group(load))


def _app_option(func: Any) -> Any:
    return click.option("-A", "--app", "app", metavar="MODULE[:ATTR]", help=_APP_HELP)(func)


def _scheduler_command(load: LoadBridge, configure_logging: Callable[[str], None]) -> click.Command:
    @click.command()
    @_app_option
    @click.option("-l", "--loglevel", default="INFO", show_default=True,
                  type=click.Choice(("DEBUG", "INFO", "WARNING", "ERROR"), case_sensitive=False),
                  help="Logging level; at INFO one line per fired tick (logger jobbridge.schedule).")
    def scheduler(app: str | None, loglevel: str) -> None:
        """Fire the app's schedule entries: each due tick's job is dispatched once.

        Run as many as you like, on as many hosts (and `jobbridge worker --schedule`
        beside them): each tick is dispatched exactly once whichever runs, because
        the store records the tick in the same step as the push. SIGTERM or Ctrl-C stops it.
        """
        bridge = load(app)
        configure_logging(loglevel.upper())
        run_alone(bridge)

    return scheduler


def run_alone(bridge: JobBridge, options: dict[str, Any] | None = None) -> None:
    """``jobbridge scheduler`` (and the facade's ``jobbridge beat``): fire due ticks until SIGTERM or Ctrl-C."""
    running = starting(bridge, embedded=False, options=options)
    click.echo(f"jobbridge scheduler: {len(running.entries)} entr{'y' if len(running.entries) == 1 else 'ies'}")
    stop = Wake()  # set by the stop signal's handler on the thread that waits on it (`jobbridge.wake`)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    restore = on_stop_signals(on_signal)
    try:
        running.run(stop)
    finally:
        restore()
        bridge.close()


def _schedules_group(load: LoadBridge) -> click.Group:
    @click.group(invoke_without_command=True)
    @_app_option
    @click.pass_context
    def schedules(ctx: click.Context, app: str | None) -> None:
        """List the schedule entries: trigger, time zone, next due tick, last fired tick and its job id.

        `jobbridge schedules run NAME` fires one now.
        """
        ctx.obj = app
        if ctx.invoked_subcommand is None:
            _listing(listed(load(app)))

    @schedules.command("run")
    @_app_option
    @click.argument("name")
    @click.pass_context
    def run_now(ctx: click.Context, app: str | None, name: str) -> None:
        """Fire the entry NAME now, once: a tick of its own, which never stands for one of the grid's.

        The entry's next grid tick still fires when it is due.
        """
        job_id = listed(load(app or ctx.obj)).fire_now(name)
        click.echo(f"fired {name}: job {job_id}" if job_id else f"fired {name}: a unique job of it is pending, "
                   "so none was pushed")

    return schedules


def _listing(running: Scheduler) -> None:
    """One line per entry, times in the entry's zone."""
    last = running.last_ticks()
    rows = [("entry", "job", "trigger", "tz", "next due", "last fired", "last job")]
    for entry in running.entries:
        now = running.now(entry)
        stored = last.get(entry.name)
        rows.append((entry.name, entry.job, entry.trigger.describe(), entry.trigger.zone_name,
                     _at(entry, entry.trigger.next_after(now)), _at(entry, stored.tick if stored else None),
                     (stored.job_id or "(skipped)") if stored else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if len(rows) == 1:
        click.echo("no schedule entries (declare them with bridge.schedule(...) or a schedules section)")


def _at(entry: Entry, tick: Any) -> str:
    if tick is None:
        return "-"
    return datetime.fromtimestamp(float(tick), zone(entry.trigger.zone_name)).isoformat(timespec="seconds")
