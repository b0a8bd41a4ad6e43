"""`RedisLeaseStore`: the Kafka driver's leases, delayed and failed jobs in a redis lock store.

It runs on the client of the redis driver the app opened for the ``locks``
connection, under that driver's prefix plus ``kafka:{<scope>}:`` (the hash
tag keeps one scope's keys in one slot). Every change is one Lua script
(files beside this module, named for the operation; reserve.lua lists the
keys), so racing workers see each record either before or after a change,
never half of one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.kafka.store import Delayed, DelayedCounts, Held, Refresh, Reserved, Reserving, Spot
from jobbridge.drivers.redis.connection import as_text, translated
from jobbridge.drivers.shared.redis_failed import RedisFailedRows
from jobbridge.errors import NoFailedJob
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from jobbridge.drivers.redis.driver import RedisDriver

NAMES = ("reserve", "settle", "extend", "reclaim", "delayed", "failed", "forget")
#: failed jobs moved back per retry script
RETRY_CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Scripts:
    reserve: Script
    settle: Script
    extend: Script
    reclaim: Script
    delayed: Script
    failed: Script
    forget: Script

    @classmethod
    def register(cls, client: redis.Redis) -> _Scripts:
        folder = resources.files(__package__ or __name__)
        return cls(**{n: client.register_script(folder.joinpath(f"{n}.lua").read_text("utf-8")) for n in NAMES})


class RedisLeaseStore:
    """One scope's keys in the lock store's Redis, on the client of the lock store connection's driver."""

    def __init__(self, driver: RedisDriver, prefix: str) -> None:
        self.client = driver.client
        self.prefix = prefix
        self.may_lose_an_accepted_job = driver.capabilities.may_lose_an_accepted_job
        self.locks = driver.locks
        self._driver = driver
        self._scripts = _Scripts.register(self.client)
        self.failures = RedisFailedRows(self.client, prefix)

    @classmethod
    def on(cls, driver: RedisDriver, scope: str) -> RedisLeaseStore:
        """On a `RedisDriver`: its client and prefix, its locks for unique jobs."""
        return cls(driver, f"{driver.settings.prefix}kafka:{{{scope}}}:")

    def describe(self) -> str:
        return self._driver.describe()

    def migrate(self) -> None:
        """Nothing to create: keys appear when first written."""

    def server_clock(self) -> Callable[[], float]:
        """Redis ``TIME``: one clock for every worker, whatever their own clocks say."""
        return self._time

    def _time(self) -> float:
        with translated():
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def check(self) -> None:
        """The redis driver's check: an evicting Redis drops delayed and failed jobs silently."""
        self._driver.check()

    def _run(self, script: Script, *args: EncodableT) -> Any:
        with translated():
            return script(keys=[], args=[self.prefix, *args])

    # -- leases -------------------------------------------------------------------------------

    def reserve(self, spots: Sequence[Reserving]) -> list[Reserved]:
        if not spots:
            return []
        args: list[EncodableT] = []
        for c in spots:
            args += ["P" if c.park else "L", c.spot.key, c.queue, c.token, repr(c.at), c.job_id, c.body]
        return [Reserved(int(n)) for n in self._run(self._scripts.reserve, *args)]

    def states(self, spots: Sequence[Spot]) -> list[Reserved | None]:
        if not spots:
            return []
        with translated():
            pipe = self.client.pipeline(transaction=False)
            for spot in spots:
                pipe.hget(f"{self.prefix}L:{spot.key}", "s")
            found = pipe.execute()
        named = {"1": Reserved.HELD, "2": Reserved.SETTLED}
        return [None if s is None else named.get(as_text(s)) for s in found]

    def extend(self, held: Sequence[Held], until: float) -> list[bool]:
        if not held:
            return []
        args: list[EncodableT] = [repr(until)]
        for h in held:
            args += [h.spot.key, h.token]
        return [bool(n) for n in self._run(self._scripts.extend, *args)]

    def acknowledge(self, held: Sequence[Held]) -> list[bool]:
        if not held:
            return []
        args: list[EncodableT] = ["A"]
        for h in held:
            args += [h.spot.key, h.token]
        return [bool(n) for n in self._run(self._scripts.settle, *args)]

    def release(self, held: Held, row: Delayed) -> bool:
        return bool(self._run(self._scripts.settle, "R", held.spot.key, held.token,
                              row.id, repr(row.due), row.job_id, row.body))

    def fail(self, held: Held, failed: FailedJob) -> bool:
        return bool(self._run(self._scripts.settle, "F", held.spot.key, held.token,
                              repr(failed.failed_at), failed.id, failed.queue, failed.name, failed.attempts,
                              failed.error, failed.body))

    def reclaim(self, now: float, limit: int) -> list[Spot]:
        spots = self._run(self._scripts.reclaim, repr(now), limit)
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

    # -- the failed store ---------------------------------------------------------------------

    def retry_failed(self, id_or_all: str, now: float, refresh: Refresh, new_id: Callable[[], str]) -> int:
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

    def flush_failed(self) -> int:
        return int(self._run(self._scripts.failed, "flush"))

    def count_failed(self) -> int:
        return self.failures.count()

    def list_failed(self, limit: int, where: FailedFilter | None = None) -> list[FailedJob]:
        return self.failures.list(limit, where)

    def get_failed(self, job_id: str) -> FailedJob | None:
        return self.failures.get(job_id)
