"""What a worker process tells the outside about itself: heartbeats, a liveness file, samples for metrics.

One daemon thread per worker process, beside the loop and never in it. Each
second it touches the liveness file (``--health-file``), but only while the
loop keeps coming round (`Worker.last_loop`): a process whose loop is stuck
stops touching it, and an orchestrator that checks the file's age replaces it.
Every `BEAT_EVERY` seconds it writes the process's record into the store's
worker registry (`jobbridge.drivers.worker_registry_port`): one write per
process, whatever the number of jobs; about once a minute the beat also
deletes records long dead. A clean stop deletes the record and the file. The
number of jobs running now is counted around each attempt
(`jobbridge.integrations.hooks`), and so is each attempt's outcome, into a
`Tally` the beat adds to the store's per-minute counters
(`jobbridge.drivers.throughput_port`) in one write, pruned with the workers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jobbridge.drivers.throughput_port import KEEP_FOR, Tally, ThroughputStore, throughput_of
from jobbridge.drivers.worker_registry_port import (
    BEAT_EVERY,
    PRUNE_AFTER,
    WorkerBeat,
    WorkerRegistry,
    worker_registry_of,
)
from jobbridge.envelope import Reservation
from jobbridge.execution import Executor
from jobbridge.integrations import hooks
from jobbridge.integrations.hooks import RunAttempt
from jobbridge.outcome import Outcome
from jobbridge.worker import MAX_BACKOFF

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.worker import Worker

log = logging.getLogger("jobbridge.worker")

#: seconds between two looks of the monitor thread (the liveness file, samplers)
TICK = 1.0
#: beats between two prunes of long-dead records
PRUNE_EVERY = 12

_running = 0
_running_lock = threading.Lock()
#: this process's ended attempts, not yet added to the store's counters
_tally = Tally()


def running_now() -> int:
    """Attempts running in this process now."""
    return _running


def _count_running(executor: Executor, res: Reservation, run: RunAttempt) -> Outcome:
    global _running
    with _running_lock:
        _running += 1
    try:
        outcome = run()
    finally:
        with _running_lock:
            _running -= 1
    _tally.add(time.time(), res.envelope.queue, failed=outcome.action == "fail",
               released=outcome.action == "release")
    return outcome


def registry_for(bridge: JobBridge, connection: str | None = None, *, create: bool = True) -> WorkerRegistry | None:
    """The registry the workers of ``connection`` beat into: its driver's, else its ``locks`` store's."""
    conn = bridge.settings.connection(connection)
    found = worker_registry_of(bridge.driver(conn.name, create=create))
    shared = conn.options.get("locks")
    if found is None and shared:
        found = worker_registry_of(bridge.driver(str(shared), create=create))
    return found


def throughput_for(bridge: JobBridge, connection: str | None = None, *,
                   create: bool = True) -> ThroughputStore | None:
    """The per-minute counters of ``connection``'s workers: its driver's, else its ``locks`` store's."""
    conn = bridge.settings.connection(connection)
    found = throughput_of(bridge.driver(conn.name, create=create))
    shared = conn.options.get("locks")
    if found is None and shared:
        found = throughput_of(bridge.driver(str(shared), create=create))
    return found


class WorkerMonitor:
    """The monitor thread of one worker process; `start` before `Worker.run`, `stop` after it."""

    def __init__(self, worker: Worker, registry: WorkerRegistry | None, health_file: str | Path | None = None,
                 *, samplers: Sequence[Callable[[Worker], None]] = (),
                 throughput: ThroughputStore | None = None) -> None:
        self.worker = worker
        self.registry = registry
        self.throughput = throughput
        self.health_file = Path(health_file) if health_file else None
        self.samplers = list(samplers)
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="jobbridge-monitor", daemon=True)
        self._started_at = 0.0
        self._beats = 0
        self._failing = False
        # the loop comes round at least this often while it is alive: a store outage backs off
        # up to MAX_BACKOFF, an idle loop waits for its next heartbeat or its sleep
        options = worker.options
        self.loop_stale_after = max(MAX_BACKOFF, worker.lease / 4, options.sleep) + 10.0

    def start(self) -> None:
        hooks.add_attempt_hook(_count_running)
        if self.registry is not None:
            self._started_at = self._store_now()
        self._touch()
        self._thread.start()

    def stop(self) -> None:
        """The worker's loop is over: delete the record and the liveness file."""
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._add_counts()
        if self.registry is not None:
            with contextlib.suppress(Exception):
                self.registry.forget(self.id)
        if self.health_file is not None:
            self.health_file.unlink(missing_ok=True)

    def record(self) -> WorkerBeat:
        """This process as its next beat describes it."""
        worker, options = self.worker, self.worker.options
        now = self._store_now()
        return WorkerBeat(
            id=self.id, name=options.hostname, host=socket.gethostname(), pid=os.getpid(),
            connection=worker.connection, queues=tuple(options.queues), concurrency=options.concurrency,
            started_at=self._started_at or now, last_beat=now, running=running_now(),
            processed=worker.stats.processed, failed=worker.stats.failed)

    def _serve(self) -> None:
        ticks_per_beat = max(1, round(BEAT_EVERY / TICK))
        tick = 0
        while True:
            if tick % ticks_per_beat == 0:
                self._beat()
            self._touch()
            for sample in self.samplers:
                try:
                    sample(self.worker)
                except Exception:
                    log.exception("a worker sampler raised; it runs again next second")
            tick += 1
            if self._stop.wait(TICK):
                return

    def _beat(self) -> None:
        if self.registry is None:
            return
        try:
            beat = self.record()
            self.registry.beat(beat)
            self._beats += 1
            self._add_counts(beat.last_beat)
            if self._beats % PRUNE_EVERY == 1:
                self.registry.prune(beat.last_beat - PRUNE_AFTER)
                if self.throughput is not None:
                    self.throughput.prune(beat.last_beat - KEEP_FOR)
        except Exception as exc:  # the store is down: the jobs' own calls report it; try next beat
            if not self._failing:
                log.warning("could not record this worker's heartbeat (%s); trying again every %gs",
                            exc, BEAT_EVERY)
            self._failing = True
            return
        self._failing = False

    def _add_counts(self, store_now: float | None = None) -> None:
        """Add the attempts ended since the last beat to the store's counters; kept for the next on failure."""
        if self.throughput is None:
            return
        if store_now is not None:
            _tally.offset = store_now - time.time()
        counts = _tally.drain()
        try:
            self.throughput.add(counts)
        except Exception:
            _tally.restore(counts)
            raise

    def _touch(self) -> None:
        """Touch the liveness file while the loop keeps coming round."""
        if self.health_file is None:
            return
        if self.worker.monotonic() - self.worker.last_loop > self.loop_stale_after:
            return
        try:
            self.health_file.touch()
        except OSError as exc:
            log.warning("could not touch the health file %s: %s", self.health_file, exc)

    def _store_now(self) -> float:
        assert self.registry is not None
        try:
            return self.registry.now()
        except Exception:  # the store is down at start: the first beat that works corrects nothing, but
            return time.time()  # started_at is only shown, never judged
