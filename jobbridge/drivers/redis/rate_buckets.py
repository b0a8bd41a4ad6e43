"""Shared rate limits on Redis: each bucket one key, booked by one Lua script (``rate_take.lua``).

The script reads the server's time and books the turns in one atomic step, so
concurrent takers on any number of hosts are granted turns spaced exactly as
one taker's would be. A bucket's key expires a minute after its last booked
turn, so a job type that stopped running leaves nothing behind.
"""

from __future__ import annotations

import redis
from redis.typing import EncodableT

from jobbridge.drivers.redis.connection import translated
from jobbridge.drivers.redis.keys import Keys
from jobbridge.drivers.redis.scripts import source
from jobbridge.rate_limits import Grants, RateLimit


class RateBuckets:
    """The Redis driver's shared buckets (``driver.rate_buckets``)."""

    shared = True

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client, self.keys = client, keys
        self._take = client.register_script(source("rate_take"))

    def take(self, key: str, limit: RateLimit, count: int, horizon: float) -> Grants:
        args: list[EncodableT] = [repr(limit.interval), repr((limit.burst - 1) * limit.interval), count, repr(horizon)]
        with translated():
            raw = self._take([f"{self.keys.prefix}rate:{key}"], args)
        values = [float(v) for v in raw]
        return Grants(tuple(values[1:]), values[0])
