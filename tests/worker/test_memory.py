"""A worker's memory stays flat while it drains a large backlog (one real `jobbridge worker` process).

Every finished attempt must leave nothing behind: before this was true, each
one left its watchdog entry until its timeout passed (about 475 bytes a job),
so a worker draining a backlog grew by tens of megabytes a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from jobbridge import JobBridge
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.worker.drain_app import Nothing

REPO = Path(__file__).resolve().parents[2]
JOBS = 30_000
#: jobs run before the baseline sample: imports, pools and caches settle in this many
WARM_UP = 5_000
#: what the process may grow by over the rest of the drain (the leak was ~11 MB over 25,000 jobs)
BOUND_KB = 6 * 1024


def rss_kb(pid: int) -> int | None:
    """The process's resident set (VmRSS) in kB, or None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def worker_command() -> list[str]:
    script = Path(sys.executable).with_name("jobbridge")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
    return [*command, "worker", "-A", "tests.worker.drain_app:make_bridge", "--stop-when-empty",
            "--concurrency", "4", "-l", "warning"]


def test_a_worker_draining_a_backlog_does_not_grow(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"
    bridge = JobBridge(Settings.from_mapping({"driver": "database", "database_url": url}), jobs=[Nothing])
    bridge.driver().migrate()
    bridge.dispatch_many(Nothing(n=i) for i in range(JOBS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
    env |= {"JOBBRIDGE_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(worker_command(), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    driver = bridge.driver()
    baseline: int | None = None
    peak = 0
    try:
        while proc.poll() is None:
            rss = rss_kb(proc.pid)
            left = pending(driver, "default")
            if rss is not None and baseline is None and left <= JOBS - WARM_UP:
                baseline = rss
            elif rss is not None and baseline is not None and left > 0:
                peak = max(peak, rss)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)
        bridge.close()
    output = log.read_text(errors="replace")
    assert proc.returncode == 0, output
    assert driver_pending(url) == 0, "every job was run and acknowledged"
    assert baseline is not None, "the drain was sampled after its warm-up"
    grown = max(0, peak - baseline)
    print(f"RSS after warm-up {baseline} kB, peak {peak} kB, grown {grown} kB")
    assert grown < BOUND_KB, f"the worker grew by {grown} kB while draining {JOBS - WARM_UP} jobs"


def driver_pending(url: str) -> int:
    bridge = JobBridge(Settings.from_mapping({"driver": "database", "database_url": url}), jobs=[Nothing])
    try:
        return pending(bridge.driver(), "default")
    finally:
        bridge.close()
