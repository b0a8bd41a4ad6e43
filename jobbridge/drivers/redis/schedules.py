"""The redis driver's schedule store: one hash of last ticks, advanced by the script that pushes.

``{prefix}schedules`` maps each entry's name to ``"<last tick>|<job id>|<fired at>"``
(the job id empty for a tick recorded without a job). ``fire.lua`` compares each
tick with the stored one, records it and pushes the tick's job exactly as
``push.lua`` would, in one script: Redis runs a script whole or not at all, so a
scheduler killed at any instant leaves both the tick and its job, or neither.
One call fires a batch of ticks (`FIRE_CHUNK`), and a step's calls go in one
pipeline: 10,000 entries due at the same instant cost a handful of calls, not
10,000.
What Redis itself may lose (persistence, failover) it loses for both alike:
docs/redis.md says what is guaranteed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
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
#: firings per fire.lua call (each call is one atomic step on the server, so it is kept short), and the
#: most body bytes a call carries past its first job (far below what Redis takes in one request)
FIRE_CHUNK = 500
FIRE_CHUNK_BYTES = 16 * 1024 * 1024
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
        """fire.lua once per batch of firings (`FIRE_CHUNK`), all in one pipeline: one round trip."""
        if not firings:
            return []
        calls = self._calls(firings)  # all built before anything is sent: StoreRefused stores nothing
        with translated():
            pipe = self._driver.client.pipeline(transaction=False)
            for call in calls:
                self._fire(call.keys, call.args, client=pipe)
            return [_OUTCOMES[int(outcome)] for reply in pipe.execute() for outcome in reply]

    def _calls(self, firings: Sequence[Firing]) -> list[_Call]:
        """fire.lua's calls for ``firings``, in order: at most `FIRE_CHUNK` each, and `FIRE_CHUNK_BYTES` of bodies."""
        driver = self._driver
        now, shift = self.now(), offset_of(driver.clock)
        calls = [_Call(self.key, driver.keys.queues, now)]
        for firing in firings:
            envelope = firing.envelope
            job = None
            if envelope is not None:
                # StoreRefused, before anything is stored, for a job that cannot be
                pairs = entries.encoded([envelope])
                env, body = pairs[0]
                due = str(entries.push_args(pairs, now, shift)[0])  # "" for ready now, as push.lua
                job = _Job(env, driver.keys.stream(env.queue), driver.keys.delayed(env.queue), due, body,
                           None if env.unique_key is None else driver.keys.lock(env.unique_key))
            if calls[-1].full(job):
                calls.append(_Call(self.key, driver.keys.queues, now))
            calls[-1].add(firing, job)
        return calls


@dataclass(frozen=True, slots=True)
class _Job:
    """A firing's job as fire.lua pushes it: its queue's keys, when it is due, its body, its lock's key."""

    envelope: Envelope
    stream: str
    delayed: str
    due: str
    body: bytes
    lock: str | None


class _Call:
    """One fire.lua call being built: its KEYS (each once) and its ARGV records (see the script's header)."""

    def __init__(self, schedules: str, queues: str, now: float) -> None:
        self.now = now
        self.keys: list[str] = [schedules, queues]
        self.args: list[EncodableT] = [repr(now)]
        self._where: dict[str, int] = {}  # a key's index in KEYS (Lua counts from 1)
        self._count = self._bytes = 0

    def full(self, job: _Job | None) -> bool:
        """Whether ``job`` belongs in a call of its own (this one holds enough)."""
        if self._count == 0:
            return False
        return self._count >= FIRE_CHUNK or (job is not None and self._bytes + len(job.body) > FIRE_CHUNK_BYTES)

    def add(self, firing: Firing, job: _Job | None) -> None:
        self._count += 1
        if job is None:
            self.args += [firing.entry, repr(firing.tick), "", "", 0, "", 0, b"", 0, "", 0]
            return
        self._bytes += len(job.body)
        stream = self._where.get(job.stream)
        if stream is None:  # a queue new to this call: its stream, and its delayed set right after
            self.keys += [job.stream, job.delayed]
            stream = self._where[job.stream] = len(self.keys) - 1
        env = job.envelope
        self.args += [firing.entry, repr(firing.tick), env.id, env.queue, stream, job.due, env.attempts, job.body,
                      *self._lock(job)]

    def _lock(self, job: _Job) -> list[EncodableT]:
        """A unique job's lock: its KEYS index, expires_at and ttl in ms (0: none)."""
        if job.lock is None:
            return [0, "", 0]
        index = self._where.get(job.lock)
        if index is None:
            self.keys.append(job.lock)
            index = self._where[job.lock] = len(self.keys)
        ttl = job.envelope.unique_for or 3600.0
        return [index, repr(self.now + ttl), max(1, math.ceil(ttl * 1000))]


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
