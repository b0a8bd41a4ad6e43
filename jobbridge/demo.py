"""`jobbridge demo`: the main job, end to end on the embedded SQLite store, in a few seconds.

It dispatches a realistic mix into a fresh SQLite file — a few thousand quick
jobs in one `dispatch_many`, card charges that fail and are retried, a CRM sync
that exhausts its tries and lands in the failed store, a unique report
dispatched twice (the second dispatch is dropped), a delayed reminder — then
runs an in-process `Worker` with a live progress line until nothing is pending,
and prints a summary and the exact command to inspect the failed job.

`--stop-when-empty` alone would stop too early here: delayed and released jobs
are not yet available when the queue first looks empty. So the worker runs
normally and a watcher thread stops it once the store holds nothing pending
(ready, delayed or reserved) on any queue.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from jobbridge import signals
from jobbridge.app import JobBridge
from jobbridge.demo_jobs import ALL, BuildDailyReport, ChargeCard, ResizeImage, SendReminder, SyncCustomerToCrm
from jobbridge.settings import Settings
from jobbridge.worker import Worker, WorkerOptions

DEFAULT_FILE = "jobbridge-demo.sqlite3"
QUEUES = ("default", "mail")
#: how many card charges fail before succeeding, one entry per job: 1 or 2 failed attempts each
CHARGE_FAILURES = (1, 2, 1, 1, 2, 1, 1, 2, 1, 1)
REMINDER_DELAY = 3.0
#: the worker's idle poll: short, so released and delayed jobs start as soon as they are due
POLL = 0.1


@dataclass
class Expected:
    """What the dispatched mix must come to once the worker has drained it."""

    quick: int
    succeeded: int
    released: int
    failed: int


@dataclass
class DemoResult:
    """What the demo did: counted by the worker, plus the store's final state."""

    path: Path
    succeeded: int
    released: int
    failed: int
    processed: int
    seconds: float
    quick_seconds: float | None  # from the worker's start until the last quick job succeeded
    failed_in_store: int
    pending_left: int
    duplicate_dropped: bool
    expected: Expected

    @property
    def throughput(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0

    @property
    def quick_throughput(self) -> float | None:
        """The quick jobs' rate: the worker at full speed, before it waits for delayed and retried jobs."""
        if not self.quick_seconds:
            return None
        return self.expected.quick / self.quick_seconds

    @property
    def adds_up(self) -> bool:
        """Every attempt is accounted for, the mix came out as designed, and nothing is left pending."""
        return (
            self.processed == self.succeeded + self.released + self.failed
            and (self.succeeded, self.released, self.failed)
            == (self.expected.succeeded, self.expected.released, self.expected.failed)
            and self.failed_in_store == self.expected.failed
            and self.pending_left == 0
            and self.duplicate_dropped
        )


def main(path: str | None = None, jobs: int = 3000) -> int:
    """Run the demo on ``path`` (default ``./jobbridge-demo.sqlite3``); 0 when everything added up."""
    result = run(path, jobs)
    return 0 if result.adds_up else 1


def run(path: str | Path | None = None, jobs: int = 3000, out: TextIO | None = None) -> DemoResult:
    """The demo itself, returning its figures (the tests call this with a small ``jobs``)."""
    if jobs < 1:
        raise ValueError(f"the demo needs at least one quick job, got jobs={jobs}")
    out = out or sys.stdout
    file = fresh_store(Path(path or DEFAULT_FILE))
    url = f"sqlite:///{file}"
    bridge = JobBridge(Settings.from_mapping({"database_url": url, "queues": list(QUEUES), "sleep": POLL},
                                             source="jobbridge demo"), jobs=ALL)
    try:
        say = _Printer(out)
        say(f"jobbridge demo: jobs in the SQLite file {file}")
        bridge.driver().migrate()
        dropped = dispatch_mix(bridge, jobs, say)
        expected = Expected(
            quick=jobs,
            succeeded=jobs + len(CHARGE_FAILURES) + 2,  # quick jobs, charges, the report, the reminder
            released=sum(CHARGE_FAILURES) + SyncCustomerToCrm.options.tries - 1,
            failed=1,
        )
        result = drain(bridge, say, expected, dropped)
        result.path = file
        say.summary(result, url)
        return result
    finally:
        bridge.close()


def fresh_store(path: Path) -> Path:
    """The demo's SQLite file by absolute path, with any earlier run's file (and WAL files) removed."""
    file = path.expanduser().resolve()
    file.parent.mkdir(parents=True, exist_ok=True)
    for leftover in (file, Path(f"{file}-wal"), Path(f"{file}-shm"), Path(f"{file}-journal")):
        leftover.unlink(missing_ok=True)
    return file


def dispatch_mix(bridge: JobBridge, jobs: int, say: _Printer) -> bool:
    """Dispatch the mix; True when the second dispatch of the unique report was dropped, as it must be."""
    start = time.perf_counter()
    bridge.dispatch_many(ResizeImage(image_id=i, width=160 + 32 * (i % 8)) for i in range(jobs))
    took = time.perf_counter() - start
    say(f"  dispatched {jobs:,} quick jobs (demo.resize-image) with one dispatch_many in {took:.3f}s")
    for order, fails in enumerate(CHARGE_FAILURES, start=1001):
        bridge.dispatch(ChargeCard(order_id=order, amount=Decimal("19.90") * (order % 5 + 1), fail_times=fails))
    say(f"  dispatched {len(CHARGE_FAILURES)} card charges (demo.charge-card) that fail "
        f"{min(CHARGE_FAILURES)}-{max(CHARGE_FAILURES)} time(s) each, retried after "
        f"{ChargeCard.options.backoff.base:g}s")
    bridge.dispatch(SyncCustomerToCrm(customer_id=42))
    say(f"  dispatched 1 CRM sync (demo.sync-customer-to-crm) that fails all {SyncCustomerToCrm.options.tries} "
        "tries: it will land in the failed store")
    first = bridge.dispatch(BuildDailyReport(day=date.today()))
    second = bridge.dispatch(BuildDailyReport(day=date.today()))
    say(f"  dispatched the unique daily report twice: first -> {first}, second -> {second} "
        "(None: a duplicate of a pending unique job is dropped)")
    bridge.dispatch(SendReminder(user_id=7, text="Your trial ends tomorrow"), delay=REMINDER_DELAY)
    say(f"  dispatched 1 reminder (demo.send-reminder) on the mail queue, delayed {REMINDER_DELAY:g}s")
    return first is not None and second is None


def drain(bridge: JobBridge, say: _Printer, expected: Expected, dropped: bool) -> DemoResult:
    """Run a worker in this thread until the store holds nothing pending; the watcher stops it."""
    worker = Worker(bridge, WorkerOptions(queues=QUEUES, concurrency=bridge.settings.concurrency, sleep=POLL))
    say("")
    say(worker.banner())
    say("")
    watcher = _Watcher(bridge, worker, say)
    quick = _QuickClock(expected.quick)
    signals.job_processed.connect(quick.processed, sender=ResizeImage, weak=False)
    logger = logging.getLogger("jobbridge")
    handler = _AttemptLines(say)
    saved = (logger.level, logger.propagate)
    logger.setLevel(logging.INFO)  # the attempt lines are built only when INFO is on; the handler keeps WARNING+
    logger.propagate = False
    logger.addHandler(handler)
    start = quick.start = time.perf_counter()
    watcher.start()
    try:
        stats = worker.run()
    finally:
        watcher.finish()
        signals.job_processed.disconnect(quick.processed, sender=ResizeImage)
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    seconds = time.perf_counter() - start
    say.progress(worker, watcher.pending, seconds, final=True)
    driver = bridge.driver()
    return DemoResult(
        path=Path(), succeeded=stats.succeeded, released=stats.released, failed=stats.failed,
        processed=stats.processed, seconds=seconds, quick_seconds=quick.seconds, failed_in_store=driver.failed.count(),
        pending_left=sum(c.pending for c in driver.counts()), duplicate_dropped=dropped, expected=expected,
    )


class _QuickClock:
    """Times the quick jobs through the ``job_processed`` signal: start until the last one succeeded."""

    def __init__(self, count: int) -> None:
        self.count, self.done = count, 0
        self.start = time.perf_counter()
        self.seconds: float | None = None
        self._lock = threading.Lock()

    def processed(self, sender: object, **kwargs: object) -> None:
        with self._lock:
            self.done += 1
            if self.done == self.count:
                self.seconds = time.perf_counter() - self.start


class _Watcher(threading.Thread):
    """Redraws the progress line and stops the worker once nothing is pending on any queue."""

    def __init__(self, bridge: JobBridge, worker: Worker, say: _Printer) -> None:
        super().__init__(name="jobbridge-demo-watcher", daemon=True)
        self.bridge, self.worker, self.say = bridge, worker, say
        self.pending = -1
        self._done = threading.Event()
        self._start = time.perf_counter()

    def run(self) -> None:
        driver = self.bridge.driver()
        while not self._done.wait(0.2):
            self.pending = sum(c.pending for c in driver.counts())
            if self.pending == 0:
                self.worker.stop()
                return
            self.say.progress(self.worker, self.pending, time.perf_counter() - self._start)

    def finish(self) -> None:
        self._done.set()
        self.join(timeout=5)


class _AttemptLines(logging.Handler):
    """Prints the worker's release and failure lines above the progress line, shortened."""

    def __init__(self, say: _Printer) -> None:
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "jobbridge", None)
        if not isinstance(fields, dict):
            self.say(f"  {record.levelname.lower()}: {record.getMessage()}")
            return
        error = str(fields.get("error", ""))
        if fields.get("outcome") == "released":
            line = (f"  retry   {fields['name']} attempt {fields['attempt']} failed, again in "
                    f"{fields.get('retry_in', 0):g}s: {error}")
        else:
            line = f"  {fields.get('outcome', 'failed'):<7} {fields['name']} attempt {fields['attempt']}: {error}"
        self.say(line)


class _Printer:
    """Writes lines and the ``\\r`` progress line to one stream without garbling either."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._lock = threading.Lock()
        self._live = ""  # the progress line on screen, cleared before any other line is written
        self._last = 0.0

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._live:
                self.out.write("\r" + " " * len(self._live) + "\r")
            self.out.write(line + "\n")
            if self._live:
                self.out.write(self._live)
            self.out.flush()

    def progress(self, worker: Worker, pending: int, seconds: float, *, final: bool = False) -> None:
        stats = worker.stats
        rate = stats.processed / seconds if seconds > 0 else 0.0
        line = (f"  done {stats.succeeded:>6,}   pending {max(pending, 0):>6,}   released {stats.released:>3}   "
                f"failed {stats.failed:>2}   {rate:>8,.0f} jobs/s")
        with self._lock:
            now = time.monotonic()
            if self.tty:
                self.out.write("\r" + line.ljust(len(self._live)))
                self._live = "" if final else line
                if final:
                    self.out.write("\n")
            elif final or now - self._last >= 1.0:  # a log file gets a line a second, not a redraw
                self._last = now
                self.out.write(line + "\n")
            self.out.flush()

    def summary(self, result: DemoResult, url: str) -> None:
        exp = result.expected
        self("")
        self(f"Drained in {result.seconds:.2f}s: {result.processed:,} attempts, {result.throughput:,.0f} jobs/s "
             f"overall (the drain waits out the {REMINDER_DELAY:g}s reminder delay and the retry backoffs)")
        if result.quick_throughput is not None and result.quick_seconds is not None:
            self(f"  the {exp.quick:,} quick jobs ran in {result.quick_seconds:.2f}s: "
                 f"{result.quick_throughput:,.0f} jobs/s")
        self(f"  succeeded  {result.succeeded:>6,}   (expected {exp.succeeded:,})")
        self(f"  released   {result.released:>6,}   (retried after a failed attempt; expected {exp.released})")
        self(f"  failed     {result.failed:>6,}   (tries exhausted, in the failed store; expected {exp.failed})")
        self(f"  pending    {result.pending_left:>6,}")
        self("  the summary adds up" if result.adds_up else "  THE SUMMARY DOES NOT ADD UP: see the figures above")
        self("")
        self("Look at the failed job, and at the store's counts, with:")
        command = _command()
        self(f"  JOBBRIDGE_DATABASE_URL={url} {command} failed")
        self(f"  JOBBRIDGE_DATABASE_URL={url} {command} status")


def _command() -> str:
    """How to run ``jobbridge`` from here: the bare name when it is on PATH, else its path in this venv."""
    beside = Path(sys.executable).parent / "jobbridge"
    if shutil.which("jobbridge") == str(beside) or not beside.exists():
        return "jobbridge"
    try:
        return str(beside.relative_to(Path.cwd()))
    except ValueError:
        return str(beside)
