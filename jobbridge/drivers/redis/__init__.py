"""The redis driver: the reservation protocol on Redis Streams with a consumer group per queue.

URL: ``redis://[[user]:password@]host[:port][/db]`` or ``rediss://...`` (TLS), through redis-py.

Keys, all under ``prefix`` (default ``jobbridge:``)::

    {prefix}queue:{name}     stream      ready and reserved jobs; fields id, body, attempts;
                                         consumer group "jobbridge" (its pending list = reserved)
    {prefix}delayed:{name}   sorted set  delayed jobs scored by due time (Redis's clock, seconds)
    {prefix}leases           sorted set  "<entry id> <queue>" scored by lease deadline (Redis's clock),
                                         and one member at +inf that keeps it a skiplist (reserve.lua)
    {prefix}queues           set         every queue name pushed to
    {prefix}failed           sorted set  failed job ids scored by failed_at
    {prefix}failed:{id}      hash        a failed job: queue, name, attempts, error, failed_at, body
    {prefix}lock:{key}       string      a unique-job lock: "<owner>|<expires_at>", with PX
    {prefix}schedules        hash        schedule entry -> "<last tick>|<job id>|<fired at>" (`schedules`)
    {prefix}workers          hash        worker process id -> its heartbeat record, JSON (`workers`)
    {prefix}workers:beats    sorted set  worker process ids scored by last heartbeat (Redis's clock)

Settings: `jobbridge.drivers.redis.settings` declares them (``SCHEMA``: each key's
type, bounds and default, and the keys refused with what to write instead).

Deadlines are read off Redis's clock (``TIME``), so worker hosts whose clocks
disagree agree on every lease; an envelope is at most `MAX_MESSAGE_BYTES`
(8 MiB) encoded; an entry this driver did not write is failed with a reason,
never raised (`entries`).

Redis can still lose an accepted job (persistence, replication, eviction):
``may_lose_an_accepted_job`` is true, and the worker's start-up check
(`RedisDriver.check`, through `check_eviction_policy`) warns unless
``maxmemory-policy`` is ``noeviction``. docs/redis.md says what is guaranteed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers import lazy_exports
from jobbridge.drivers.redis.settings import REFUSED, SETTINGS, RedisSettings, parse_settings

if TYPE_CHECKING:
    from jobbridge.drivers import Resources
    from jobbridge.drivers.redis.driver import CAPABILITIES, RedisDriver
    from jobbridge.drivers.redis.entries import MAX_MESSAGE_BYTES
    from jobbridge.drivers.redis.eviction import check_eviction_policy

__all__ = [
    "CAPABILITIES", "MAX_MESSAGE_BYTES", "REFUSED", "SETTINGS", "RedisDriver", "RedisSettings",
    "check_eviction_policy", "open",
]

# the driver (and redis-py with it) is imported on first use: the settings above load without it
__getattr__ = lazy_exports(__name__, {"CAPABILITIES": "driver", "RedisDriver": "driver",
                                      "MAX_MESSAGE_BYTES": "entries", "check_eviction_policy": "eviction"})


def open(settings: Mapping[str, Any], resources: Resources) -> RedisDriver:
    """Build a redis driver from a connection's settings (a refused or unknown key fails here)."""
    from jobbridge.drivers.redis import driver

    return driver.RedisDriver(parse_settings(settings), clock=resources.clock)
