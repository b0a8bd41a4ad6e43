"""A filtered listing of a Redis failed store: the filter is applied on the server, a page at a time.

Filtering by queue, name or error text reads every failure newer than the
matches: done from the client, that is one HMGET per job and, for an error
search, every traceback sent over the network (100,000 failures: seconds).
`FailedScan.matching` runs ``failed_match.lua`` on a page of hashes instead, which
answers with the positions that match; only rows it cannot decide (text that
is not ASCII, whose case Lua cannot fold) come back to be decided here, so
the result is exactly `FailedFilter.matches`'s. Used by the Redis driver's
failed store and by the failed rows of a Redis shared store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.redis.scripts import source

#: failures one script call looks at (an error search holds the server for about 5 ms per thousand)
SCAN_PAGE = 1_000


class Ranks:
    """The ranks (0 the newest) of the failures in a ``(floor, ceiling)`` range of the index, read once:
    each page is then a range of ranks, O(log n + page), where an offset into a range of scores
    would step over every failure before it, page after page."""

    def __init__(self, client: redis.Redis, index: str, floor: str, ceiling: str) -> None:
        self.client, self.index = client, index
        pipe = client.pipeline(transaction=False)
        pipe.zcount(index, f"({ceiling}" if ceiling != "+inf" else "+inf", "+inf")
        pipe.zcount(index, floor, "+inf")
        newer, within = pipe.execute()
        self.start = int(newer) if ceiling != "+inf" else 0
        self.stop = int(within)  # exclusive

    def page(self, offset: int, count: int) -> list[bytes]:
        """``count`` ids from the ``offset``-th newest of the range on."""
        first = self.start + offset
        last = min(first + count, self.stop) - 1
        if last < first:
            return []
        found = self.client.zrevrange(self.index, first, last)
        return [raw if isinstance(raw, bytes) else str(raw).encode() for raw in found]


class FailedScan:
    """``failed_match.lua`` registered on one client."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.script = client.register_script(source("failed_match"))

    def matching(self, keys: Sequence[str | bytes], where: FailedFilter) -> list[int]:
        """The positions in ``keys`` (failed jobs' hashes) whose job ``where`` matches, in order."""
        if not keys:
            return []
        needle = where.error or ""
        args = [where.queue or "", "1" if where.queue is not None else "0", where.name or "",
                "1" if where.name is not None else "0", needle.lower() if needle.isascii() else needle,
                "1" if needle.isascii() else "0"]
        matched, undecided = self.script(keys=list(keys), args=args)
        found = [int(i) - 1 for i in matched]
        if undecided:
            found += self._decided([int(i) - 1 for i in undecided], keys, needle)
        return sorted(found)

    def _decided(self, positions: list[int], keys: Sequence[str | bytes], needle: str) -> list[int]:
        """Those of ``positions`` whose error text contains ``needle`` under Unicode case folding."""
        pipe = self.client.pipeline(transaction=False)
        for i in positions:
            pipe.hget(keys[i], "error")
        errors: list[Any] = pipe.execute()
        folded = needle.casefold()
        return [i for i, error in zip(positions, errors, strict=True)
                if error is not None and folded in _text(error).casefold()]


def _text(raw: Any) -> str:
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
