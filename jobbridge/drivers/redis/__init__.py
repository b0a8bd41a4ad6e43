"""The redis driver: the reservation protocol on Redis Streams with a consumer group per queue.

URL: ``redis://[[user]:password@]host[:port][/db]`` or ``rediss://...`` (TLS), through redis-py.

Keys, all under ``prefix`` (default ``jobbridge:``)::

    {prefix}queue:{name}     stream      ready and reserved jobs; fields id, body, attempts;
                                         consumer group "jobbridge" (its pending list = reserved)
    {prefix}delayed:{name}   sorted set  delayed jobs scored by due time (clock seconds)
    {prefix}leases           sorted set  "<entry id> <queue>" scored by lease deadline (clock seconds)
    {prefix}queues           set         every queue name pushed to
    {prefix}failed           sorted set  failed job ids scored by failed_at
    {prefix}failed:{id}      hash        a failed job: queue, name, attempts, error, failed_at, body
    {prefix}lock:{key}       string      a unique-job lock: "<owner>|<expires_at>", with PX

Settings: ``url``; ``prefix``; ``reservation`` (seconds, default 60); ``connect_timeout_ms``
and ``response_timeout_ms`` (off unless declared); ``reconnect`` (retry a command with
exponential backoff across a dropped connection or a restart; off unless declared),
``reconnect_attempts`` (default 10) and ``reconnect_max_backoff_ms`` (default 1000).
``connection``, ``visibility_timeout``, ``retry_after``, ``block_for`` and pool sizes are
refused by name with what to write instead (`REFUSED`).

Redis can still lose an accepted job (persistence, replication, eviction):
``may_lose_an_accepted_job`` is true, and `check_eviction_policy` warns unless
``maxmemory-policy`` is ``noeviction``. docs/redis.md says what is guaranteed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge.drivers.redis.driver import CAPABILITIES, RedisDriver
from jobbridge.drivers.redis.eviction import check_eviction_policy
from jobbridge.drivers.redis.settings import REFUSED, SETTINGS, RedisSettings, parse_settings

if TYPE_CHECKING:
    from jobbridge.drivers import Resources

__all__ = [
    "CAPABILITIES", "REFUSED", "SETTINGS", "RedisDriver", "RedisSettings", "check_eviction_policy", "open",
]


def open(settings: Mapping[str, Any], resources: Resources) -> RedisDriver:
    """Build a redis driver from a connection's settings (a refused or unknown key fails here)."""
    return RedisDriver(parse_settings(settings), clock=resources.clock)
