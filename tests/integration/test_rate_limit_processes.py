"""Rate limits in real `jobbridge worker` processes on one SQLite file.

A rate-limited job type next to an unlimited one on the same queue: the unlimited jobs are not
held up, the limited ones start no more often than their rate (read off the recorded start
times, which a slow machine only spreads further apart), every attempt is the first, and none
failed. The same across the two children of one ``--processes 2`` command (one limit per
worker command), and across two worker commands with a limit shared through the store.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobbridge import JobBridge
from jobbridge.drivers.worker_registry_port import worker_registry_of
from jobbridge.settings import Settings
from jobbridge.testing.contract import pending
from tests.integration import rate_limit_app
from tests.integration.appended_lines import whole_lines
from tests.integration.rate_limit_app import RATE
from tests.integration.reliability_support import Workers
from tests.integration.reliability_support import wait_for as polled

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
APP = "tests.integration.rate_limit_app:make_bridge"
LEASE = 4  # seconds: a job waits in its worker at most half of it, so part of a backlog is handed back
DEADLINE = 60.0
#: how much earlier than its turn a recorded start may look: the recording's own jitter
JITTER = 0.06


class Env(Workers):
    """One SQLite store, one file of recorded starts, and the worker processes started on them."""

    def __init__(self, tmp: Path) -> None:
        self.url = f"sqlite:///{tmp / 'jobs.sqlite3'}"
        self.results = tmp / "results.txt"
        self.results.touch()
        super().__init__(tmp, {"JOBBRIDGE_DATABASE_URL": self.url, "JOBBRIDGE_RESERVATION": str(LEASE),
                               rate_limit_app.RESULTS_VARIABLE: str(self.results)})
        self.bridge = JobBridge(Settings.from_mapping({"database_url": self.url, "reservation": LEASE}),
                                jobs=rate_limit_app.ALL)

    def worker(self, *args: str) -> subprocess.Popen[bytes]:
        return self.start("--sleep", "0.05", "-c", "4", *args, app=APP)

    def wait_until_running(self, processes: int) -> None:
        """Wait until this many worker processes have written their first heartbeat (they loop next).

        Dispatching before then lets the process that started first take the whole backlog on a
        slow machine, and the test would learn nothing about sharing a limit.
        """
        registry = worker_registry_of(self.bridge.driver())
        assert registry is not None, "the SQLite store keeps a worker registry"
        wait_for(lambda: len({w.pid for w in registry.list()}) >= processes, f"{processes} worker processes")

    def starts(self, tag: str) -> list[list[str]]:
        return [f for f in (line.split() for line in whole_lines(self.results)) if f[0] == tag]

    def stop_all(self) -> str:
        """SIGTERM to every process still running, each exit awaited; their output, joined."""
        self.stop(self.live(), timeout=20)
        return "\n".join(log.read_text() for _, log in self.procs)

    def close(self) -> None:
        super().close()
        self.bridge.close()


def wait_for(check: Callable[[], object], what: str) -> None:
    polled(check, what, DEADLINE)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path)
    yield made
    made.close()


def assert_within_the_rate(starts: list[list[str]]) -> None:
    """No more than RATE starts in any one second: the (RATE+1)th start after any is a second later."""
    times = sorted(float(f[4]) for f in starts)
    closest = min(later - first for first, later in zip(times, times[RATE:], strict=False))
    assert closest >= 1.0 - JITTER, f"{RATE + 1} starts within {closest:.3f}s: over {RATE}/s"


def assert_each_ran_once_on_its_first_attempt(env: Env, tag: str, ids: list[str | None]) -> None:
    starts = env.starts(tag)
    assert sorted(f[1] for f in starts) == sorted(i for i in ids if i), "each job ran once"
    assert {f[2] for f in starts} == {"1"}, "waiting for a turn spent no attempt"


def test_a_rate_limited_job_type_runs_at_its_rate_and_holds_nothing_else_up(env: Env) -> None:
    limited = env.bridge.dispatch_many(rate_limit_app.Limited(n=i) for i in range(20))
    free = env.bridge.dispatch_many(rate_limit_app.Free(n=i) for i in range(10))
    env.worker()
    wait_for(lambda: len(env.starts("limited")) == 20, "the limited jobs to run")
    output = env.stop_all()
    assert_each_ran_once_on_its_first_attempt(env, "limited", limited)
    assert_each_ran_once_on_its_first_attempt(env, "free", free)
    assert_within_the_rate(env.starts("limited"))
    # the unlimited jobs, queued behind all twenty, all started before the third limited one
    limited_times = sorted(float(f[4]) for f in env.starts("limited"))
    assert max(float(f[4]) for f in env.starts("free")) < limited_times[2]
    assert env.bridge.driver().failed.count() == 0 and pending(env.bridge.driver(), "default") == 0
    assert "30 succeeded" in output and "0 released" in output and "0 failed" in output, output


def test_the_children_of_one_worker_command_share_its_limit(env: Env) -> None:
    env.worker("--processes", "2")
    env.wait_until_running(2)
    # five seconds of work a round: the jobs one child holds past half its lease go back, and the other takes
    # some; a busy machine may still let the child that handed them back take them again, so up to three rounds
    limited: list[str | None] = []

    def all_ran(count: int) -> Callable[[], bool]:
        return lambda: len(env.starts("limited")) == count

    for _ in range(3):
        limited += env.bridge.dispatch_many(rate_limit_app.Limited(n=len(limited) + i) for i in range(25))
        wait_for(all_ran(len(limited)), "the limited jobs to run")
        if len({f[3] for f in env.starts("limited")}) == 2:
            break
    env.stop_all()
    assert_each_ran_once_on_its_first_attempt(env, "limited", limited)
    assert len({f[3] for f in env.starts("limited")}) == 2, "both children ran some"
    assert_within_the_rate(env.starts("limited"))


def test_a_shared_limit_holds_across_worker_commands(env: Env) -> None:
    # a queue each, so that both commands certainly run some: the limit is the job type's, wherever it runs
    env.worker("-Q", "left")
    env.worker("-Q", "right")
    shared = [*env.bridge.dispatch_many((rate_limit_app.Shared(n=i) for i in range(0, 15, 2)), queue="left"),
              *env.bridge.dispatch_many((rate_limit_app.Shared(n=i) for i in range(1, 15, 2)), queue="right")]
    wait_for(lambda: len(env.starts("shared")) == 15, "the shared-limit jobs to run")
    env.stop_all()
    assert_each_ran_once_on_its_first_attempt(env, "shared", shared)
    assert len({f[3] for f in env.starts("shared")}) == 2, "both workers ran some"
    assert_within_the_rate(env.starts("shared"))
    assert env.bridge.driver().failed.count() == 0
