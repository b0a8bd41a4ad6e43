"""Real `jobbridge worker` processes on one SQLite file: exactly-once draining, SIGKILL, SIGTERM,
timeouts, the supervisor replacing children, and a stuck attempt replacing its process.

Every wait polls for an outcome against a generous deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.integration import app_jobs
from tests.integration.appended_lines import whole_lines
from tests.integration.reliability_support import Workers
from tests.integration.reliability_support import wait_for as polled

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
APP = "tests.integration.app_jobs:make_bridge"
LEASE = 3  # seconds: short, so a killed worker's job comes back quickly
DEADLINE = 60.0


class Env(Workers):
    """One SQLite store, one results file, and the worker processes started on them."""

    def __init__(self, tmp: Path, reservation: float) -> None:
        self.url = f"sqlite:///{tmp / 'jobs.sqlite3'}"
        self.results = tmp / "results.txt"
        self.results.touch()
        super().__init__(tmp, {"JOBBRIDGE_DATABASE_URL": self.url, "JOBBRIDGE_RESERVATION": str(reservation),
                               app_jobs.RESULTS_VARIABLE: str(self.results)})
        self.bridge = JobBridge(Settings.from_mapping({"database_url": self.url, "reservation": reservation}),
                                jobs=app_jobs.ALL)

    def worker(self, *args: str) -> subprocess.Popen[bytes]:
        return self.start("--sleep", "0.05", *args, app=APP)

    def lines(self) -> list[list[str]]:
        return [line.split() for line in whole_lines(self.results)]

    def events(self, event: str, tag: str | None = None) -> list[list[str]]:
        return [f for f in self.lines() if f[0] == event and (tag is None or f[2] == tag)]

    def close(self) -> None:
        super().close()
        self.bridge.close()


def wait_for(check: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    polled(check, what, timeout)


def exited(proc: subprocess.Popen[bytes], timeout: float = DEADLINE) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker {proc.pid} did not exit") from None


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path, LEASE)
    yield made
    made.close()


def test_three_processes_drain_5000_jobs_each_exactly_once(tmp_path: Path) -> None:
    env = Env(tmp_path, reservation=60)  # a long lease: nothing may lapse while three processes contend
    try:
        ids = env.bridge.dispatch_many(app_jobs.Record(n=i) for i in range(5000))
        procs = [env.worker("--concurrency", "4", "--stop-when-empty", "-l", "warning") for _ in range(3)]
        for proc in procs:
            assert exited(proc, 120) == 0, env.output(proc)
        ran = Counter(fields[1] for fields in env.events("ran"))
        assert len(ran) == 5000 and set(ran) == set(ids)
        assert [job for job, times in ran.items() if times != 1] == [], "every job ran exactly once"
        assert pending(env.bridge.driver(), "default") == 0
        total = sum(env.processed(p) for p in procs)
        assert total == 5000
    finally:
        env.close()


def test_a_worker_killed_mid_job_loses_nothing(env: Env) -> None:
    job_id = env.bridge.dispatch(app_jobs.Slow(tag="k", seconds=1.0))
    first = env.worker("--concurrency", "2")
    wait_for(lambda: env.events("start", "k"), "the job to start")
    first.kill()
    assert exited(first) == -signal.SIGKILL
    assert env.events("done", "k") == []
    killed_at = time.monotonic()
    second = env.worker("--concurrency", "2")
    wait_for(lambda: env.events("done", "k"), "the job to run again on the other worker")
    took = time.monotonic() - killed_at
    (done,) = env.events("done", "k")
    assert done[1] == job_id and done[3] == "2" and done[4] == str(second.pid)
    # the lease (3 s) lapses, then the next reclaim (every half lease) hands it out: a generous bound
    assert took < LEASE * 4, f"it came back within about one lease ({took:.1f}s)"
    wait_for(lambda: pending(env.bridge.driver(), "default") == 0, "the acknowledgement")


def test_sigterm_lets_the_running_job_finish(env: Env) -> None:
    env.bridge.dispatch(app_jobs.Slow(tag="t", seconds=1.0))
    proc = env.worker()
    wait_for(lambda: env.events("start", "t"), "the job to start")
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 0
    assert len(env.events("done", "t")) == 1
    assert "Processed 1 job attempt(s): 1 succeeded" in env.output(proc)
    assert pending(env.bridge.driver(), "default") == 0


def test_a_pure_python_loop_is_stopped_at_its_timeout_and_the_worker_stays_healthy(env: Env) -> None:
    spin_id = env.bridge.dispatch(app_jobs.Spin())
    proc = env.worker("--concurrency", "1")
    wait_for(lambda: env.bridge.driver().failed.count() == 1, "both attempts to time out")
    (failed,) = env.bridge.driver().failed.list()
    assert failed.id == spin_id and failed.attempts == 2 and failed.error.startswith("JobTimeout")
    env.bridge.dispatch(app_jobs.Record(n=1))
    wait_for(lambda: env.events("ran"), "the next job, on the same thread")
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 0
    output = env.output(proc)
    assert "1 released for retry, 1 failed" in output and "outcome=released" in output


def started_children(env: Env, proc: subprocess.Popen[bytes]) -> list[int]:
    return [int(pid) for pid in re.findall(r"started worker process (\d+)", env.output(proc))]


def test_the_supervisor_replaces_a_child_killed_with_sigkill(env: Env) -> None:
    proc = env.worker("--processes", "2", "--concurrency", "2")
    wait_for(lambda: len(started_children(env, proc)) == 2, "two children")
    victim = started_children(env, proc)[0]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(started_children(env, proc)) == 3, "a replacement child")
    env.bridge.dispatch_many(app_jobs.Record(n=i) for i in range(20))
    wait_for(lambda: len(env.events("ran")) == 20, "the jobs to run")
    assert str(victim) not in {fields[4] for fields in env.events("ran")}
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 0
    output = env.output(proc)
    assert "died unexpectedly (killed by SIGKILL)" in output
    assert "Processed 20 job attempt(s): 20 succeeded" in output
    assert all(gone(pid) for pid in started_children(env, proc))


def test_children_die_with_a_killed_supervisor(env: Env) -> None:
    proc = env.worker("--processes", "2", "--concurrency", "1")
    wait_for(lambda: len(started_children(env, proc)) == 2, "two children")
    children = started_children(env, proc)
    proc.kill()
    exited(proc)
    wait_for(lambda: all(gone(pid) for pid in children), "the children to die with their supervisor")


def test_an_attempt_stuck_in_c_gets_the_process_re_executed(env: Env) -> None:
    job_id = env.bridge.dispatch(app_jobs.StuckOnce())
    proc = env.worker("--concurrency", "2")
    wait_for(lambda: env.events("done", "stuck"), "the stuck job to run again after the process was replaced")
    (done,) = env.events("done", "stuck")
    assert done[1] == job_id and int(done[3]) >= 2
    assert done[4] == str(proc.pid), "os.execv keeps the pid"
    assert proc.poll() is None, "the re-executed worker keeps running"
    assert "replacing this worker process" in env.output(proc)
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 0


def test_max_tasks_per_child_recycles_processes_and_stop_when_empty_ends_the_supervisor(env: Env) -> None:
    env.bridge.dispatch_many(app_jobs.Record(n=i) for i in range(12))
    proc = env.worker("--processes", "1", "--max-tasks-per-child", "5", "--concurrency", "2")
    wait_for(lambda: len(env.events("ran")) == 12, "the jobs to run")
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 0
    output = env.output(proc)
    assert output.count("finished its share; starting a fresh one") >= 2
    assert len({fields[4] for fields in env.events("ran")}) >= 3, "three processes took five jobs each at most"
    assert "Processed 12 job attempt(s): 12 succeeded" in output

    env.bridge.dispatch_many(app_jobs.Record(n=i) for i in range(12, 20))
    drain = env.worker("--processes", "2", "--stop-when-empty")
    assert exited(drain) == 0, "the supervisor ends once every child has drained the queues"
    assert "Processed 8 job attempt(s): 8 succeeded" in env.output(drain)


def test_a_second_signal_to_the_supervisor_kills_the_children(env: Env) -> None:
    env.bridge.dispatch(app_jobs.Slow(tag="long", seconds=60))
    proc = env.worker("--processes", "2", "--concurrency", "1")
    wait_for(lambda: env.events("start", "long"), "the long job to start")
    children = started_children(env, proc)
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "worker stopping (received SIGTERM)" in env.output(proc), "the children to be told")
    proc.send_signal(signal.SIGTERM)
    assert exited(proc) == 1
    assert all(gone(pid) for pid in children)
    assert env.events("done", "long") == [], "the job was cut off; it runs again once its lease lapses"
    (counts,) = env.bridge.driver().counts()
    assert counts.reserved == 1
