"""A worker whose clock is a minute ahead, beside a normal one, on Redis: no job runs twice (issue 9).

Leases are deadlines every worker compares. Read off each worker's own wall
clock, a worker 60 s ahead sees every lease of a normal worker as lapsed at its
first reclaim, and hands that worker's running jobs out again. The driver judges
leases by Redis's clock (`jobbridge.clock.StoreClock`), so the skewed worker
agrees with the normal one about every deadline.

The normal worker starts first and is busy with 2 s jobs when the skewed one
starts; the skewed worker reclaims at once on start, and again every half lease
(6 s reservation), while jobs are held on both.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.drivers.redis_helpers import drop_keys
from tests.integration import reliability_app as app
from tests.integration.reliability_support import FileRunsReader, Workers, times_run, wait_for
from tests.services import ensure_redis, faketime_env

pytestmark = pytest.mark.slow

LEASE = 6.0
JOBS = 12  # 2 s jobs enough that both workers hold some at the skewed one's first two reclaims (0 s, 3 s)
SKEW = 60.0


def test_a_worker_a_minute_ahead_runs_no_job_twice(tmp_path: Path) -> None:
    url, prefix = ensure_redis(), f"jbskew:{uuid.uuid4().hex[:12]}:"
    runs = FileRunsReader(tmp_path / "runs.txt")
    bridge = JobBridge(Settings.from_mapping({"driver": "redis", "redis_url": url, "redis_prefix": prefix,
                                              "reservation": LEASE}), jobs=app.ALL)
    variables = {"JOBBRIDGE_DRIVER": "redis", "JOBBRIDGE_REDIS_URL": url, "JOBBRIDGE_REDIS_PREFIX": prefix,
                 "JOBBRIDGE_RESERVATION": str(LEASE), **runs.variable}
    (tmp_path / "ahead").mkdir()
    normal, ahead = Workers(tmp_path, variables), Workers(tmp_path / "ahead", {**variables, **faketime_env(SKEW)})
    try:
        ids = bridge.dispatch_many(app.Slow(tag=f"s{i}", seconds=2) for i in range(JOBS))
        first = normal.start("--concurrency", "3", "--sleep", "0.05")
        wait_for(lambda: len(runs.all()) >= 3, "the normal worker to be running jobs")
        skewed = ahead.start("--concurrency", "3", "--sleep", "0.05")
        wait_for(lambda: set(ids) <= runs.ids_done(), "every job to finish", timeout=90)
        wait_for(lambda: pending(bridge.driver(), "default") == 0, "every job to be acknowledged")
        assert first.poll() is None and skewed.poll() is None, "both workers still running"
        assert normal.stop([first]) == {first.pid: 0} and ahead.stop([skewed]) == {skewed.pid: 0}

        all_runs = runs.all()
        ran = times_run(all_runs)
        twice = sorted(job_id for job_id, count in ran.items() if count > 1)
        assert not twice, f"{len(twice)} of {JOBS} jobs ran more than once: a lease was judged by a skewed clock"
        assert {run.pid for run in all_runs} == {first.pid, skewed.pid}, "both workers took jobs"
        assert bridge.driver().failed.count() == 0
        print(f"\n[redis skew] a worker {SKEW:g}s ahead beside a normal one, {LEASE:g}s reservation, {JOBS} jobs "
              f"of 2s: {len(all_runs)} runs, none twice "
              f"({sum(run.pid == skewed.pid for run in all_runs)} on the skewed worker)")
    finally:
        normal.close()
        ahead.close()
        bridge.close()
        drop_keys(url, prefix)
