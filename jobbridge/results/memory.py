"""The memory result store: results, cancellations and counters in this process.

URL: ``memory://``. Everything sits in dicts guarded by one condition
variable, which ``store`` notifies when a record becomes ready, so ``wait``
wakes at once without polling. Nothing survives the process and no other
process sees it: it is for tests and for the memory and sync drivers.
Values still go through the JSON codec, so a test sees what a real store returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.results.base import ResultRecord, UnknownCounter, check_key, check_record, stamped


@dataclass(slots=True)
class _Counter:
    remaining: int
    expires_at: float
    members: set[str] = field(default_factory=set)


class MemoryResultStore:
    """Dicts of records, cancellations (id -> expiry) and counters, under one `threading.Condition`."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._records: dict[str, ResultRecord] = {}
        self._cancelled: dict[str, float] = {}
        self._counters: dict[str, _Counter] = {}

    def _live(self, id: str) -> ResultRecord | None:
        record = self._records.get(id)
        return record if record is not None and record.expires_at > self.clock.now() else None

    def store(self, record: ResultRecord, ttl: float) -> None:
        check_record(record)
        now = self.clock.now()
        with self._cond:
            earlier = self._live(record.id)
            created = earlier.created_at if earlier is not None else (record.created_at or now)
            self._records[record.id] = stamped(record, now=now, ttl=ttl, created_at=created)
            if record.ready:
                self._cond.notify_all()

    def get(self, id: str) -> ResultRecord | None:
        with self._cond:
            return self._live(id)

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        with self._cond:
            found = {id: self._live(id) for id in ids}
        return {id: record for id, record in found.items() if record is not None}

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            record = self._live(id)
            while (record is None or not record.ready) and (left := deadline - time.monotonic()) > 0:
                # store() notifies under this lock, so a ready record cannot slip in unseen here
                self._cond.wait(left)
                record = self._live(id)
            return record

    def forget(self, id: str) -> None:
        with self._cond:
            self._records.pop(id, None)

    def prune(self) -> int:
        now = self.clock.now()
        with self._cond:
            records = [id for id, r in self._records.items() if r.expires_at <= now]
            cancelled = [id for id, until in self._cancelled.items() if until <= now]
            counters = [key for key, c in self._counters.items() if c.expires_at <= now]
            for id in records:
                del self._records[id]
            for id in cancelled:
                del self._cancelled[id]
            for key in counters:
                del self._counters[key]
        return len(records) + len(cancelled) + len(counters)

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        for id in ids:
            check_key(id, "a cancelled id")
        until = self.clock.now() + ttl
        with self._cond:
            for id in ids:
                self._cancelled[id] = max(until, self._cancelled.get(id, until))

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        now = self.clock.now()
        with self._cond:
            return {id for id in ids if self._cancelled.get(id, now) > now}

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        check_key(key, "a counter key")
        with self._cond:
            self._counters[key] = _Counter(count, self.clock.now() + ttl)

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        with self._cond:
            counter = self._counters.get(key)
            if counter is None or counter.expires_at <= self.clock.now():
                raise UnknownCounter(f"there is no counter {key!r} (never set, expired or pruned)")
            if member is not None:
                if member in counter.members:
                    return counter.remaining  # this member counted already: a rerun after a reclaim
                counter.members.add(member)
            counter.remaining -= 1
            return counter.remaining

    def describe(self) -> str:
        return "memory (this process only)"

    def close(self) -> None:
        """Nothing to release."""
