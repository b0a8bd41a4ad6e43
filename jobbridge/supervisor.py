"""The ``--processes N`` parent: start N worker processes, replace the ones that must be, stop them all.

Each child is ``jobbridge worker`` again (same ``-A`` spec, same options,
``--processes 1``), started in a process group of its own so that a Ctrl-C in
the terminal reaches the supervisor alone, which forwards it as SIGTERM (a
graceful stop). A second signal SIGKILLs the children. A child replaces
itself (exit status `REPLACE_EXIT_CODE`, a stuck attempt) or dies
unexpectedly: the supervisor starts a fresh one, after a short backoff when
it died. With ``recycle`` (``--max-tasks-per-child``) a child that finished its
share is replaced too. Children die with the supervisor even when it is
SIGKILLed (`die_with_parent`). Each child writes what it did to a file the
supervisor sums into one summary.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

from jobbridge.outcome import WorkStats
from jobbridge.wake import Wake
from jobbridge.worker import REPLACE_EXIT_CODE, WorkerOptions, on_stop_signals

log = logging.getLogger("jobbridge.supervisor")

PR_SET_PDEATHSIG = 1
#: a child that dies this soon after starting counts as a failed start
QUICK_DEATH = 5.0
#: this many failed starts in a row and the supervisor gives up
MAX_QUICK_DEATHS = 5


@dataclass
class _Child:
    slot: int
    proc: subprocess.Popen[bytes]
    stats_path: Path
    started: float


class Supervisor:
    """Keeps ``processes`` children running ``command`` until stopped, or until they all finish."""

    def __init__(self, command: Sequence[str], processes: int, *, recycle: bool = False,
                 replace_stuck: bool = True, out: Callable[[str], None] = print,
                 on_exit: Callable[[int], None] | None = None) -> None:
        self.command = list(command)
        self.processes = processes
        self.recycle = recycle
        self.replace_stuck = replace_stuck
        self.out = out
        #: called with a child's pid once it has exited (metrics drop its live gauges)
        self.on_exit = on_exit
        self.stats = WorkStats()
        self._children: dict[int, _Child] = {}
        self._due: dict[int, float] = {}  # slot -> when to start it again
        self._quick_deaths: dict[int, int] = {}
        self._wake = Wake()  # set by the stop signal's handler on this same thread (`jobbridge.wake`)
        self._signals = 0
        self._stopping = False
        self._killed = False
        self._gave_up = False
        self._generation = 0
        self._dir = Path(tempfile.mkdtemp(prefix="jobbridge-supervisor-"))

    def run(self) -> int:
        """Supervise until every child is gone; the exit status for the supervisor process."""
        restore = on_stop_signals(self._on_signal)
        try:
            for slot in range(self.processes):
                self._spawn(slot)
            while self._children or self._due:
                self._wake.wait(0.2)
                self._wake.clear()
                self._reap()
                self._start_due()
        finally:
            restore()
            shutil.rmtree(self._dir, ignore_errors=True)
        self.out(self.stats.summary())
        return 1 if self._killed or self._gave_up else 0

    def stop(self, now: bool = False) -> None:
        """Ask every child to stop (SIGTERM, graceful), or kill them (``now``)."""
        self._stopping = True
        self._due.clear()
        if now:
            self._killed = True
        for child in list(self._children.values()):
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGKILL if now else signal.SIGTERM)
        self._wake.set()

    def pids(self) -> list[int]:
        return [child.proc.pid for child in self._children.values()]

    # -- children ----------------------------------------------------------------------------

    def _spawn(self, slot: int) -> None:
        self._generation += 1
        stats_path = self._dir / f"child-{slot}-{self._generation}.json"
        argv = [*self.command, "--supervised", str(os.getpid()), "--stats-file", str(stats_path)]
        proc = subprocess.Popen(argv, process_group=0)
        self._children[slot] = _Child(slot, proc, stats_path, time.monotonic())
        log.info("started worker process %d (slot %d)", proc.pid, slot)

    def _reap(self) -> None:
        for slot, child in list(self._children.items()):
            code = child.proc.poll()
            if code is None:
                continue
            del self._children[slot]
            self._collect(child)
            if self.on_exit is not None:
                self.on_exit(child.proc.pid)
            self._decide(child, code)

    def _collect(self, child: _Child) -> None:
        try:
            data = json.loads(child.stats_path.read_text())
            self.stats.merge(WorkStats(**{k: int(data[k]) for k in asdict(WorkStats())}))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # killed before it could say: its unsettled jobs come back by reclaim
        child.stats_path.unlink(missing_ok=True)

    def _decide(self, child: _Child, code: int) -> None:
        pid = child.proc.pid
        if self._stopping:
            log.info("worker process %d exited (%s)", pid, _status(code))
        elif code == REPLACE_EXIT_CODE and self.replace_stuck:
            log.warning("worker process %d asked to be replaced (a stuck attempt); starting a fresh one", pid)
            self._due[child.slot] = time.monotonic()
        elif code == 0:
            if self.recycle:
                log.info("worker process %d finished its share; starting a fresh one", pid)
                self._due[child.slot] = time.monotonic()
            else:
                log.info("worker process %d finished", pid)
        else:
            self._died(child, code)

    def _died(self, child: _Child, code: int) -> None:
        lived = time.monotonic() - child.started
        quick = self._quick_deaths.get(child.slot, 0) + 1 if lived < QUICK_DEATH else 0
        self._quick_deaths[child.slot] = quick
        if quick >= MAX_QUICK_DEATHS:
            log.error("worker process %d died (%s) %d times in a row right after starting; giving up",
                      child.proc.pid, _status(code), quick)
            self._gave_up = True
            self.stop()
            return
        delay = min(30.0, 0.5 * 2 ** quick) if quick else 0.5
        log.warning("worker process %d died unexpectedly (%s); replacing it in %.1fs",
                    child.proc.pid, _status(code), delay)
        self._due[child.slot] = time.monotonic() + delay

    def _start_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self._due.items()):
            if when <= now and not self._stopping:
                del self._due[slot]
                self._spawn(slot)

    # -- signals -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        self.stop(now=self._signals > 1)


def worker_command(app: str, options: WorkerOptions, loglevel: str) -> list[str]:
    """The command line of one child: ``jobbridge worker`` with these options in a single process."""
    command = [sys.executable, "-m", "jobbridge.cli", "worker", "-A", app,
               "--queue", ",".join(options.queues), "--concurrency", str(options.concurrency),
               "--sleep", repr(options.sleep), "--loglevel", loglevel, "--hostname", options.hostname]
    if options.connection:
        command += ["--connection", options.connection]
    if options.max_jobs:
        command += ["--max-jobs", str(options.max_jobs)]
    command += ["--once"] if options.once else []
    command += ["--stop-when-empty"] if options.stop_when_empty else []
    return command


def _status(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


def write_stats(path: str | Path, stats: WorkStats) -> None:
    """What a child leaves for its supervisor to sum."""
    Path(path).write_text(json.dumps(asdict(stats)))


def die_with_parent(parent_pid: int) -> None:
    """Make this process die when its supervisor does, even by SIGKILL.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; elsewhere a thread watches the parent pid.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before prctl took effect
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="jobbridge-parent-watch",
                     daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)
