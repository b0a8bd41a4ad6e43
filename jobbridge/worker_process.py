"""What a worker *process* needs beside its loop: the check that a driver can serve one, which queues it
works, the banner it prints when it starts, and OS stop signals.

Kept apart from `jobbridge.worker` so that the supervisor and the CLI, which
start processes, use them without the loop; `jobbridge.worker` re-exports the
check and the signals.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from jobbridge.drivers.base import Driver, JobChecking, JobLimits
from jobbridge.errors import ConfigurationError, DriverUnavailable
from jobbridge.job import DEFAULT_QUEUE, options_of
from jobbridge.limits import MAX_TIMEOUT

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.worker_options import WorkerOptions

log = logging.getLogger("jobbridge.worker")
#: the first wait before a worker tries an unreachable store again at start, added to at each retry; the longest
START_BACKOFF, START_BACKOFF_MAX = 2.0, 30.0


def banner(bridge: JobBridge, options: WorkerOptions, driver: Driver, *, connection: str, lease: float) -> str:
    """What a starting worker prints (`Worker.banner`): where the jobs are, which queues, how many at once."""
    conn = bridge.settings.connection(connection)
    lines = [
        f"jobbridge worker {options.hostname}",
        f"  connection   {conn.name} ({conn.driver} driver)",
        f"  store        {driver.describe()}",
        f"  queues       {', '.join(options.queues)} (in priority order)",
        f"  concurrency  {options.concurrency} thread(s) per process x {options.processes} process(es)",
        f"  reservation  {lease:g}s, renewed every {lease / 4:g}s while a job runs",
        f"  jobs         {len(bridge.registry.names())} registered",
    ]
    if driver.capabilities.may_lose_an_accepted_job:
        lines.append(f"  WARNING      the {conn.driver} driver may lose a job it accepted (a crash before "
                     "it persisted, eviction); use the database driver where every job must survive")
    return "\n".join(lines)


def check_worker_driver(bridge: JobBridge, connection: str | None = None) -> None:
    """Refuse a driver that a worker *process* cannot serve (sync, memory); run its start-up checks."""
    conn = bridge.settings.connection(connection)
    driver = _reached(bridge, conn.name)
    if not driver.capabilities.needs_a_worker:
        raise ConfigurationError(
            f"connection {conn.name!r} uses the {conn.driver} driver, which runs every job inside "
            "dispatch(): there is nothing for a worker to take. Configure a driver that stores jobs, "
            "such as the database driver (JOBBRIDGE_DATABASE_URL=sqlite:///jobs.sqlite3, the default "
            "when nothing is configured) or redis.")
    if not driver.capabilities.survives_a_restart:
        raise ConfigurationError(
            f"connection {conn.name!r} uses the {conn.driver} driver, whose jobs live in the memory of the "
            "process that dispatched them: a worker in another process can never see them. Use the "
            "database driver (SQLite by default) or redis; in tests, run jobs in-process with "
            "bridge.run_pending() or jobbridge.worker.Worker.")
    # a driver whose broker cuts off a job held too long (amqp's consumer_timeout) refuses such a job now,
    # and names each job without a timeout that it may cut off
    if isinstance(driver, JobChecking):
        for line in driver.check_jobs(job_limits(bridge)):
            log.warning("%s", line)


def _reached(bridge: JobBridge, name: str) -> Driver:
    """The connection's driver, opened and checked; a store out of reach at start is tried again with backoff
    (2 s, then 2 s more each time, at most 30 s) ``start_retries`` times before the worker gives up."""
    retries = bridge.settings.start_retries
    for attempt in range(retries + 1):
        try:
            driver = bridge.driver(name)
            driver.check()
            return driver
        except DriverUnavailable as exc:
            if attempt == retries:
                raise
            delay = min(START_BACKOFF_MAX, START_BACKOFF * (attempt + 1))
            log.warning("connection %r cannot be reached at start (%s); trying again in %gs (retry %d of %d, "
                        "start_retries)", name, exc, delay, attempt + 1, retries)
            time.sleep(delay)
    raise AssertionError("unreachable")


def job_limits(bridge: JobBridge) -> list[JobLimits]:
    """Each registered job type's name and timeout; a timeout of `MAX_TIMEOUT` (30 days, what a Celery task
    without a time limit gets, and the clamp of any longer one) counts as none."""
    out = []
    for cls in bridge.registry.classes():
        options = options_of(cls)
        out.append(JobLimits(options.name, None if options.timeout >= MAX_TIMEOUT else options.timeout))
    return out


def worked_queues(bridge: JobBridge, given: Sequence[str] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The queues a worker works, in priority order, and the registered jobs' queues those leave out.

    ``given`` (``-Q``) wins, then the ``queues`` setting. With neither, the queues
    the registered jobs name: the default queue first (where a job lands when
    nothing names another), then each other in the order its first job was
    registered. A worker that knows a job class on ``mail`` then works ``mail``,
    rather than reporting nothing processed while ``mail`` fills up.
    """
    named = list(dict.fromkeys(options_of(cls).queue for cls in bridge.registry.classes()))
    if given:
        queues = tuple(dict.fromkeys(given))
    elif bridge.settings.queues_given:
        queues = bridge.settings.queues
    else:
        queues = tuple(dict.fromkeys([DEFAULT_QUEUE, *named]))
    return queues, tuple(queue for queue in named if queue not in queues)


def on_stop_signals(handler: Callable[[int, FrameType | None], None]) -> Callable[[], None]:
    """Route SIGTERM and SIGINT to ``handler`` (on the main thread only); returns what puts them back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
