"""What every benchmark shares: the probe server (jobs that ran, latency stamps) and the measurements.

A library takes part through a `Runner` (one module per library in this
package). The harness drives every runner through the same steps, so the
numbers differ only by what the libraries do:

1. ``enqueue single``: dispatch jobs one call at a time (capped by the time limit);
2. ``enqueue batch``: the library's own batch API where it has one (its note says which);
3. ``process <config>``: start the library's real worker as a subprocess on N queued
   no-op jobs and time it from spawn until the N-th job reported in on the probe;
4. ``latency``: an idle worker, jobs dispatched one at a time, start minus dispatch.
"""

from __future__ import annotations

import contextlib
import os
import random
import selectors
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from benchmarks.probe import create_counters, total
from benchmarks.report import LatencyRow, Row
from benchmarks.workers import ROOT, WorkerGroup, child_env, venv_bin

__all__ = ["ROOT", "LatencyRow", "Options", "ProbeServer", "Row", "Runner", "WorkerGroup", "child_env",
           "measure_latency", "run_library", "timed_enqueue_batch", "timed_enqueue_single", "timed_processing",
           "venv_bin"]


# -- the probe: how jobs report that they ran ------------------------------------------------


class ProbeServer:
    """Counts the no-op jobs that ran and collects latency stamps, from any library's workers.

    Hits are read from the shared counter file that `benchmarks.probe.hit` adds to
    (polled every millisecond or two, which is the timing's resolution); stamps
    arrive on a TCP listener.
    """

    POLL = 0.002

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self._listener.setblocking(False)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._dir = tempfile.mkdtemp(prefix="jb-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.counts_path = os.path.join(self._dir, "counts")
        self._counts = create_counters(self.counts_path)
        self._cond = threading.Condition()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._stopping = False
        self.reset()
        self._threads = [threading.Thread(target=self._serve, name="bench-probe", daemon=True),
                         threading.Thread(target=self._count, name="bench-counts", daemon=True)]
        for thread in self._threads:
            thread.start()

    def reset(self) -> None:
        """Forget every hit and stamp (between measurements; the previous workers are gone)."""
        with self._cond:
            for slot in range(1, self._counts[0] + 1):  # slots stay taken: a slot is never shared
                self._counts[slot] = 0
            self.hits = 0
            self.first_hit_at: float | None = None
            self.target = 0
            self.target_at: float | None = None
            self.stamps: list[tuple[float, float]] = []

    def expect(self, target: int) -> None:
        """Note the moment (monotonic) at which the ``target``-th hit arrives."""
        with self._cond:
            self.target = target

    def wait_hits(self, target: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.hits >= target, timeout)

    def wait_stamps(self, count: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.stamps) >= count, timeout)

    def _count(self) -> None:
        while not self._stopping:
            time.sleep(self.POLL)
            with self._cond:  # under the lock: a reset between the read and the update would be undone
                hits = total(self._counts)
                if hits == self.hits:
                    continue
                now = time.monotonic()
                if self.hits == 0:
                    self.first_hit_at = now
                self.hits = hits
                if self.target and self.target_at is None and hits >= self.target:
                    self.target_at = now
                self._cond.notify_all()

    def _serve(self) -> None:
        pending: dict[socket.socket, bytes] = {}
        while not self._stopping:
            for key, _ in self._selector.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    with contextlib.suppress(BlockingIOError):
                        conn, _ = self._listener.accept()
                        conn.setblocking(False)
                        self._selector.register(conn, selectors.EVENT_READ, None)
                    continue
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self._selector.unregister(sock)
                    sock.close()
                    pending.pop(sock, None)
                    continue
                pending[sock] = self._consume(pending.pop(sock, b"") + chunk)

    def _consume(self, data: bytes) -> bytes:
        """Parse complete ``L<t0> <t1>`` lines; return an unfinished line's bytes."""
        stamps = []
        while (end := data.find(b"\n")) >= 0:
            t0, t1 = data[1:end].split()
            stamps.append((float(t0), float(t1)))
            data = data[end + 1:]
        with self._cond:
            self.stamps.extend(stamps)
            self._cond.notify_all()
        return data

    def close(self) -> None:
        self._stopping = True
        for thread in self._threads:
            thread.join(timeout=2)
        self._listener.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class Runner(Protocol):
    """A library on one backend, as the harness drives it."""

    library: str
    batch_note: str
    configs: Sequence[tuple[str, str]]  # (key, label) of the processing configurations
    latency_config: str
    poll_interval: float  # an idle worker that polls looks this often (0: it blocks or is notified)

    def prepare(self) -> None:
        """Connect and start from an empty store (only this library's database, DB index or prefix)."""

    def clean(self) -> None:
        """Remove every job this library has queued."""

    def enqueue_single(self, count: int) -> None:
        """Queue ``count`` no-op jobs, one call each."""

    def enqueue_batch(self, count: int) -> None:
        """Queue ``count`` no-op jobs with the library's batch API (or its best equivalent)."""

    def worker(self, key: str, probe: ProbeServer) -> WorkerGroup:
        """The worker command(s) of configuration ``key``."""

    def dispatch_stamp(self, dispatched_at: float) -> None:
        """Queue one latency job carrying ``dispatched_at``."""

    def close(self) -> None: ...


@dataclass
class Options:
    jobs: int = 20_000
    time_limit: float = 30.0  # per measurement
    latency_samples: int = 200
    latency_budget: float = 20.0  # seconds of sampling per library


# -- the measurements --------------------------------------------------------------------------


def timed_enqueue_single(runner: Runner, opts: Options) -> Row:
    """Single dispatch, in chunks so that a slow library stops at the time limit."""
    done, chunk, start = 0, 500, time.perf_counter()
    note = ""
    while done < opts.jobs:
        step = min(chunk, opts.jobs - done)
        runner.enqueue_single(step)
        done += step
        if time.perf_counter() - start > opts.time_limit and done < opts.jobs:
            note = f"stopped at the {opts.time_limit:g}s limit"
            break
    return Row(runner.library, "enqueue-single", "enqueue, single", done, time.perf_counter() - start,
               note=note)


def timed_enqueue_batch(runner: Runner, opts: Options) -> Row:
    start = time.perf_counter()
    runner.enqueue_batch(opts.jobs)
    return Row(runner.library, "enqueue-batch", "enqueue, batch", opts.jobs, time.perf_counter() - start,
               note=runner.batch_note)


def timed_processing(runner: Runner, key: str, label: str, probe: ProbeServer, opts: Options) -> Row:
    """Spawn the worker on ``opts.jobs`` queued jobs; seconds from spawn to the last job's report."""
    group = runner.worker(key, probe)
    probe.reset()
    probe.expect(opts.jobs)
    start = time.monotonic()
    group.start()
    error = ""
    cpu: list[tuple[int, float]] = []  # (hits, CPU seconds) at the first job and at the end
    try:
        while not probe.wait_hits(opts.jobs, 0.05 if not cpu else 0.25):
            if not cpu and probe.hits:
                cpu.append((probe.hits, group.cpu_seconds()))
            code = group.exited()
            if code is not None:
                error = f"worker exited ({code}) after {probe.hits} jobs: {group.tail()}"
                break
            if time.monotonic() - start > opts.time_limit:
                break
        cpu.append((probe.hits, group.cpu_seconds()))
    finally:
        end = probe.target_at or time.monotonic()
        group.stop()
    done = min(probe.hits, opts.jobs)
    row = Row(runner.library, key, label, done, end - start)
    if len(cpu) == 2 and cpu[1][1] > cpu[0][1]:
        row.per_cpu = (cpu[1][0] - cpu[0][0]) / (cpu[1][1] - cpu[0][1])
    if error and done == 0:
        row.error = error
        return row
    if done < opts.jobs:
        row.note = f"stopped at the {opts.time_limit:g}s limit: {done} of {opts.jobs} done"
    if probe.first_hit_at is not None and done > 1:
        row.steady = (done - 1) / max(1e-9, end - probe.first_hit_at)
        row.note = "; ".join(filter(None, [row.note, f"first job {probe.first_hit_at - start:.2f}s after spawn"]))
    return row


def measure_latency(runner: Runner, probe: ProbeServer, opts: Options) -> LatencyRow:
    """An idle worker; jobs dispatched one at a time, each waited for; start minus dispatch."""
    result = LatencyRow(runner.library, runner.latency_config)
    group = runner.worker(runner.latency_config, probe)
    probe.reset()
    group.start()
    try:
        runner.dispatch_stamp(time.time())  # the warm-up job: waits out the worker's start
        if not probe.wait_stamps(1, 60):
            result.error = f"the worker ran no job within 60s: {group.tail()}"
            return result
        budget_end = time.monotonic() + opts.latency_budget
        for _ in range(opts.latency_samples):
            if time.monotonic() > budget_end:
                result.note = f"sampling stopped at the {opts.latency_budget:g}s budget"
                break
            # the worker is idle again; a polling worker is caught at a random point of its interval,
            # as a job dispatched at a random moment would be (not always just after its last look)
            time.sleep(random.uniform(0.005, 0.025) + random.uniform(0, runner.poll_interval))
            seen = len(probe.stamps)
            runner.dispatch_stamp(time.time())
            if probe.wait_stamps(seen + 1, 5.0):
                t0, t1 = probe.stamps[seen]
                result.samples.append(t1 - t0)
            else:
                result.lost += 1
                probe.wait_stamps(seen + 1, 30.0)  # let it arrive before the next sample
    finally:
        group.stop()
    return result


def run_library(make: Callable[[], Runner], library: str, probe: ProbeServer, opts: Options,
                *, latency: bool = True) -> tuple[list[Row], LatencyRow | None]:
    """Every measurement for one library; a step that fails becomes a row saying why, never a gap."""
    rows: list[Row] = []
    try:
        runner = make()
        runner.prepare()
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        return [Row(library, "*", "(all)", error=f"could not run: {reason}")], \
            (LatencyRow(library, "-", error=reason) if latency else None)
    lat: LatencyRow | None = None
    try:
        rows.append(_step(library, "enqueue-single", "enqueue, single", lambda: timed_enqueue_single(runner, opts)))
        runner.clean()
        for key, label in runner.configs:
            rows.append(_step(library, "enqueue-batch", "enqueue, batch",
                              lambda: timed_enqueue_batch(runner, opts)))
            rows.append(_step(library, key, label, lambda k=key, la=label: timed_processing(runner, k, la, probe,
                                                                                             opts)))
            runner.clean()
        if latency:
            try:
                lat = measure_latency(runner, probe, opts)
            except Exception as exc:
                lat = LatencyRow(library, runner.latency_config, error=f"{type(exc).__name__}: {exc}"[:200])
            runner.clean()
    finally:
        with contextlib.suppress(Exception):
            runner.close()
    # one batch-enqueue figure per library: the first (the later ones only refill the queue)
    seen_batch = False
    kept = []
    for row in rows:
        if row.key == "enqueue-batch":
            if seen_batch:
                continue
            seen_batch = True
        kept.append(row)
    return kept, lat


def _step(library: str, key: str, label: str, fn: Callable[[], Row]) -> Row:
    try:
        return fn()
    except Exception as exc:
        return Row(library, key, label, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
