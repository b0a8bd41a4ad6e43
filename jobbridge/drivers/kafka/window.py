"""One partition's offset window: what was read since the committed offset, and what is settled.

Kafka remembers a consumer group's place as one offset per partition, not
per message, so the committed offset may only pass a message once its job
is settled (done, parked as delayed, failed, or handed back as a new copy).
The window holds every offset read from the committed one on, in one of four
states, and `advance` moves the commit point over the settled prefix and
stops at the first one that is not: a crash then re-reads from there, and a
job that was never finished is never skipped.
"""

from __future__ import annotations

from enum import IntEnum


class Mark(IntEnum):
    """Where a read message stands, as far as this consumer knows."""

    #: read into the buffer, not yet reserved by anyone through this consumer
    BUFFERED = 0
    #: reserved by this consumer and handed out
    MINE = 1
    #: found reserved by another consumer (after a rebalance): settled when the lock store says so
    FOREIGN = 2
    #: settled for good: the committed offset may pass it
    DONE = 3


class Window:
    """Offsets from ``base`` (the next to commit) up to ``next`` (the next to read)."""

    __slots__ = ("base", "committed", "marks", "next")

    def __init__(self, start: int) -> None:
        #: every offset below ``base`` is settled
        self.base = start
        #: the offset last committed to the group (the window's start when assigned)
        self.committed = start
        #: the next offset this consumer will read
        self.next = start
        self.marks: dict[int, Mark] = {}

    def read(self, offset: int) -> None:
        """A message was read. Offsets it skipped over (compacted, control records) hold no job."""
        if offset < self.next:
            return
        self.marks[offset] = Mark.BUFFERED
        self.next = offset + 1

    def mark(self, offset: int, mark: Mark) -> None:
        if offset in self.marks:
            self.marks[offset] = mark

    def committed_up_to(self, offset: int) -> None:
        self.committed = max(self.committed, offset)

    def advance(self) -> bool:
        """Move ``base`` over the settled prefix; whether there is something new to commit."""
        while self.base < self.next:
            mark = self.marks.get(self.base)
            if mark is not None and mark is not Mark.DONE:
                break
            self.marks.pop(self.base, None)
            self.base += 1
        return self.base > self.committed

    def foreign(self, limit: int) -> list[int]:
        """Up to ``limit`` offsets held by other consumers, oldest first: what blocks the commit."""
        found: list[int] = []
        for offset in sorted(self.marks):
            if self.marks[offset] is Mark.FOREIGN:
                found.append(offset)
                if len(found) >= limit:
                    break
        return found

    def blocked_by_foreign(self) -> bool:
        """Whether the oldest unsettled offset is one another consumer holds."""
        return self.marks.get(self.base) is Mark.FOREIGN
