"""How many messages of a topic the group has not read past: the Kafka half of a queue's count.

The group's committed offset says where reading resumes; the partition's end
says how far it goes. Some brokers (Tansu) report the end as the start of the
last batch + 1, so the meter reads that batch and takes the true end from it
(the offset after its last message, or the fetch's high watermark). It uses a
consumer of its own that never joins the group (``assign``, not
``subscribe``), so counting never causes a rebalance.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from jobbridge.drivers.kafka.client import Admin, translated

#: seconds the meter waits for the last batch of each partition
PROBE_SECONDS = 3.0


class Meter:
    """Committed offsets and true ends, per partition of a topic."""

    def __init__(self, config: Mapping[str, Any], admin: Admin) -> None:
        self._config = {**config, "enable.partition.eof": True, "fetch.wait.max.ms": 10}
        self.admin = admin
        self._consumer: Consumer | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def _client(self) -> Consumer:
        if self._consumer is None or self._pid != os.getpid():
            with translated("create the counting consumer"):
                self._consumer = Consumer(self._config)
            self._pid = os.getpid()
        return self._consumer

    def unread(self, topic: str, partitions: list[int]) -> tuple[dict[int, int], int]:
        """Each partition's committed offset (or its first offset), and the messages from there to its end."""
        if not partitions:
            return {}, 0
        with self._lock:
            consumer = self._client()
            tps = [TopicPartition(topic, p) for p in partitions]
            with translated("look up committed offsets"):
                committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=self.admin.timeout)}
            keys = [(topic, p) for p in partitions]
            first = self.admin.offsets(keys, earliest=True)
            reported = self.admin.offsets(keys)
            starts = {p: committed[p] if committed.get(p, -1) >= 0 else first[(topic, p)] for p in partitions}
            ends = self._true_ends(consumer, topic, {p: reported[(topic, p)] for p in partitions
                                                     if reported[(topic, p)] > first[(topic, p)]})
        total = sum(max(0, max(ends.get(p, 0), reported[(topic, p)]) - starts[p]) for p in partitions)
        return starts, total

    def _true_ends(self, consumer: Consumer, topic: str, reported: dict[int, int]) -> dict[int, int]:
        """Read each partition's last batch (it starts at or before its reported end - 1)."""
        if not reported:
            return {}
        ends = dict(reported)
        waiting = set(reported)
        with translated("read the last batch of each partition"):
            consumer.assign([TopicPartition(topic, p, end - 1) for p, end in reported.items()])
            deadline = time.monotonic() + PROBE_SECONDS
            try:
                while waiting and time.monotonic() < deadline:
                    for message in consumer.consume(500, 0.05):
                        p = int(message.partition() or 0)
                        if message.error() is None:
                            ends[p] = max(ends[p], int(message.offset() or 0) + 1)
                        else:  # the end of the partition (or an error: keep what the broker said)
                            waiting.discard(p)
                for p in reported:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                    ends[p] = max(ends[p], int(high))
            finally:
                consumer.unassign()
        return ends

    def close(self) -> None:
        if self._consumer is not None and self._pid == os.getpid():
            with translated("close the counting consumer"):
                self._consumer.close()
        self._consumer = None
