"""The key layout under one prefix, and the lease set's member format.

Scores and expiry times are seconds of the driver's clock: Redis's own, or a test's.

A lease member is ``"<entry id> <queue>"``: a stream entry id never contains a
space and is never reused, so the member names one reservation for good, and a
reclaimed job (re-added under a new entry id) can never be renewed through the
old one.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the one consumer group on every queue stream
GROUP = "jobbridge"
#: the one consumer name: who holds an entry is the lease set's business, not the group's,
#: and a single name keeps XINFO CONSUMERS from growing by one per worker ever started
CONSUMER = "jobbridge"


@dataclass(frozen=True, slots=True)
class Keys:
    """Every key this driver writes, derived from ``prefix``."""

    prefix: str

    def stream(self, queue: str) -> str:
        """The queue's stream: ready and reserved jobs (reserved = in the group's pending list)."""
        return f"{self.prefix}queue:{queue}"

    def delayed(self, queue: str) -> str:
        """The queue's delayed jobs, a sorted set scored by due time (driver clock seconds)."""
        return f"{self.prefix}delayed:{queue}"

    @property
    def queues(self) -> str:
        """A set of every queue name ever pushed to, for counts and the reclaim sweep."""
        return f"{self.prefix}queues"

    @property
    def leases(self) -> str:
        """Every reservation's lease, a sorted set scored by deadline (driver clock seconds)."""
        return f"{self.prefix}leases"

    @property
    def failed(self) -> str:
        """The failed store's index: job ids scored by when they failed."""
        return f"{self.prefix}failed"

    def failed_job(self, job_id: str) -> str:
        """One failed job: a hash of queue, name, attempts, error, failed_at and body."""
        return f"{self.prefix}failed:{job_id}"

    def lock(self, key: str) -> str:
        """A unique-job lock: ``owner|expires_at`` with a real PX expiry as the safety net."""
        return f"{self.prefix}lock:{key}"


def lease_member(queue: str, entry_id: str) -> str:
    return f"{entry_id} {queue}"
