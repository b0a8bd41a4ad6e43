"""The redis driver's per-minute counters: a hash per minute, ``{prefix}throughput:<minute>``.

Each field is ``<kind>:<queue>`` (kind: processed, failed, released), added to
with HINCRBY; a worker's beat sends its whole tally in one pipelined round
trip and sets each touched hash to expire `KEEP_FOR` after its minute, so the
counters prune themselves and `RedisThroughput.prune` has nothing to do. A
chart reads one hash per minute of its range, pipelined (1,440 for a day).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.throughput_port import KEEP_FOR, MINUTE, MinuteCount, minute_of

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver

_KINDS = ("processed", "failed", "released")


class RedisThroughput:
    """`jobbridge.drivers.throughput_port.ThroughputStore` on one redis driver's client."""

    def __init__(self, driver: RedisDriver) -> None:
        self._driver = driver
        self.prefix = f"{driver.keys.prefix}throughput:"

    def now(self) -> float:
        return self._driver.clock.now()

    def add(self, counts: Sequence[MinuteCount]) -> None:
        if not counts:
            return
        with translated():
            pipe = self._driver.client.pipeline(transaction=False)
            for count in counts:
                key = f"{self.prefix}{count.minute}"
                for kind in _KINDS:
                    amount = getattr(count, kind)
                    if amount:
                        pipe.hincrby(key, f"{kind}:{count.queue}", amount)
                pipe.expireat(key, int(count.minute + KEEP_FOR))
            pipe.execute()

    def read(self, since: float) -> list[MinuteCount]:
        first, last = minute_of(max(since, self.now() - KEEP_FOR) + MINUTE - 1), minute_of(self.now())
        minutes = list(range(first, last + 1, MINUTE))
        with translated():
            pipe = self._driver.client.pipeline(transaction=False)
            for minute in minutes:
                pipe.hgetall(f"{self.prefix}{minute}")
            hashes: list[dict[Any, Any]] = pipe.execute()
        found: list[MinuteCount] = []
        for minute, fields in zip(minutes, hashes, strict=True):
            found += _counts(minute, fields)
        return found

    def prune(self, before: float) -> int:
        return 0  # each minute's hash expires by itself


def _counts(minute: int, fields: dict[Any, Any]) -> list[MinuteCount]:
    """One minute's hash as a count per queue (a field this release cannot read is skipped)."""
    by_queue: dict[str, dict[str, int]] = {}
    for raw_field, raw_value in fields.items():
        field = raw_field.decode() if isinstance(raw_field, bytes) else str(raw_field)
        kind, _, queue = field.partition(":")
        if kind in _KINDS and queue:
            try:
                by_queue.setdefault(queue, {})[kind] = int(raw_value)
            except ValueError:
                continue
    return [MinuteCount(minute, queue, **kinds) for queue, kinds in sorted(by_queue.items())]
