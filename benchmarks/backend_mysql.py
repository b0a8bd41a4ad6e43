"""``python -m benchmarks mysql``: jobbridge on MariaDB/MySQL (issue 3); no peer queues on MariaDB.

Its own database on the shared server; processing with one worker process and
with 2 processes x 8; latency with an idle worker, which polls MariaDB every
``--sleep`` (1 s by default): there is no NOTIFY to wake it. Last, a bare
PyMySQL client measures the store's own limit on the same server
(`benchmarks.store_floor`).
"""

from __future__ import annotations

from benchmarks import store_floor
from benchmarks.common import Options, ProbeServer, run_library
from benchmarks.report import LatencyRow, Row
from benchmarks.run_jobbridge import Config, JobbridgeRunner
from benchmarks.stores import BENCH_DB, drop_jobbridge_tables, empty_jobbridge_tables, ensure_mysql_database, mysql_url
from benchmarks.targets import Target

TITLE = "MariaDB"
JB = "jobbridge (mariadb)"
TARGETS = (Target("jobbridge processing, 1 process", JB, "process-1p", at_least=2_500),)


def _fresh(url: str) -> None:
    """The benchmark database, with jobbridge's tables dropped: `migrate` creates the current schema."""
    ensure_mysql_database(BENCH_DB)
    drop_jobbridge_tables(url)


def run(probe: ProbeServer, opts: Options, only: set[str] | None) -> tuple[list[Row], list[LatencyRow]]:
    rows: list[Row] = []
    latency: list[LatencyRow] = []
    if not only or "jobbridge" in only:
        rows, lat = run_library(_runner, JB, probe, opts)
        latency += [lat] if lat else []
    if not only or store_floor.word("mysql") in only:  # the store's own limit, same run (`benchmarks.store_floor`)
        rows += store_floor.run("mysql", opts)
    return rows, latency


def _runner() -> JobbridgeRunner:
    url = mysql_url(BENCH_DB)
    return JobbridgeRunner(
        JB, url,
        [Config("process-1p", "process, 1 process x default concurrency (8 threads)"),
         Config("process-2x8", "process, 2 processes x 8 threads", processes=2, concurrency=8)],
        latency="process-1p", clean=lambda: empty_jobbridge_tables(url),
        before=lambda: _fresh(url), poll_interval=1.0)  # the worker's default --sleep
