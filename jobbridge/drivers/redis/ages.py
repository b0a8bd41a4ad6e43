"""The redis driver's queue ages (`jobbridge.drivers.queue_age_port`): the first entry not yet delivered.

A stream's ready jobs are the entries after its consumer group's last
delivered id; the first of them is the oldest waiting (a delayed or released
job is added to the stream when it falls due, so its entry id is when it
became available). Its id's milliseconds against Redis's clock give the age:
two commands per queue (``XINFO GROUPS``, ``XRANGE ... COUNT 1``), pipelined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.redis.keys import GROUP

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisAges:
    def __init__(self, driver: RedisDriver) -> None:
        self._driver = driver

    def oldest_waiting(self, queues: Sequence[str]) -> dict[str, float]:
        names = list(dict.fromkeys(queues))
        client, keys = self._driver.client, self._driver.keys
        with translated():
            pipe = client.pipeline(transaction=False)
            for queue in names:
                pipe.exists(keys.stream(queue))
            present = [queue for queue, there in zip(names, pipe.execute(), strict=True) if there]
            groups = {}
            for queue in present:
                found = [g for g in client.xinfo_groups(keys.stream(queue)) if _text(g.get("name")) == GROUP]
                groups[queue] = _text(found[0].get("last-delivered-id")) if found else "0-0"
            pipe = client.pipeline(transaction=False)
            for queue in present:
                pipe.xrange(keys.stream(queue), min=f"({groups[queue]}", count=1)
            firsts = pipe.execute()
        now = self._driver.clock.now()
        ages: dict[str, float] = {}
        for queue, entries in zip(present, firsts, strict=True):
            if entries:
                millis = int(_text(entries[0][0]).split("-", 1)[0])
                ages[queue] = max(0.0, now - millis / 1000.0)
        return ages
