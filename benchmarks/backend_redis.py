"""``python -m benchmarks redis``: jobbridge on Redis beside Celery, RQ, Dramatiq, arq and Huey (issue 4).

Each library gets its own Redis DB index (`benchmarks.apps.REDIS_DB`) and the
harness flushes only that one. Processing with 1 process x 1 thread and with
each library's default concurrency (the scenario label says which it is).
Last, a bare redis-py client measures the store's own limit on the same server
(`benchmarks.store_floor`).
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import store_floor
from benchmarks.apps import redis_url
from benchmarks.common import Options, ProbeServer, Runner, run_library
from benchmarks.report import LatencyRow, Row
from benchmarks.run_arq import ArqRunner
from benchmarks.run_celery import CeleryRunner
from benchmarks.run_dramatiq import DramatiqRunner
from benchmarks.run_huey import HueyRunner
from benchmarks.run_jobbridge import Config, JobbridgeRunner
from benchmarks.run_rq import RqRunner
from benchmarks.stores import flush_redis_db
from benchmarks.targets import Target

TITLE = "Redis"
JB = "jobbridge (redis)"
TARGETS = (
    Target("jobbridge processing vs Dramatiq, default concurrency", JB, "process-default", times="dramatiq",
           at_least=3),
    Target("jobbridge single dispatch", JB, "enqueue-single", at_least=2_500),
    Target("jobbridge dispatch_many", JB, "enqueue-batch", at_least=40_000),
    Target("jobbridge latency p50", JB, "latency-p50", at_most=0.002),
)


def jobbridge_runner() -> JobbridgeRunner:
    url = redis_url("jobbridge")
    return JobbridgeRunner(
        JB, url,
        [Config("process-1x1", "process, 1 x 1 (--concurrency 1)", processes=1, concurrency=1),
         Config("process-default", "process, default (1 process x 8 threads)")],
        latency="process-default", clean=lambda: flush_redis_db(url))


PEERS: tuple[tuple[str, Callable[[], Runner]], ...] = (
    (JB, jobbridge_runner),
    ("celery", CeleryRunner),
    ("dramatiq", DramatiqRunner),
    ("huey", HueyRunner),
    ("arq", ArqRunner),
    ("rq", RqRunner),
)


def run(probe: ProbeServer, opts: Options, only: set[str] | None) -> tuple[list[Row], list[LatencyRow]]:
    rows: list[Row] = []
    latency: list[LatencyRow] = []
    for library, make in PEERS:
        if only and library.split()[0] not in only:
            continue
        got, lat = run_library(make, library, probe, opts)
        rows += got
        latency += [lat] if lat else []
    if not only or store_floor.word("redis") in only:  # the store's own limit, same run (`benchmarks.store_floor`)
        rows += store_floor.run("redis", opts)
    return rows, latency
