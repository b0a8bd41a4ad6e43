"""The one Redis setting that can silently drop a backlog: ``maxmemory-policy``."""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.exceptions import RedisError

logger = logging.getLogger("jobbridge.drivers.redis")

SAFE_POLICY = "noeviction"


def check_eviction_policy(client: redis.Redis) -> str:
    """Read ``maxmemory-policy`` and warn unless it is ``noeviction``; return the policy.

    Under any other policy a full Redis evicts keys to stay under ``maxmemory``,
    this queue's streams included, silently and exactly when the backlog is
    deepest; ``noeviction`` turns that into refused pushes instead. A server
    that hides CONFIG (many managed ones) is reported as ``"unknown"``.
    """
    try:
        reply = client.config_get("maxmemory-policy")
    except RedisError as exc:
        logger.warning(
            "cannot read redis maxmemory-policy (%s); unless it is noeviction, "
            "redis may evict queued jobs when memory runs short", exc,
        )
        return "unknown"
    found: dict[Any, Any] = dict(reply)
    raw = found.get("maxmemory-policy") or found.get(b"maxmemory-policy") or "unknown"
    policy = raw.decode() if isinstance(raw, bytes) else str(raw)
    if policy != SAFE_POLICY:
        logger.warning(
            "redis maxmemory-policy is %r: when memory runs short redis evicts keys, queued jobs "
            "included, without an error; set maxmemory-policy noeviction", policy,
        )
    return policy
