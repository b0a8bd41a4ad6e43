"""A worker whose clock is a minute ahead, beside a normal one, on PostgreSQL: no job runs twice (issue 9).

Leases are deadlines one worker writes and every other compares. Read off each
worker's own clock, the worker 60 s ahead (libfaketime) saw the normal worker's
running jobs as lapsed the moment it started, reclaimed them and ran them
again. Judged by the server's clock, both agree on every deadline.

The normal worker starts first and holds ten 2 s jobs of the twenty; the skewed
one starts while they run (its first act is a reclaim), with a 6 s lease that
it would see as lapsed by 54 s. Every job records each of its runs to a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.settings import Settings
from tests.drivers.database_servers import fresh_postgres
from tests.integration import reliability_app as app
from tests.integration.reliability_support import FileRunsReader, Workers, times_run, wait_for
from tests.services import faketime_env

pytestmark = pytest.mark.slow

JOBS = 20
SECONDS = 2.0  # each job's run
LEASE = 6.0  # the reservation: the skewed worker's clock is ten leases ahead
THREADS = JOBS // 2  # the first worker holds half the jobs while the second starts
SKEW = 60.0


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_postgres() as found:
        yield found


def test_a_worker_a_minute_ahead_runs_no_job_a_second_time(url: str, tmp_path: Path) -> None:
    runs = FileRunsReader(tmp_path / "runs.log")
    bridge = JobBridge(Settings.from_mapping({"database_url": url, "reservation": LEASE}), jobs=app.ALL)
    variables = {"JOBBRIDGE_DATABASE_URL": url, "JOBBRIDGE_RESERVATION": str(LEASE), **runs.variable}
    normal, skewed = Workers(tmp_path / "normal", variables), Workers(tmp_path / "skewed",
                                                                      {**variables, **faketime_env(SKEW)})
    for workers in (normal, skewed):
        workers.tmp.mkdir()
    try:
        ids = bridge.dispatch_many([app.Slow(tag=str(i), seconds=SECONDS) for i in range(JOBS)])
        args = ("--queue", "default", "--concurrency", str(THREADS), "--stop-when-empty")
        first = normal.start(*args)
        wait_for(lambda: len(runs.all()) >= THREADS, "the normal worker to be running its jobs", timeout=60)
        second = skewed.start(*args)
        codes = (normal.exited(first), skewed.exited(second))
        ran = times_run(runs.all())
        twice = {job_id: n for job_id, n in ran.items() if n > 1}
        assert not twice, (f"{len(twice)} of {JOBS} jobs ran more than once beside the skewed worker:\n"
                           f"{skewed.output(second)[-3000:]}")
        assert set(ran) == set(ids), "every job ran"
        assert codes == (0, 0), (normal.output(first)[-2000:], skewed.output(second)[-2000:])
    finally:
        normal.close()
        skewed.close()
        bridge.close()
