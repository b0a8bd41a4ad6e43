"""What a worker process tells the outside about itself: heartbeats, a liveness file, samples for metrics.

One daemon thread per worker process, beside the loop and never in it. Each
second it touches the liveness file (``--health-file``), but only while the
loop keeps coming round (`Worker.last_loop`): a process whose loop is stuck
stops touching it, and an orchestrator that checks the file's age replaces it.
Every `BEAT_EVERY` seconds it writes the process's record into the store's
worker registry (`jobbridge.drivers.worker_registry_port`): one write per
process, whatever the number of jobs; about once a minute the beat also
deletes records long dead. A clean stop deletes the record and the file.

Nothing of this runs in an attempt's path. The number of jobs running now is
read from the worker's threads (`Worker.running`) when a beat is written; the
attempts that ended, by queue and how, are counted by the worker's loop where
it lets go of each one (`Worker.counts`), and each second this thread moves
what was added since into a `Tally` under the current minute, which the beat
adds to the store's per-minute counters (`jobbridge.drivers.throughput_port`)
in one write, pruned with the workers.
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

from jobbridge.drivers.throughput_port import KEEP_FOR, MinuteCount, Tally, ThroughputStore, minute_of, throughput_of
from jobbridge.drivers.worker_registry_port import (
    BEAT_EVERY,
    PRUNE_AFTER,
    WorkerBeat,
    WorkerRegistry,
    worker_registry_of,
)
from jobbridge.worker import MAX_BACKOFF

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.worker import Worker

log = logging.getLogger("jobbridge.worker")

#: seconds between two looks of the monitor thread (the liveness file, samplers)
TICK = 1.0
#: beats between two prunes of long-dead records
PRUNE_EVERY = 12


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
        self._tally = Tally()  # the ended attempts not yet added to the store's counters
        self._counted: dict[str, list[int]] = {}  # `Worker.counts` as last moved into the tally
        # the loop comes round at least this often while it is alive: a store outage backs off
        # up to MAX_BACKOFF, an idle loop waits for its next heartbeat or its sleep
        options = worker.options
        self.loop_stale_after = max(MAX_BACKOFF, worker.lease / 4, options.sleep) + 10.0

    def start(self) -> None:
        if self.registry is not None:
            self._started_at = self._store_now()
        self._touch()
        self._thread.start()

    def stop(self) -> None:
        """The worker's loop is over: delete the record and the liveness file."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()  # a last one: what ended since the last second counts too
        self._count()
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
            started_at=self._started_at or now, last_beat=now, running=worker.running,
            processed=worker.stats.processed, failed=worker.stats.failed)

    def _serve(self) -> None:
        ticks_per_beat = max(1, round(BEAT_EVERY / TICK))
        tick = 0
        while True:
            self._count()
            if tick % ticks_per_beat == 0:
                self._beat()
            self._touch()
            self._sample()
            tick += 1
            if self._stop.wait(TICK):
                return

    def _sample(self) -> None:
        for sample in self.samplers:
            try:
                sample(self.worker)
            except Exception:
                log.exception("a worker sampler raised; it runs again next second")

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

    def _count(self) -> None:
        """Move the attempts the worker let go of since the last look into the tally, under this minute."""
        tally, moment = self._tally, time.time()
        minute = minute_of(moment + tally.offset)
        added = []
        for queue, now in self.worker.counts.copy().items():
            ended, failed, released = now  # three ints, read in one go: the loop adds to them meanwhile
            seen = self._counted.get(queue, [0, 0, 0])
            if ended != seen[0] or failed != seen[1] or released != seen[2]:
                added.append(MinuteCount(minute, queue, ended - seen[0], failed - seen[1], released - seen[2]))
                self._counted[queue] = [ended, failed, released]
        if added:
            tally.restore(added)  # adds each count to its (minute, queue)

    def _add_counts(self, store_now: float | None = None) -> None:
        """Add the attempts ended since the last beat to the store's counters; kept for the next on failure."""
        if self.throughput is None:
            return
        if store_now is not None:
            self._tally.offset = store_now - time.time()
        counts = self._tally.drain()
        try:
            self.throughput.add(counts)
        except Exception:
            self._tally.restore(counts)
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
