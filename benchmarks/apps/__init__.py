"""The benchmark jobs, once per library: a no-op that reports to the probe, and a latency stamp.

Each module is what that library's worker imports (``-A``, an actor module, a
settings class), configured from ``JB_BENCH_*`` environment variables that the
harness sets, so that the worker subprocess and the dispatching harness agree
on the store.
"""

import os

#: the Redis server every Redis benchmark uses; each library gets a DB index of its own (below)
REDIS = os.environ.get("JB_BENCH_REDIS", "redis://127.0.0.1:6379").rstrip("/")
REDIS_DB = {"jobbridge": 8, "celery": 9, "rq": 10, "dramatiq": 11, "arq": 12, "huey": 13}


def redis_url(library: str) -> str:
    """The Redis URL of ``library``'s own DB index: the harness flushes that index and no other."""
    return f"{REDIS}/{REDIS_DB[library]}"
