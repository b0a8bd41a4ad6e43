"""Prometheus metrics: ``jobbridge worker --metrics-port N`` serves ``/metrics``, one port per command.

What each worker process counts, around every attempt and every push
(`jobbridge.integrations.hooks`):

- ``jobbridge_attempts_total{job,queue,outcome}``: attempts by how they ended
  (succeeded, released, failed, ignored, revoked, expired, discarded);
- ``jobbridge_attempt_duration_seconds{job,queue}``: a histogram of attempt time;
- ``jobbridge_dispatches_total{job,queue}``: jobs pushed by this process
  (from jobs, retries re-sent, schedules; a web process counts its own when it
  calls `instrument` and exports its registry);
- ``jobbridge_worker_threads_busy``, ``jobbridge_worker_threads``: attempts
  running now, and attempt threads in all, sampled each second;
- ``jobbridge_reservations_held``: reservations held now (running or reserved
  ahead of the threads), sampled each second.

What the exporter reads from the store at each scrape (`StoreCollector`, at
most once a second however many scrape): ``jobbridge_queue_jobs{queue,state}``
(state waiting, delayed, reserved), ``jobbridge_queue_oldest_waiting_age_seconds
{queue}`` (where the driver can tell), ``jobbridge_failed_jobs``; and
``jobbridge_worker_up`` (1) and ``jobbridge_worker_processes``.

Under ``--processes N`` the supervisor alone listens on the port: it gives
its children a fresh directory in ``PROMETHEUS_MULTIPROC_DIR`` (prometheus
client's multiprocess mode), each child writes its counters there, and a
scrape sums them, a child that exited included (its counters stand; its
gauges are dropped). Install with ``pip install 'jobbridge[prometheus]'``.
"""

from __future__ import annotations

import atexit
import bisect
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from jobbridge.app import JobBridge
from jobbridge.drivers.queue_age_port import queue_ages_of
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import ConfigurationError
from jobbridge.execution import Executor
from jobbridge.integrations import hooks
from jobbridge.integrations.hooks import PushNext, RunAttempt
from jobbridge.outcome import Outcome

if TYPE_CHECKING:
    from jobbridge.worker import Worker

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: attempt durations (seconds): from a quick job to the default ten-minute timeout
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, float("inf"))
#: the store is read at most this often, however many scrapers there are
STORE_CACHE_SECONDS = 1.0

ATTEMPTS = Counter("jobbridge_attempts", "Attempts by how they ended", ["job", "queue", "outcome"])
DURATION = Histogram("jobbridge_attempt_duration_seconds", "How long attempts took", ["job", "queue"],
                     buckets=BUCKETS)
DISPATCHES = Counter("jobbridge_dispatches", "Jobs pushed by this process", ["job", "queue"])
BUSY = Gauge("jobbridge_worker_threads_busy", "Attempts running now", multiprocess_mode="livesum")
THREADS = Gauge("jobbridge_worker_threads", "Attempt threads of the live worker processes",
                multiprocess_mode="livesum")
HELD = Gauge("jobbridge_reservations_held", "Reservations held now, running or reserved ahead",
             multiprocess_mode="livesum")


#: attempts ended and not yet added to the metrics: (job, queue, outcome, duration ms); appends are atomic
_ended: deque[tuple[str, str, str, float]] = deque()
_flushing = threading.Lock()
_next_flush = 0.0
_flusher: threading.Thread | None = None
#: the longest an ended attempt waits before it shows in the metrics
FLUSH_SECONDS = 1.0

#: the labelled children, looked up once per label set: `labels()` validates and locks on every call
_attempts: dict[tuple[str, str, str], Any] = {}
_durations: dict[tuple[str, str], Any] = {}
_dispatches: dict[tuple[str, str], Any] = {}


def _child(cache: dict[Any, Any], metric: Any, key: tuple[str, ...]) -> Any:
    """``metric.labels(*key)``, cached (a dict read per attempt; the rare miss takes the metric's own lock)."""
    child = cache.get(key)
    if child is None:
        child = cache[key] = metric.labels(*key)
    return child


def _around_attempt(executor: Executor, res: Reservation, run: RunAttempt) -> Outcome:
    """Note the attempt's end (one append); `flush` adds the notes to the metrics, at most a second later."""
    outcome = run()
    env = res.envelope
    _ended.append((env.name, env.queue, outcome.label, outcome.duration_ms))
    if time.monotonic() >= _next_flush:
        flush()
    return outcome


def flush() -> None:
    """Add the attempts noted since the last flush to the metrics: one increment per series, not per attempt.

    Called each second by a thread of its own and by the worker's monitor thread (`sample_worker`, also once
    more when the worker stops), by the attempt that finds the last flush a second old, and at exit; a flush
    already running is left to finish alone (the next one takes what it leaves).
    """
    global _next_flush
    if not _flushing.acquire(blocking=False):
        return
    try:
        _next_flush = time.monotonic() + FLUSH_SECONDS
        attempts: dict[tuple[str, str, str], int] = {}
        durations: dict[tuple[str, str], list[Any]] = {}  # (job, queue) -> [sum of seconds, count per bucket]
        ended = _ended
        for _ in range(len(ended)):
            name, queue, label, ms = ended.popleft()
            key = (name, queue, label)
            attempts[key] = attempts.get(key, 0) + 1
            found = durations.get((name, queue))
            if found is None:
                found = durations[name, queue] = [0.0, [0] * len(BUCKETS)]
            seconds = ms / 1000.0
            found[0] += seconds
            found[1][bisect.bisect_left(BUCKETS, seconds)] += 1  # the first bucket whose bound is >= seconds
        for key, count in attempts.items():
            _child(_attempts, ATTEMPTS, key).inc(count)
        for (name, queue), (total, buckets) in durations.items():
            _observed(_child(_durations, DURATION, (name, queue)), total, buckets)
    finally:
        _flushing.release()


def _observed(histogram: Any, total: float, buckets: list[int]) -> None:
    """What ``observe`` of each value would have added: its sum, and each bucket's count (`Histogram` values)."""
    histogram._sum.inc(total)
    for index, count in enumerate(buckets):
        if count:
            histogram._buckets[index].inc(count)


def _around_push(bridge: JobBridge, envelopes: Sequence[Envelope], connection: str,
                 push: PushNext) -> list[str | None]:
    ids = push(envelopes)
    for env, job_id in zip(envelopes, ids, strict=True):
        if job_id is not None:
            _child(_dispatches, DISPATCHES, (env.name, env.queue)).inc()
    return ids


def instrument() -> None:
    """Count attempts and dispatches in this process (a worker process, or a web process exporting its own)."""
    global _flusher
    hooks.add_attempt_hook(_around_attempt)
    hooks.add_push_hook(_around_push)
    with _flushing:
        if _flusher is None or not _flusher.is_alive():
            _flusher = threading.Thread(target=_flush_each_second, name="jobbridge-metrics", daemon=True)
            _flusher.start()
            atexit.register(flush)


def _flush_each_second() -> None:
    """So that an attempt shows within a second even in a process where no other attempt follows it."""
    while True:
        time.sleep(FLUSH_SECONDS)
        flush()


def sample_worker(worker: Worker) -> None:
    """Each second, from the worker's monitor thread: its attempts running, its held reservations, its threads."""
    flush()
    BUSY.set(worker.running)
    HELD.set(worker.held)
    THREADS.set(worker.options.concurrency)


class StoreCollector(Collector):
    """Queue depth, the oldest waiting job's age and the failed store's size, read at scrape time."""

    def __init__(self, bridge: JobBridge, connection: str | None, processes: Callable[[], int]) -> None:
        self.bridge = bridge
        self.connection = connection
        self.processes = processes
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] = (0.0, [])

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            at, metrics = self._cached
            if time.monotonic() - at > STORE_CACHE_SECONDS:
                metrics = self._read()
                self._cached = (time.monotonic(), metrics)
        up = GaugeMetricFamily("jobbridge_worker_up", "1 while this worker command runs")
        up.add_metric([], 1.0)
        live = GaugeMetricFamily("jobbridge_worker_processes", "Worker processes of this command running")
        live.add_metric([], float(self.processes()))
        return [up, live, *metrics]

    def _read(self) -> list[Metric]:
        driver = self.bridge.driver(self.connection)
        depth = GaugeMetricFamily("jobbridge_queue_jobs", "Jobs on each queue by state", labels=["queue", "state"])
        try:
            counts = driver.counts()
            failed_count = driver.failed.count()
        except Exception:  # the store is down: leave its metrics out of this scrape (the worker logs it)
            return []
        for row in counts:
            depth.add_metric([row.queue, "waiting"], row.ready)
            depth.add_metric([row.queue, "delayed"], row.delayed)
            depth.add_metric([row.queue, "reserved"], row.reserved)
        failed = GaugeMetricFamily("jobbridge_failed_jobs", "Jobs in the failed store")
        failed.add_metric([], failed_count)
        metrics: list[Metric] = [depth, failed]
        ages = queue_ages_of(driver)
        if ages is not None:
            age = GaugeMetricFamily("jobbridge_queue_oldest_waiting_age_seconds",
                                    "Seconds the oldest waiting job of each queue has waited", labels=["queue"])
            waited = _or_empty(lambda: ages.oldest_waiting([row.queue for row in counts]))
            for row in counts:
                age.add_metric([row.queue], waited.get(row.queue, 0.0))
            metrics.append(age)
        return metrics


def _or_empty(read: Callable[[], dict[str, float]]) -> dict[str, float]:
    try:
        return read()
    except Exception:
        return {}


def serve(bridge: JobBridge, connection: str | None, host: str, port: int, *,
          processes: Callable[[], int], multiprocess_dir: str | None = None) -> Any:
    """Listen on ``host:port`` for scrapes; the server. `ConfigurationError` when the port is taken.

    With ``multiprocess_dir`` (a supervisor) the children's metrics are summed from it; otherwise this
    process's own registry (which holds whatever else the app registered) is served.
    """
    if multiprocess_dir is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    registry.register(StoreCollector(bridge, connection, processes))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigurationError(
            f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose a free port, "
            "and give it to one worker command only (under --processes the supervisor serves every process's "
            "metrics on that one port)") from None
    return server


def child_died(pid: int) -> None:
    """From the supervisor: a child exited; drop its live gauges (its counters stand)."""
    if os.environ.get(MULTIPROC_DIR):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
