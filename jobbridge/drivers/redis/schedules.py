"""The redis driver's schedule store: one hash of last ticks, advanced by the script that pushes.

``{prefix}schedules`` maps each entry's name to ``"<last tick>|<job id>|<fired at>"``
(the job id empty for a tick recorded without a job). ``fire.lua`` compares the
tick with the stored one, records it and pushes the tick's job exactly as
``push.lua`` would, in one script: Redis runs a script whole or not at all, so a
scheduler killed at any instant leaves both the tick and its job, or neither.
What Redis itself may lose (persistence, failover) it loses for both alike:
docs/redis.md says what is guaranteed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from redis.typing import EncodableT

from jobbridge.clock import offset_of
from jobbridge.drivers.redis import entries
from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.redis.scripts import source
from jobbridge.drivers.schedule_port import Fire, Firing, LastTick
from jobbridge.envelope import Envelope

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver

#: entries per HMGET when reading last ticks
READ_BATCH = 1000
_OUTCOMES = {0: Fire.TAKEN, 1: Fire.ADVANCED, 2: Fire.PUSHED}


class RedisSchedules:
    """`jobbridge.drivers.schedule_port.ScheduleStore` on one redis driver's client."""

    def __init__(self, driver: RedisDriver) -> None:
        self._driver = driver
        self.key = f"{driver.keys.prefix}schedules"
        self._fire = driver.client.register_script(source("fire"))

    def now(self) -> float:
        return self._driver.clock.now()

    def last(self, entries: Sequence[str]) -> dict[str, LastTick]:
        names = list(dict.fromkeys(entries))
        found: dict[str, LastTick] = {}
        with translated():
            for start in range(0, len(names), READ_BATCH):
                chunk = names[start:start + READ_BATCH]
                for name, raw in zip(chunk, self._driver.client.hmget(self.key, chunk), strict=True):
                    parsed = _parsed(raw)
                    if parsed is not None:
                        found[name] = parsed
        return found

    def fire(self, entry: str, tick: float, envelope: Envelope | None) -> Fire:
        return self.fire_many([Firing(entry, tick, envelope)])[0]

    def fire_many(self, firings: Sequence[Firing]) -> list[Fire]:
        """One fire.lua call per firing, all in one pipeline (one round trip; each script atomic)."""
        if not firings:
            return []
        now = self.now()
        calls = [self._call(firing, now) for firing in firings]  # StoreRefused before anything is sent
        with translated():
            pipe = self._driver.client.pipeline(transaction=False)
            for keys, args in calls:
                self._fire(keys, args, client=pipe)
            return [_OUTCOMES[int(reply)] for reply in pipe.execute()]

    def _call(self, firing: Firing, now: float) -> tuple[list[str], list[EncodableT]]:
        keys: list[str] = [self.key]
        args: list[EncodableT] = [firing.entry, repr(firing.tick), repr(now)]
        if firing.envelope is None:
            return keys, [*args, "", "", "", 0, b""]
        return self._with_job(keys, args, firing.envelope, now)

    def _with_job(self, keys: list[str], args: list[EncodableT], envelope: Envelope,
                  now: float) -> tuple[list[str], list[EncodableT]]:
        """fire.lua's keys and arguments for pushing ``envelope`` (and taking its unique lock)."""
        driver = self._driver
        pairs = entries.encoded([envelope])  # StoreRefused, before anything is stored, if it cannot be
        due, attempts, job_id, body = entries.push_args(pairs, now, offset_of(driver.clock))
        queue = envelope.queue
        keys = [*keys, driver.keys.queues, driver.keys.stream(queue), driver.keys.delayed(queue)]
        args = [*args, job_id, queue, due, attempts, body]
        if envelope.unique_key is not None:
            ttl = envelope.unique_for or 3600.0
            keys.append(driver.keys.lock(envelope.unique_key))
            args += [repr(now + ttl), max(1, math.ceil(ttl * 1000))]
        return keys, args


def _parsed(raw: bytes | str | None) -> LastTick | None:
    """A stored ``tick|job id|fired at``; anything else (written by hand) counts as never fired."""
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        tick, job_id, fired_at = text.split("|")
        return LastTick(float(tick), job_id or None, float(fired_at))
    except (UnicodeDecodeError, ValueError):
        return None
