"""``python -m benchmarks postgres``: jobbridge on PostgreSQL beside Procrastinate, in one run (issue 3).

Both get a database of their own on the shared server. Processing with one
worker process (each library's default concurrency) and with 2 processes x 8;
latency with an idle single-process worker (jobbridge wakes by LISTEN/NOTIFY).
Last, a bare psycopg client measures the store's own limit on the same server
(`benchmarks.store_floor`).
"""

from __future__ import annotations

from benchmarks import store_floor
from benchmarks.common import Options, ProbeServer, run_library
from benchmarks.report import LatencyRow, Row
from benchmarks.run_jobbridge import METRICS, TELEMETRY, Config, JobbridgeRunner
from benchmarks.run_procrastinate import ProcrastinateRunner
from benchmarks.stores import BENCH_DB, drop_jobbridge_tables, empty_jobbridge_tables, ensure_pg_database, pg_url
from benchmarks.targets import Target

TITLE = "PostgreSQL"
JB = "jobbridge (postgresql)"
TARGETS = (
    Target("jobbridge processing, 1 process", JB, "process-1p", at_least=5_000),
    Target("jobbridge latency p50", JB, "latency-p50", at_most=0.005),
    Target("jobbridge processing vs Procrastinate, 1 process", JB, "process-1p", times="procrastinate",
           at_least=28),
    Target("jobbridge metrics + heartbeat cost, 1 process", JB, METRICS.key, cost_versus="process-1p-warning",
           at_most=0.05),
    Target("jobbridge telemetry cost (OTel + Sentry + metrics), 1 process", JB, TELEMETRY.key,
           cost_versus="process-1p-warning", at_most=0.05),
)


def _fresh(url: str) -> None:
    """The benchmark database, with jobbridge's tables dropped: `migrate` creates the current schema."""
    ensure_pg_database(BENCH_DB)
    drop_jobbridge_tables(url)


def jobbridge_runner() -> JobbridgeRunner:
    url = pg_url(BENCH_DB)
    return JobbridgeRunner(
        JB, url,
        [Config("process-1p", "process, 1 process x default concurrency (8 threads)"), METRICS, TELEMETRY,
         Config("process-2x8", "process, 2 processes x 8 threads", processes=2, concurrency=8)],
        latency="process-1p", clean=lambda: empty_jobbridge_tables(url),
        before=lambda: _fresh(url))


def run(probe: ProbeServer, opts: Options, only: set[str] | None) -> tuple[list[Row], list[LatencyRow]]:
    rows: list[Row] = []
    latency: list[LatencyRow] = []
    for library, make in ((JB, jobbridge_runner), ("procrastinate", ProcrastinateRunner)):
        if only and library.split()[0] not in only:
            continue
        got, lat = run_library(make, library, probe, opts)
        rows += got
        latency += [lat] if lat else []
    if not only or store_floor.word("postgres") in only:  # the store's own limit, same run (`benchmarks.store_floor`)
        rows += store_floor.run("postgres", opts)
    return rows, latency
