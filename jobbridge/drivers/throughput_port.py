"""Per-minute throughput counters: how many attempts ended, and how, per queue and minute, kept in the store.

The dashboard's charts (throughput and failure rate over the last hour and
day) read them; the workers write them. A worker never writes one per job:
each attempt's outcome is added to a `Tally` in the worker process's memory,
and the monitor thread (`jobbridge.worker_monitor`) adds the tally to the
store with its heartbeat, every few seconds, in one round trip. Counters older
than `KEEP_FOR` are pruned (database: by the beat that prunes dead workers;
Redis: each minute's hash expires by itself).

A driver offers its counters as ``driver.throughput`` (database: the table
``jobbridge_throughput``; redis: a hash per minute; memory: a dict). Kafka, AMQP
and SQS keep them in the store their ``locks`` connection names, as they do the
worker registry; a connection with nowhere to keep them has no charts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: counters are kept this long (seconds): the dashboard's longest chart is a day
KEEP_FOR = 2 * 86_400.0
#: the width of one counter (seconds)
MINUTE = 60


@dataclass(frozen=True, slots=True)
class MinuteCount:
    """The attempts that ended on ``queue`` in the minute starting at ``minute`` (epoch seconds, store clock).

    ``processed`` counts every ended attempt; ``failed`` those that moved the job
    to the failed store; ``released`` those that failed with tries left (retried).
    """

    minute: int
    queue: str
    processed: int = 0
    failed: int = 0
    released: int = 0

    def plus(self, other: MinuteCount) -> MinuteCount:
        return MinuteCount(self.minute, self.queue, self.processed + other.processed,
                           self.failed + other.failed, self.released + other.released)


def minute_of(moment: float) -> int:
    """The start of the minute ``moment`` lies in."""
    return int(moment // MINUTE) * MINUTE


@runtime_checkable
class ThroughputStore(Protocol):
    """Per-minute, per-queue counters of ended attempts on one store."""

    def now(self) -> float:
        """The store's clock, which names the minutes."""
        ...

    def add(self, counts: Sequence[MinuteCount]) -> None:
        """Add each count to its (minute, queue) counter, creating it when missing: one round trip."""
        ...

    def read(self, since: float) -> list[MinuteCount]:
        """Every counter of a minute at or after ``since``, summed over workers, oldest first."""
        ...

    def prune(self, before: float) -> int:
        """Delete the counters of minutes before ``before``; how many (0 where they expire by themselves)."""
        ...


def throughput_of(driver: object) -> ThroughputStore | None:
    """The driver's counters, or None when its store keeps none."""
    found = getattr(driver, "throughput", None)
    return found if isinstance(found, ThroughputStore) else None


class Tally:
    """A worker process's counts not yet in the store: added to per attempt, drained by each beat.

    ``offset`` (store clock minus this host's clock, set by the monitor at each
    beat) names each attempt's minute in the store's clock, so that workers on
    hosts whose clocks disagree add to the same minutes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (minute, queue) -> [processed, failed, released]: plain lists, since `add` runs once per attempt
        # on the job's thread and a frozen record per attempt cost more than the attempt's own bookkeeping
        self._counts: dict[tuple[int, str], list[int]] = {}
        self.offset = 0.0

    def add(self, moment: float, queue: str, *, failed: bool = False, released: bool = False) -> None:
        """One attempt ended at ``moment`` (this host's clock)."""
        key = (minute_of(moment + self.offset), queue)
        with self._lock:
            found = self._counts.get(key)
            if found is None:
                self._counts[key] = [1, int(failed), int(released)]
            else:
                found[0] += 1
                found[1] += failed
                found[2] += released

    def drain(self) -> list[MinuteCount]:
        """Everything counted since the last drain, emptied."""
        with self._lock:
            found, self._counts = self._counts, {}
        return [MinuteCount(minute, queue, *counts) for (minute, queue), counts in found.items()]

    def restore(self, counts: Sequence[MinuteCount]) -> None:
        """Put back counts the store refused, to be added with the next beat."""
        with self._lock:
            for count in counts:
                found = self._counts.setdefault((count.minute, count.queue), [0, 0, 0])
                found[0] += count.processed
                found[1] += count.failed
                found[2] += count.released
