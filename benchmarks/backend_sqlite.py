"""``python -m benchmarks sqlite``: jobbridge on its embedded SQLite store (issue 2's benchmark).

Enqueue (single `dispatch` and one `dispatch_many`) and processing with one
worker process at its default concurrency. No peer runs on SQLite; the
targets are absolute: processing >= 5,000 jobs/s, dispatch_many >= 50,000/s;
and telemetry (OpenTelemetry, Sentry, Prometheus, the heartbeat) costs at most
5 % of the jobs per CPU-second. Last, a bare sqlite3 client measures the store's
own limit on a file of its own (`benchmarks.store_floor`).
"""

from __future__ import annotations

from benchmarks import store_floor
from benchmarks.common import Options, ProbeServer, run_library
from benchmarks.report import LatencyRow, Row
from benchmarks.run_jobbridge import METRICS, TELEMETRY, Config, JobbridgeRunner
from benchmarks.stores import empty_jobbridge_tables, fresh_sqlite, sqlite_url
from benchmarks.targets import Target

TITLE = "SQLite (embedded, WAL)"
TARGETS = (
    Target("jobbridge processing, 1 process", "jobbridge (sqlite)", "process-1p", at_least=5_000),
    Target("jobbridge dispatch_many", "jobbridge (sqlite)", "enqueue-batch", at_least=50_000),
    Target("jobbridge metrics + heartbeat cost, 1 process", "jobbridge (sqlite)", METRICS.key,
           cost_versus="process-1p-warning", at_most=0.05),
    Target("jobbridge telemetry cost (OTel + Sentry + metrics), 1 process", "jobbridge (sqlite)", TELEMETRY.key,
           cost_versus="process-1p-warning", at_most=0.05),
)


def run(probe: ProbeServer, opts: Options, only: set[str] | None) -> tuple[list[Row], list[LatencyRow]]:
    rows: list[Row] = []
    if not only or "jobbridge" in only:
        url = sqlite_url()
        runner = JobbridgeRunner(
            "jobbridge (sqlite)", url,
            [Config("process-1p", "process, 1 process x default concurrency (8 threads)"), METRICS, TELEMETRY],
            latency="process-1p", clean=lambda: empty_jobbridge_tables(url), before=fresh_sqlite)
        rows, _ = run_library(lambda: runner, runner.library, probe, opts, latency=False)
    if not only or store_floor.word("sqlite") in only:  # the store's own limit, same run (`benchmarks.store_floor`)
        rows += store_floor.run("sqlite", opts)
    return rows, []
