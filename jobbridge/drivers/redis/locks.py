"""Unique-job locks: one string per lock, ``owner|expires_at``, taken and dropped by Lua."""

from __future__ import annotations

import math

import redis
from redis.typing import EncodableT

from jobbridge.clock import Clock
from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.redis.keys import Keys
from jobbridge.drivers.redis.scripts import Scripts
from jobbridge.errors import StoreRefused


class LockStore:
    """``SET NX PX`` semantics judged by the driver's clock (Redis's, or a test's), with a real PX as the safety net.

    Shared by every process on this Redis. A push cannot join a transaction here, so
    ``transaction`` is ignored: the app drops the lock itself if the caller rolls back.
    """

    shared = True

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts, clock: Clock) -> None:
        self.client, self.keys, self.scripts, self.clock = client, keys, scripts, clock

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        if not math.isfinite(ttl):
            raise StoreRefused("a unique lock's ttl must be a finite number of seconds (unique_for)")
        now = self.clock.now()
        ttl_ms = max(1, math.ceil(ttl * 1000))
        args: list[EncodableT] = [owner, repr(now), repr(now + ttl), ttl_ms]
        with translated():
            taken = self.scripts.lock_acquire([self.keys.lock(key)], args)
        return bool(taken)

    def release(self, key: str, owner: str) -> None:
        with translated():
            self.scripts.lock_release([self.keys.lock(key)], [owner])
