"""What the pages show, read from one connection's store through the ports alone (every driver alike).

Every read goes through what a driver already offers: `Driver.counts`, the
queue ages (``driver.ages``), the failed store (``driver.failed``: filtered,
newest first), the worker registry and the per-minute counters (its own or
its ``locks`` store's), the result store and the scheduler's stored ticks. No
read creates a store: a dashboard pointed at the wrong place says so rather
than make an empty one there.

The failed list pages by a cursor, never an offset: a page asks the store for
the jobs failed at or before the last one shown (``until``), skipping the ones
already shown at that same moment, so page 2,000 costs what page 1 does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobbridge.app import JobBridge
from jobbridge.dashboard.charts import Bucket, buckets
from jobbridge.drivers.base import Driver, FailedFilter, ForgettingFailedStore
from jobbridge.drivers.queue_age_port import queue_ages_of
from jobbridge.drivers.throughput_port import MinuteCount, ThroughputStore
from jobbridge.drivers.worker_registry_port import WorkerBeat
from jobbridge.redaction import mask_url
from jobbridge.results.base import ResultRecord
from jobbridge.store_reports import FailedJob, QueueCounts
from jobbridge.worker_monitor import registry_for, throughput_for

HOUR, DAY = 3600, 86_400
#: the largest page of failed jobs a request may ask for
MAX_PAGE = 200


@dataclass(frozen=True)
class QueueRow:
    counts: QueueCounts
    oldest_waiting: float | None
    processed_day: int = 0
    failed_day: int = 0


@dataclass(frozen=True)
class Overview:
    queues: list[QueueRow]
    failed_total: int
    workers: list[WorkerBeat]
    now: float
    hour: list[Bucket] = field(default_factory=list)
    day: list[Bucket] = field(default_factory=list)
    has_counters: bool = False


@dataclass(frozen=True)
class Cursor:
    """Where a page of failed jobs starts: at or before ``until``, past the first ``skip`` failed then."""

    until: float
    skip: int = 0

    def encode(self) -> str:
        return f"{self.until!r}:{self.skip}"

    @classmethod
    def decode(cls, text: str) -> Cursor | None:
        until, _, skip = text.partition(":")
        try:
            return cls(float(until), max(0, int(skip or 0)))
        except ValueError:
            return None


@dataclass(frozen=True)
class FailedPage:
    jobs: list[FailedJob]
    next: Cursor | None
    total: int


@dataclass(frozen=True)
class JobView:
    """What can be told about one job id: its failed-store entry and its result record, if any."""

    id: str
    failed: FailedJob | None
    result: ResultRecord | None
    results_kept: bool

    @property
    def state(self) -> str:
        if self.result is not None:
            return self.result.state
        if self.failed is not None:
            return "FAILED"
        return "UNKNOWN"


class StoreView:
    """One connection of an app, as the dashboard reads it."""

    def __init__(self, bridge: JobBridge, connection: str | None = None) -> None:
        self.bridge = bridge
        self.connection = bridge.settings.connection(connection).name

    def driver(self) -> Driver:
        return self.bridge.driver(self.connection, create=False)

    def where(self) -> str:
        """Where the jobs are, for the page header: the driver and its store, every credential masked."""
        conn = self.bridge.settings.connection(self.connection)
        for key in ("url", "queue_url", "brokers"):
            value = conn.options.get(key)
            if value:
                text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
                return f"{conn.driver}: {mask_url(text)}"
        return f"{conn.driver} driver"

    def counters(self) -> ThroughputStore | None:
        return throughput_for(self.bridge, self.connection, create=False)

    def overview(self) -> Overview:
        driver = self.driver()
        counts = sorted(driver.counts(), key=lambda c: c.queue)
        ages_port = queue_ages_of(driver)
        ages = ages_port.oldest_waiting([c.queue for c in counts]) if ages_port is not None else {}
        registry = registry_for(self.bridge, self.connection, create=False)
        now = registry.now() if registry is not None else self.bridge.clock.now()
        workers = registry.list() if registry is not None else []
        counters = self.counters()
        minutes: list[MinuteCount] = counters.read(now - DAY) if counters is not None else []
        day_by_queue: dict[str, list[int]] = {}
        for m in minutes:
            sums = day_by_queue.setdefault(m.queue, [0, 0])
            sums[0] += m.processed
            sums[1] += m.failed
        rows = [QueueRow(c, ages.get(c.queue), *day_by_queue.get(c.queue, [0, 0])) for c in counts]
        rows += [QueueRow(QueueCounts(q), None, p, f) for q, (p, f) in sorted(day_by_queue.items())
                 if q not in {c.queue for c in counts}]
        return Overview(rows, driver.failed.count(), [w for w in workers if w.is_live(now)], now,
                        buckets(minutes, now=now, span=HOUR, width=60),
                        buckets(minutes, now=now, span=DAY, width=900), counters is not None)

    def failed_page(self, where: FailedFilter, cursor: Cursor | None, size: int) -> FailedPage:
        """One page of the newest failures ``where`` matches, from ``cursor`` (the newest when None)."""
        store = self.driver().failed
        size = max(1, min(size, MAX_PAGE))
        skip = 0
        if cursor is not None:
            until = cursor.until if where.until is None else min(cursor.until, where.until)
            where = FailedFilter(where.queue, where.name, where.since, until, where.error)
            skip = cursor.skip
        found = store.list(size + skip + 1, where)[skip:]
        jobs, more = found[:size], len(found) > size
        return FailedPage(jobs, _next_cursor(jobs, cursor) if more else None, store.count())

    def can_forget(self) -> bool:
        return isinstance(self.driver().failed, ForgettingFailedStore)

    def job(self, job_id: str) -> JobView:
        failed = self.driver().failed.get(job_id)
        results = self.bridge.results
        return JobView(job_id, failed, results.get(job_id) if results is not None else None, results is not None)

    def workers(self) -> tuple[list[WorkerBeat], float] | None:
        registry = registry_for(self.bridge, self.connection, create=False)
        if registry is None:
            return None
        now = registry.now()
        return sorted(registry.list(), key=lambda w: (not w.is_live(now), w.name, w.pid)), now

    def schedules(self) -> list[dict[str, Any]]:
        from jobbridge.scheduling.scheduler import Scheduler

        scheduler = Scheduler(self.bridge)
        if not scheduler.entries:
            return []
        last = scheduler.last_ticks()
        rows = []
        for entry in scheduler.entries:
            stored = last.get(entry.name)
            rows.append({"name": entry.name, "job": entry.job, "trigger": entry.trigger.describe(),
                         "zone": entry.trigger.zone_name,
                         "next": entry.trigger.next_after(scheduler.now(entry)),
                         "last": stored.tick if stored else None, "last_job": stored.job_id if stored else None,
                         "skipped": stored is not None and stored.job_id is None})
        return rows


def _next_cursor(jobs: Sequence[FailedJob], cursor: Cursor | None) -> Cursor:
    """The cursor past ``jobs``: at the last one's moment, skipping every one shown at that moment."""
    last = jobs[-1].failed_at
    ties = sum(1 for job in jobs if job.failed_at == last)
    if cursor is not None and cursor.until == last:
        ties += cursor.skip
    return Cursor(last, ties)
