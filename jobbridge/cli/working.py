"""``jobbridge worker``: run jobs in this process, or in ``--processes`` children under a supervisor.

Without ``-Q`` and a ``queues`` setting, a worker works the queues its
registered jobs name (`jobbridge.worker_process.worked_queues`); when ``-Q``
or the setting leaves a registered job's queue out, the banner says so in one
line, since a job class whose queue nobody works only piles up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

import click

from jobbridge import signals
from jobbridge.app import JobBridge
from jobbridge.cli.celery_options import REFUSED_NAMES, check_scheduler, refused_celery_options
from jobbridge.cli.options import app_options
from jobbridge.cli.worker_telemetry import Telemetry, telemetry_options
from jobbridge.loading import load_app
from jobbridge.log_output import LOG_FORMAT, flush_log_output, install_default_handler
from jobbridge.settings import Settings
from jobbridge.worker import REPLACE_EXIT_CODE, Worker, WorkerOptions, check_worker_driver
from jobbridge.worker_process import worked_queues

log = logging.getLogger("jobbridge.worker")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")


@dataclass
class WorkerArgs:
    """The worker command's options as given (None: take the app's setting)."""

    app: str | None
    connection: str | None
    queues: tuple[str, ...]
    concurrency: int | None
    processes: int | None
    max_jobs: int | None
    max_tasks_per_child: int | None
    sleep: float | None
    once: bool
    stop_when_empty: bool
    loglevel: str
    hostname: str | None
    supervised: int | None
    stats_file: str | None
    schedule: bool = False
    schedule_filename: str | None = None
    scheduler: str | None = None
    metrics_port: int | None = None
    metrics_host: str | None = None
    health_file: str | None = None
    metrics_dir: str | None = None

    def scheduler_options(self) -> dict[str, Any]:
        """What ``-B`` passes the scheduler's start (``scheduler_starting``): Celery's beat options given."""
        return {k: v for k, v in (("scheduler", self.scheduler), ("schedule_filename", self.schedule_filename))
                if v is not None}


@click.command(epilog=f"Celery options refused, each with the reason and what to use: {REFUSED_NAMES}.")
@app_options
@click.option("-Q", "--queue", "--queues", "queues", multiple=True, metavar="Q1,Q2",
              help="Queues to work, in priority order: everything on the first before the next (default: "
                   "the queues setting, else the default queue and then the queues the registered jobs name).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1),
              help="Jobs run at once per process, on threads (default: the concurrency setting).")
@click.option("--processes", type=click.IntRange(min=1),
              help="Worker processes, kept running by a supervisor (default: the processes setting).")
@click.option("--max-jobs", type=click.IntRange(min=1),
              help="Each process stops after this many attempts and exits 0; let the process manager "
                   "restart it.")
@click.option("--max-tasks-per-child", type=click.IntRange(min=1),
              help="Celery's spelling, with Celery's meaning: each process is replaced after this many "
                   "attempts, and the worker keeps running.")
@click.option("--sleep", type=click.FloatRange(min=0),
              help="Seconds to wait before looking again when the queues are empty (default: sleep).")
@click.option("--once", is_flag=True, help="Run one job (if one is waiting), then exit.")
@click.option("--stop-when-empty", is_flag=True,
              help="Run every job available now, then exit (a drain; delayed jobs stay queued).")
@click.option("-l", "--loglevel", default="INFO", show_default=True, type=click.Choice(LEVELS, case_sensitive=False),
              help="Logging level; at INFO one line per attempt (logger jobbridge.job).")
@click.option("-n", "--hostname", help="This worker's name (%h host, %n short host, %d domain); "
                                        "jobs see it as self.request.hostname under the Celery facade.")
@click.option("--schedule", "-B", "--beat", "schedule", is_flag=True,
              help="Also fire the app's schedule entries (one scheduler thread per worker command, in the process "
                   "that supervises the others). Safe on every worker: each tick is dispatched once. -B/--beat "
                   "is Celery's spelling of it.")
@click.option("-s", "--schedule-filename", metavar="FILE",
              help="Celery's beat state file: accepted and not used, since each entry's last tick is kept in the "
                   "store (a log line says so).")
@click.option("--scheduler", metavar="CLASS", callback=lambda ctx, param, value: check_scheduler(value),
              help="Celery's scheduler class: celery.beat:PersistentScheduler (the default) or "
                   "django_celery_beat.schedulers:DatabaseScheduler; any other is refused.")
@click.option("--supervised", type=int, hidden=True)
@click.option("--stats-file", hidden=True)
@telemetry_options
@refused_celery_options
def worker(**kwargs: Any) -> None:
    """Run jobs: reserve them from the store, run them on threads, acknowledge them.

    Run it next to your web processes, under systemd or another process
    manager, as long as jobs should be processed. SIGTERM or Ctrl-C stops
    taking jobs, finishes the running ones and prints a summary; a second
    signal stops at once (those jobs run again once their reservations lapse).
    A job that overruns its timeout is stopped; one that cannot be stopped
    (blocked outside Python) gets this process replaced.
    """
    args = WorkerArgs(**kwargs)
    if not args.app:
        raise click.UsageError("jobbridge worker needs -A MODULE[:ATTR]: it runs jobs by name, and finds "
                               "their classes in the app that registers them")
    bridge = load_app(args.app)
    configure_logging(args.loglevel.upper().replace("FATAL", "CRITICAL"))
    options = _worker_options(args, bridge)
    if args.supervised is None:
        check_worker_driver(bridge, options.connection)
        if options.processes > 1 or args.max_tasks_per_child:
            sys.exit(_supervise(args, bridge, options))
    sys.exit(_work(args, bridge, options))


def configure_logging(level: str) -> None:
    """Set up logging unless the app asked to do it itself (Celery's setup_logging, for one).

    As ``logging.basicConfig`` would, when the root logger has no handler yet;
    the handler writes in batches from a thread of its own (jobbridge.log_output).
    """
    answers = signals.worker_configure_logging.send(None, loglevel=level)
    if not any(result is True for _, result in answers):
        install_default_handler(level, LOG_FORMAT)


def _worker_options(args: WorkerArgs, bridge: JobBridge) -> WorkerOptions:
    if args.max_jobs and args.max_tasks_per_child:
        raise click.UsageError("give --max-jobs (each process stops) or --max-tasks-per-child (each process "
                               "is replaced), not both")
    settings: Settings = bridge.settings
    given = tuple(q.strip() for named in args.queues for q in named.split(",") if q.strip())
    return WorkerOptions(
        queues=worked_queues(bridge, given)[0],
        concurrency=args.concurrency or settings.concurrency,
        processes=1 if args.supervised is not None else (args.processes or settings.processes),
        max_jobs=args.max_jobs or args.max_tasks_per_child,
        sleep=settings.sleep if args.sleep is None else args.sleep,
        once=args.once,
        stop_when_empty=args.stop_when_empty,
        connection=args.connection,
        hostname=hostname(args.hostname),
        # the children of one --processes N command keep one set of per-worker rate limits, in a file
        # of the supervisor's own directory (beside their stats files)
        rate_limit_file=(os.path.join(os.path.dirname(args.stats_file), "rate-limits")
                         if args.supervised is not None and args.stats_file else None),
    )


def hostname(given: str | None) -> str:
    """``-n``: this host's name, or the given one with ``%h``, ``%n`` and ``%d`` expanded."""
    host = socket.gethostname()
    if not given:
        return host
    short, _, domain = host.partition(".")
    return given.replace("%h", host).replace("%n", short).replace("%d", domain)


def banner(worker: Worker, bridge: JobBridge, options: WorkerOptions) -> str:
    """The worker's banner, with one more line when a registered job's queue is not among those worked."""
    text = worker.banner()
    left_out = worked_queues(bridge, options.queues)[1]
    if left_out:
        text += (f"\n  not worked   {', '.join(left_out)}: registered jobs name these queues, which -Q or the "
                 "queues setting leaves out")
    return text


def _work(args: WorkerArgs, bridge: JobBridge, options: WorkerOptions) -> int:
    """Run one worker in this process; the exit status."""
    worker = Worker(bridge, options)
    if args.supervised is not None:
        from jobbridge.supervisor import die_with_parent

        die_with_parent(args.supervised)
        worker.ignore_second_signal = True  # the supervisor escalates with SIGKILL
    else:
        click.echo(banner(worker, bridge, options))
    if not bridge.registry.names():
        log.warning("the app %s registers no job: every job this worker takes fails as unknown", args.app)
    with running_beside(bridge, args.schedule and args.supervised is None, args.scheduler_options()), \
            Telemetry.of(args).beside_worker(bridge, worker, supervised=args.supervised is not None):
        stats = worker.run()
    if args.stats_file:
        from jobbridge.supervisor import write_stats

        write_stats(args.stats_file, stats)
    flush_log_output()  # every attempt's line before the summary, never after it
    if args.supervised is None:
        click.echo(stats.summary())
    else:
        log.info("worker process %d: %s", os.getpid(), stats.summary())
    if worker.stopped_at_once:
        flush_log_output()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(worker.exit_code)  # threads may still be running attempts: do not wait for them
    if worker.replace_process:
        return _replace(args, bridge, options)
    return worker.exit_code


def _replace(args: WorkerArgs, bridge: JobBridge, options: WorkerOptions) -> int:
    """A stuck attempt: exit for the supervisor to replace us, or re-execute this command."""
    if args.supervised is not None or options.once or options.stop_when_empty:
        return REPLACE_EXIT_CODE
    click.echo("replacing this worker process: an attempt is stuck past its timeout", err=True)
    with contextlib.suppress(Exception):
        bridge.close()
    flush_log_output()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def _supervise(args: WorkerArgs, bridge: JobBridge, options: WorkerOptions) -> int:
    from jobbridge.supervisor import Supervisor, worker_command

    click.echo(banner(Worker(bridge, options), bridge, options))
    bridge.close()
    with Telemetry.of(args).beside_supervisor(bridge, options) as telemetry:
        supervisor = Supervisor([*worker_command(str(args.app), options, args.loglevel), *telemetry.extra],
                                options.processes, recycle=bool(args.max_tasks_per_child),
                                replace_stuck=not options.once, out=_echo_after_logs, on_exit=telemetry.on_exit)
        telemetry.supervisor = supervisor
        with running_beside(bridge, args.schedule, args.scheduler_options()):
            return supervisor.run()


def running_beside(bridge: JobBridge, enabled: bool,
                   options: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    """`jobbridge.scheduling.commands.running_beside`, imported only when ``--schedule`` asks for a scheduler."""
    if not enabled:
        return contextlib.nullcontext()
    from jobbridge.scheduling.commands import running_beside as scheduler_beside

    return scheduler_beside(bridge, enabled, options)


def _echo_after_logs(text: str) -> None:
    """The supervisor's summary, after the log lines queued before it."""
    flush_log_output()
    click.echo(text)
