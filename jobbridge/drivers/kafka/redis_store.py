"""`RedisLeaseStore`: the Kafka driver's leases, delayed and failed jobs in a redis lock store.

It runs on the client of the redis driver the app opened for the ``locks``
connection, under that driver's prefix plus ``kafka:{<scope>}:`` (the hash
tag keeps one scope's keys in one slot). Every change is one Lua script
(files beside this module; claim.lua lists the keys), so racing workers see
each record either before or after a change, never half of one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from jobbridge.drivers.kafka.store import Claim, Claimed, Delayed, DelayedCounts, Held, Refresh, Spot
from jobbridge.drivers.redis.connection import as_text, translated
from jobbridge.envelope import FailedJob
from jobbridge.errors import NoFailedJob

NAMES = ("claim", "settle", "hold", "lapse", "delayed", "failed", "forget")
#: failed jobs moved back per retry script
RETRY_CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Scripts:
    claim: Script
    settle: Script
    hold: Script
    lapse: Script
    delayed: Script
    failed: Script
    forget: Script

    @classmethod
    def register(cls, client: redis.Redis) -> _Scripts:
        folder = resources.files(__package__ or __name__)
        return cls(**{n: client.register_script(folder.joinpath(f"{n}.lua").read_text("utf-8")) for n in NAMES})


class RedisLeaseStore:
    """One scope's keys in the lock store's Redis."""

    def __init__(self, client: redis.Redis, prefix: str, *, locks: Any = None, may_lose: bool = True) -> None:
        self.client = client
        self.prefix = prefix
        self.may_lose_an_accepted_job = may_lose
        self._locks = locks
        self._scripts = _Scripts.register(client)

    @classmethod
    def on(cls, driver: Any, scope: str) -> RedisLeaseStore:
        """On a `RedisDriver`: its client and prefix, and the driver itself for unique locks."""
        return cls(driver.client, f"{driver.settings.prefix}kafka:{{{scope}}}:", locks=driver,
                   may_lose=driver.capabilities.may_lose_an_accepted_job)

    def describe(self) -> str:
        return str(self._locks.describe()) if self._locks is not None else f"redis (prefix {self.prefix!r})"

    def migrate(self) -> None:
        """Nothing to create: keys appear when first written."""

    def server_clock(self) -> Callable[[], float]:
        """Redis ``TIME``: one clock for every worker, whatever their own clocks say."""
        return self._time

    def _time(self) -> float:
        with translated():
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def check_eviction_policy(self) -> str:
        """The redis driver's check: an evicting Redis drops delayed and failed jobs silently."""
        return str(self._locks.check_eviction_policy()) if self._locks is not None else "unknown"

    def _run(self, script: Script, *args: EncodableT) -> Any:
        with translated():
            return script(keys=[], args=[self.prefix, *args])

    # -- leases -------------------------------------------------------------------------------

    def claim(self, claims: Sequence[Claim]) -> list[Claimed]:
        if not claims:
            return []
        args: list[EncodableT] = []
        for c in claims:
            args += ["P" if c.park else "L", c.spot.key, c.queue, c.token, repr(c.at), c.job_id, c.body]
        return [Claimed(int(n)) for n in self._run(self._scripts.claim, *args)]

    def states(self, spots: Sequence[Spot]) -> list[Claimed | None]:
        if not spots:
            return []
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for spot in spots:
                pipe.hget(f"{self.prefix}L:{spot.key}", "s")
            found = pipe.execute()
        named = {"1": Claimed.HELD, "2": Claimed.SETTLED}
        return [None if s is None else named.get(as_text(s)) for s in found]

    def hold(self, held: Sequence[Held], until: float) -> list[bool]:
        if not held:
            return []
        args: list[EncodableT] = [repr(until)]
        for h in held:
            args += [h.spot.key, h.token]
        return [bool(n) for n in self._run(self._scripts.hold, *args)]

    def finish(self, held: Sequence[Held]) -> list[bool]:
        if not held:
            return []
        args: list[EncodableT] = ["A"]
        for h in held:
            args += [h.spot.key, h.token]
        return [bool(n) for n in self._run(self._scripts.settle, *args)]

    def delay(self, held: Held, row: Delayed) -> bool:
        return bool(self._run(self._scripts.settle, "D", held.spot.key, held.token,
                              row.id, repr(row.due), row.job_id, row.body))

    def fail(self, held: Held, failed: FailedJob) -> bool:
        return bool(self._run(self._scripts.settle, "F", held.spot.key, held.token,
                              repr(failed.failed_at), failed.id, failed.queue, failed.name, failed.attempts,
                              failed.error, failed.body))

    def lapse(self, now: float, limit: int) -> list[Spot]:
        spots = self._run(self._scripts.lapse, repr(now), limit)
        out: list[Spot] = []
        for raw in spots:
            topic, partition, offset = as_text(raw).rsplit("/", 2)
            out.append(Spot(topic, int(partition), int(offset)))
        return out

    def forget(self, topic: str, partition: int, below: int) -> None:
        self._run(self._scripts.forget, f"{topic}/{partition}", below)

    # -- delayed jobs -------------------------------------------------------------------------

    def add_delayed(self, rows: Sequence[Delayed]) -> None:
        if not rows:
            return
        args: list[EncodableT] = ["add"]
        for r in rows:
            args += [r.id, r.queue, repr(r.due), r.job_id, r.body]
        self._run(self._scripts.delayed, *args)

    def take_due(self, now: float, until: float, token: str, limit: int) -> list[Delayed]:
        flat = self._run(self._scripts.delayed, "take", repr(now), repr(until), token,
                         limit)
        return [
            Delayed(as_text(flat[i]), as_text(flat[i + 1]), now, as_text(flat[i + 2]), bytes(flat[i + 3]))
            for i in range(0, len(flat), 4)
        ]

    def drop_delayed(self, ids: Sequence[str], token: str) -> None:
        if ids:
            self._run(self._scripts.delayed, "drop", token, *ids)

    def fail_delayed(self, id: str, token: str, failed: FailedJob) -> bool:
        return bool(self._run(self._scripts.delayed, "fail", token, id, repr(failed.failed_at), failed.id,
                              failed.queue, failed.name, failed.attempts, failed.error, failed.body))

    # -- counts -------------------------------------------------------------------------------

    def records_from(self, topic: str, starts: Mapping[int, int]) -> int:
        if not starts:
            return 0
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for partition, start in starts.items():
                pipe.zcount(f"{self.prefix}O:{topic}/{partition}", start, "+inf")
            return sum(int(n) for n in pipe.execute())

    def reserved(self) -> dict[str, int]:
        with translated():
            found = self.client.hgetall(f"{self.prefix}reserved")
        return {as_text(q): int(n) for q, n in found.items() if int(n) > 0}

    def delayed(self, now: float) -> dict[str, DelayedCounts]:
        with translated():
            queues = sorted(as_text(q) for q in self.client.smembers(f"{self.prefix}queues"))
            pipe = self.client.pipeline(transaction=False)
            for queue in queues:
                pipe.zcount(f"{self.prefix}DQ:{queue}", "-inf", repr(now))
                pipe.zcount(f"{self.prefix}DQ:{queue}", f"({now!r}", "+inf")
            replies = pipe.execute()
        counts = {q: DelayedCounts(int(replies[2 * i]), int(replies[2 * i + 1])) for i, q in enumerate(queues)}
        return {q: c for q, c in counts.items() if c.due or c.later}

    # -- the failed store and unique locks ----------------------------------------------------

    def failed_newest(self, limit: int) -> list[FailedJob]:
        with translated():
            ids = self.client.zrevrange(f"{self.prefix}failed", 0, max(limit, 1) - 1)[:limit]
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(f"{self.prefix}F:{as_text(job_id)}")
            rows: list[dict[bytes, Any]] = pipe.execute()
        return [_failed(row) for row in rows if row]

    def failed_count(self) -> int:
        with translated():
            return int(self.client.zcard(f"{self.prefix}failed"))

    def failed_retry(self, id_or_all: str, now: float, refresh: Refresh, new_id: Callable[[], str]) -> int:
        with translated():
            if id_or_all == "all":
                ids = [as_text(i) for i in self.client.zrange(f"{self.prefix}failed", 0, -1)]
            else:
                ids = [id_or_all]
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(f"{self.prefix}F:{job_id}", "body")
            bodies: list[bytes | None] = pipe.execute()
        if id_or_all != "all" and bodies[0] is None:
            raise NoFailedJob(f"there is no failed job with id {id_or_all}")
        found = [(job_id, body) for job_id, body in zip(ids, bodies, strict=True) if body is not None]
        moved = 0
        for start in range(0, len(found), RETRY_CHUNK):
            args: list[EncodableT] = ["retry", repr(now)]
            for job_id, body in found[start : start + RETRY_CHUNK]:
                args += [job_id, new_id(), refresh(bytes(body))]
            moved += int(self._run(self._scripts.failed, *args))
        if id_or_all != "all" and not moved:
            raise NoFailedJob(f"there is no failed job with id {id_or_all} (retried meanwhile)")
        return moved

    def failed_flush(self) -> int:
        return int(self._run(self._scripts.failed, "flush"))

    def acquire_lock(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self._locks.acquire_lock(key, owner, ttl))

    def release_lock(self, key: str, owner: str) -> None:
        self._locks.release_lock(key, owner)


def _failed(row: dict[bytes, Any]) -> FailedJob:
    return FailedJob(
        id=as_text(row[b"id"]), queue=as_text(row[b"queue"]), name=as_text(row[b"name"]),
        attempts=int(row[b"attempts"]), error=as_text(row[b"error"]), failed_at=float(row[b"failed_at"]),
        body=bytes(row[b"body"]),
    )
