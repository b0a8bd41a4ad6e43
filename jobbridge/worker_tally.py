"""What the worker's loop counts of every attempt it lets go of.

Its `WorkStats` (what ``jobbridge worker`` prints at the end), the attempts by
queue that the monitor thread moves into the store's per-minute counters
(`jobbridge.worker_monitor`), and a running average of the attempts'
milliseconds, which sizes the reserve window (`jobbridge.worker_window.room`).
Counted once per settled batch, with what it looks up read once for the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.outcome import Outcome, WorkStats
from jobbridge.worker_window import PREFETCH_MS


class Tally:
    """The loop's counts; written by the loop alone."""

    def __init__(self) -> None:
        self.stats = WorkStats()
        #: attempts let go of, by queue: [ended, failed, released]; read by the monitor thread once a second
        self.counts: dict[str, list[int]] = {}
        #: the attempts' running average, in milliseconds (slow until some have run: nothing reserved ahead)
        self.avg_ms = PREFETCH_MS * 10

    def let_go(self, outcomes: Sequence[Outcome], drop: Callable[[str], None], stuck: set[str]) -> None:
        """Count these outcomes; ``drop`` each job's lease, and forget it among the ``stuck``."""
        stats, counts, avg = self.stats, self.counts, self.avg_ms
        for outcome in outcomes:
            env = outcome.reservation.envelope
            drop(env.id)
            if stuck:
                stuck.discard(env.id)
            stats.add(outcome)
            queue = counts.get(env.queue)
            if queue is None:
                queue = counts[env.queue] = [0, 0, 0]
            queue[0] += 1
            if outcome.action != "acknowledge":
                queue[1 if outcome.action == "fail" else 2] += 1
            avg += (max(outcome.duration_ms, 0.01) - avg) * 0.2
        self.avg_ms = avg
