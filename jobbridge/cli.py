"""The ``jobbridge`` command (click): run workers and look after the store.

``jobbridge worker`` runs jobs; ``failed``, ``retry``, ``flush``, ``status``,
``migrate`` and ``reclaim`` look after the store; ``demo`` runs the demo.
Every command takes ``-A module:attr`` (the app; without it, the settings from
the environment or a jobbridge.toml) and ``--connection NAME``. Celery's worker
spellings (``-Q``, ``-c``, ``-l``, ``-n``, ``--max-tasks-per-child``) work;
Celery options jobbridge cannot honour are refused by name, with what to use.
docs/cli.md is the manual.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from jobbridge import signals
from jobbridge.app import JobBridge
from jobbridge.drivers.base import Driver
from jobbridge.errors import JobBridgeError, NoFailedJob
from jobbridge.loading import load_app
from jobbridge.settings import Settings
from jobbridge.supervisor import Supervisor, die_with_parent, worker_command, write_stats
from jobbridge.worker import REPLACE_EXIT_CODE, Worker, WorkerOptions, check_worker_driver

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("jobbridge.worker")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"

_SCHEDULER = "jobbridge runs no scheduler inside the worker; dispatch periodic jobs from cron or a systemd timer"
_NO_DAEMON = "run the worker in the foreground under systemd or another process manager (docs/deployment.md)"
#: Celery worker options jobbridge cannot honour: (names, takes a value, why and what to use instead)
CELERY_REFUSED: tuple[tuple[tuple[str, ...], bool, str], ...] = (
    (("-P", "--pool"), True, "jobbridge runs sync jobs on threads and async jobs on one event loop per "
     "process, so there is no pool to choose; use --concurrency (threads) and --processes"),
    (("--autoscale",), True, "the number of threads is fixed; set --concurrency and --processes, and scale "
     "by running more worker processes"),
    (("-B", "--beat"), False, _SCHEDULER),
    (("-s", "--schedule", "--scheduler"), True, _SCHEDULER),
    (("-E", "--task-events"), False, "worker events are always sent, in-process, as blinker signals "
     "(jobbridge.signals); connect receivers in your app"),
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
    (("-D", "--detach"), False, _NO_DAEMON),
    (("--pidfile",), True, _NO_DAEMON),
    (("-f", "--logfile"), True, "the worker logs to stderr; let the process manager (journald) keep it"),
    (("-S", "--statedb"), True, "a worker keeps no state of its own; everything is in the store"),
    (("-X", "--exclude-queues"), True, "name the queues to work with -Q/--queue, in priority order"),
    (("-I", "--include"), True, "import your job modules from the module that -A names"),
    (("--uid", "--gid", "--umask"), True, "set User=, Group= and UMask= in the systemd unit"),
)


class _Group(click.Group):
    """Turns jobbridge's own errors into a one-line ``Error: ...`` and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except JobBridgeError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """jobbridge: background jobs over a reservation protocol.

    Run `jobbridge worker -A myapp.jobs:bridge` to process jobs; the other
    commands inspect and repair the store (failed jobs, counts, lapsed
    reservations, schema). Each command's --help says more.
    """


def app_options(func: F) -> F:
    """``-A`` and ``--connection``, taken by every command."""
    func = click.option("--connection", metavar="NAME",
                        help="Which declared connection to use (default: the default connection).")(func)
    return click.option(
        "-A", "--app", "app", metavar="MODULE[:ATTR]",
        help="Your app: a JobBridge, a Celery facade app, or a function returning one. The worker needs "
             "it; the other commands can do without (settings from JOBBRIDGE_* or jobbridge.toml).")(func)


def _bridge(spec: str | None) -> JobBridge:
    return load_app(spec) if spec else JobBridge.from_env()


def _store(spec: str | None, connection: str | None) -> tuple[JobBridge, Driver]:
    bridge = _bridge(spec)
    return bridge, bridge.driver(connection)


# -- jobbridge worker --------------------------------------------------------------------------


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


def _refuse_option(names: Sequence[str], why: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value not in (None, False):
            raise click.UsageError(f"{'/'.join(names)} is a Celery worker option that jobbridge does not "
                                   f"honour: {why}.", ctx)

    return callback


def refused_celery_options(func: F) -> F:
    for names, takes_value, why in CELERY_REFUSED:
        func = click.option(*names, is_flag=not takes_value, hidden=True, expose_value=False,
                            callback=_refuse_option(names, why))(func)
    return func


_REFUSED_NAMES = ", ".join("/".join(names) for names, _, _ in CELERY_REFUSED)


@cli.command(epilog=f"Celery options refused, each with the reason and what to use: {_REFUSED_NAMES}.")
@app_options
@click.option("-Q", "--queue", "--queues", "queues", multiple=True, metavar="Q1,Q2",
              help="Queues to work, in priority order: everything on the first before the next "
                   "(default: the app's queues setting).")
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
@click.option("--supervised", type=int, hidden=True)
@click.option("--stats-file", hidden=True)
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
    _configure_logging(args.loglevel.upper().replace("FATAL", "CRITICAL"))
    options = _worker_options(args, bridge.settings)
    if args.supervised is None:
        check_worker_driver(bridge, options.connection)
        if options.processes > 1 or args.max_tasks_per_child:
            sys.exit(_supervise(args, bridge, options))
    sys.exit(_work(args, bridge, options))


def _configure_logging(level: str) -> None:
    """Set up logging unless the app asked to do it itself (Celery's setup_logging, for one)."""
    answers = signals.worker_configure_logging.send(None, loglevel=level)
    if not any(result is True for _, result in answers):
        logging.basicConfig(level=level, format=LOG_FORMAT)


def _worker_options(args: WorkerArgs, settings: Settings) -> WorkerOptions:
    if args.max_jobs and args.max_tasks_per_child:
        raise click.UsageError("give --max-jobs (each process stops) or --max-tasks-per-child (each process "
                               "is replaced), not both")
    queues = tuple(q.strip() for given in args.queues for q in given.split(",") if q.strip())
    return WorkerOptions(
        queues=queues or settings.queues,
        concurrency=args.concurrency or settings.concurrency,
        processes=1 if args.supervised is not None else (args.processes or settings.processes),
        max_jobs=args.max_jobs or args.max_tasks_per_child,
        sleep=settings.sleep if args.sleep is None else args.sleep,
        once=args.once,
        stop_when_empty=args.stop_when_empty,
        connection=args.connection,
        hostname=_hostname(args.hostname),
    )


def _hostname(given: str | None) -> str:
    host = socket.gethostname()
    if not given:
        return host
    short, _, domain = host.partition(".")
    return given.replace("%h", host).replace("%n", short).replace("%d", domain)


def _work(args: WorkerArgs, bridge: JobBridge, options: WorkerOptions) -> int:
    """Run one worker in this process; the exit status."""
    worker = Worker(bridge, options)
    if args.supervised is not None:
        die_with_parent(args.supervised)
        worker.ignore_second_signal = True  # the supervisor escalates with SIGKILL
    else:
        click.echo(worker.banner())
    if not bridge.registry.names():
        log.warning("the app %s registers no job: every job this worker takes fails as unknown", args.app)
    stats = worker.run()
    if args.stats_file:
        write_stats(args.stats_file, stats)
    if args.supervised is None:
        click.echo(stats.summary())
    else:
        log.info("worker process %d: %s", os.getpid(), stats.summary())
    if worker.stopped_at_once:
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
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def _supervise(args: WorkerArgs, bridge: JobBridge, options: WorkerOptions) -> int:
    click.echo(Worker(bridge, options).banner())
    bridge.close()
    supervisor = Supervisor(worker_command(str(args.app), options, args.loglevel), options.processes,
                            recycle=bool(args.max_tasks_per_child), replace_stuck=not options.once,
                            out=click.echo)
    return supervisor.run()


# -- the store ---------------------------------------------------------------------------------


@cli.command()
@app_options
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1),
              help="Show at most this many, newest first.")
def failed(app: str | None, connection: str | None, limit: int) -> None:
    """List failed jobs: id, queue, name, attempts, when it failed (UTC), first line of the error.

    A job lands here when its last attempt failed, or when it could not run
    at all (no registered class by its name, an undecodable payload). Look
    here after an incident; then `jobbridge retry ID` or `jobbridge flush`.
    """
    _, driver = _store(app, connection)
    jobs = driver.failed_jobs(limit)
    for job in jobs:
        when = datetime.fromtimestamp(job.failed_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        first = job.error.split("\n", 1)[0]
        click.echo(f"{job.id}  {job.queue}  {job.name}  attempts={job.attempts}  {when}  {first}")
    total = driver.failed_count()
    if not jobs:
        click.echo("no failed jobs")
    elif total > len(jobs):
        click.echo(f"({len(jobs)} of {total} shown; raise --limit to see more)")


@cli.command()
@app_options
@click.argument("ids", nargs=-1, required=True, metavar="ID...|all")
def retry(app: str | None, connection: str | None, ids: tuple[str, ...]) -> None:
    """Put failed jobs back on their queues: by id, or `all`.

    A retried job keeps its id and payload and starts its attempts over; run
    it after fixing what made it fail. An id that is not a failed job is an
    error (exit status 1).
    """
    _, driver = _store(app, connection)
    missing = 0
    for job_id in ids:
        try:
            count = driver.retry_failed(job_id)
        except NoFailedJob:
            click.echo(f"there is no failed job with id {job_id}", err=True)
            missing += 1
            continue
        click.echo(f"put {count} failed job(s) back on their queues" if job_id == "all"
                   else f"put {job_id} back on its queue")
    if missing:
        sys.exit(1)


@cli.command()
@app_options
def flush(app: str | None, connection: str | None) -> None:
    """Delete every failed job, for good.

    Run it once the failed jobs have been looked at and are not worth
    retrying. Waiting and running jobs are not touched.
    """
    _, driver = _store(app, connection)
    click.echo(f"deleted {driver.flush_failed()} failed job(s)")


#: capability fields whose own name would mislead: ``priorities`` is the order of a worker's queues,
#: not a per-message priority (which jobbridge refuses)
_CAPABILITY_WORDS = {"priorities": "ordered queues"}


@cli.command()
@app_options
def status(app: str | None, connection: str | None) -> None:
    """Where the jobs are stored, and how many wait, run and failed, per queue.

    Run it to check that the worker and your web processes see the same
    store (the path or URL printed), and whether work piles up.
    """
    bridge, driver = _store(app, connection)
    conn = bridge.settings.connection(connection)
    click.echo(f"store        {driver.describe()}")
    click.echo(f"connection   {conn.name} ({conn.driver} driver, reservation {conn.reservation:g}s)")
    counts = {c.queue: c for c in driver.counts()}
    names = list(dict.fromkeys([*bridge.settings.queues, *counts]))
    click.echo(f"{'queue':<20} {'pending':>8} {'ready':>8} {'delayed':>8} {'reserved':>8}")
    for name in names:
        c = counts.get(name)
        row = (c.pending, c.ready, c.delayed, c.reserved) if c else (0, 0, 0, 0)
        click.echo(f"{name:<20} " + " ".join(f"{n:>8}" for n in row))
    click.echo(f"failed       {driver.failed_count()}")
    caps = driver.capabilities
    click.echo("capabilities " + ", ".join(
        f"{_CAPABILITY_WORDS.get(f.name, f.name.replace('_', ' '))}: {'yes' if getattr(caps, f.name) else 'no'}"
        for f in fields(caps)))
    if caps.may_lose_an_accepted_job:
        click.echo(f"WARNING      the {conn.driver} driver may lose a job it has accepted (a crash before it "
                   "persisted, memory eviction); where every job must survive, use the database driver")


@cli.command()
@app_options
def migrate(app: str | None, connection: str | None) -> None:
    """Create or upgrade the store's tables (a no-op for stores without a schema).

    The database driver creates missing tables when it opens; run this in a
    deploy step when the worker's database user may not create tables.
    """
    _, driver = _store(app, connection)
    driver.migrate()
    click.echo(f"migrated {driver.describe()}")


@cli.command()
@app_options
def reclaim(app: str | None, connection: str | None) -> None:
    """Make jobs whose reservation lapsed (their worker died) available again.

    Running workers do this every half reservation by themselves; run it by
    hand after killing workers, when none is running, to see the count.
    """
    _, driver = _store(app, connection)
    click.echo(f"reclaimed {driver.reclaim_expired()} job(s) whose reservation had lapsed")


@cli.command()
@click.option("--path", type=click.Path(dir_okay=False), default=None,
              help="The demo's SQLite file (default: ./jobbridge-demo.sqlite3, recreated on each run).")
@click.option("--jobs", type=click.IntRange(min=1), default=3000, show_default=True,
              help="How many quick jobs to dispatch besides the failing, unique and delayed ones.")
def demo(path: str | None, jobs: int) -> None:
    """Run the demo: a realistic mix of jobs through a worker on SQLite, then a summary.

    Run it to see jobbridge work end to end on a fresh machine: quick jobs,
    retries, a job that lands in the failed store, a unique and a delayed job.
    """
    try:
        import jobbridge.demo as module
    except ModuleNotFoundError as exc:
        if exc.name != "jobbridge.demo":
            raise
        raise click.ClickException("the demo is not installed in this version (jobbridge.demo is missing)") \
            from None
    sys.exit(module.main(path=path, jobs=jobs))


def main(argv: Sequence[str] | None = None) -> None:
    """The ``jobbridge`` console script."""
    cli.main(args=None if argv is None else list(argv), prog_name="jobbridge")


if __name__ == "__main__":
    main()
