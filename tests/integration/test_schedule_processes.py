"""Real processes: three ``jobbridge worker --schedule`` and one ``jobbridge scheduler`` on one store.

A 2-second entry runs while one of the four processes is SIGKILLed every few
seconds and started again, until at least `MIN_KILLS` kills and `MIN_TICKS`
ticks have passed (about twenty seconds). No process leads and none is told
about the others: every tick's job is still dispatched exactly once (one job
id per tick) and runs, and no tick between the first and the last is skipped.
On PostgreSQL and on Redis.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.drivers.database_servers import fresh_postgres
from tests.drivers.redis_helpers import drop_keys
from tests.integration.appended_lines import whole_lines
from tests.integration.reliability_support import REPO, Workers, wait_for
from tests.integration.schedule_app import EVERY, RUNS_VARIABLE
from tests.services import ensure_redis

pytestmark = pytest.mark.slow

APP = "tests.integration.schedule_app:make_bridge"
#: the kills and ticks the scenario runs to, at the least, and about how often a process is killed
MIN_KILLS, MIN_TICKS, KILL_EVERY = 4, 10, 4.0
ROLES: list[tuple[str, ...]] = [("worker", "--schedule", "--concurrency", "2", "--sleep", "0.2")] * 3 + [("scheduler",)]


class Processes(Workers):
    """`jobbridge` commands (worker or scheduler) on one app and environment, each logging to its own file."""

    def run(self, *args: str) -> subprocess.Popen[bytes]:
        script = Path(sys.executable).with_name("jobbridge")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
        log = self.tmp / f"process-{len(self.procs)}.log"
        out: IO[bytes] = log.open("wb")
        proc = subprocess.Popen([*command, args[0], "-A", APP, *args[1:]],
                                cwd=REPO, env=self.vars, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append((proc, log))
        return proc


@pytest.fixture(params=["postgresql", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    if request.param == "redis":
        url, prefix = ensure_redis(), f"jbtest:{uuid.uuid4().hex[:12]}:"
        yield {"JOBBRIDGE_DRIVER": "redis", "JOBBRIDGE_REDIS_URL": url, "JOBBRIDGE_REDIS_PREFIX": prefix}
        drop_keys(url, prefix)
        return
    with fresh_postgres() as url:
        yield {"JOBBRIDGE_DATABASE_URL": url}


def read_runs(path: Path) -> dict[float, set[str]]:
    """The job ids that ran, by tick."""
    by_tick: dict[float, set[str]] = defaultdict(set)
    if path.exists():
        for line in whole_lines(path):
            tick, job_id, _pid = line.split()
            by_tick[float(tick)].add(job_id)
    return by_tick


def last_passed() -> float:
    """The latest tick every live scheduler has seen pass (the one before the current one)."""
    return math.floor(time.time() / EVERY) * EVERY - EVERY


def test_four_schedulers_killed_in_turn_dispatch_every_tick_once(store: dict[str, str], tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    procs = Processes(tmp_path, {**store, RUNS_VARIABLE: str(runs), "JOBBRIDGE_RESERVATION": "4"})
    rng = random.Random(7)
    try:
        running = [procs.run(*role) for role in ROLES]
        wait_for(lambda: read_runs(runs), "the first tick's job to run", timeout=90)
        first = min(read_runs(runs))
        kills, next_kill = 0, time.monotonic() + KILL_EVERY * rng.uniform(0.6, 1.4)
        while kills < MIN_KILLS or last_passed() - first < (MIN_TICKS - 1) * EVERY:
            if time.monotonic() >= next_kill:  # the cadence of the kills, not a wait for an outcome
                victim = rng.randrange(len(running))
                procs.kill(running[victim])
                running[victim] = procs.run(*ROLES[victim])
                kills, next_kill = kills + 1, time.monotonic() + KILL_EVERY * rng.uniform(0.6, 1.4)
            time.sleep(0.1)  # polling for the scenario's end
        last = last_passed()
        wanted = {first + EVERY * k for k in range(int((last - first) / EVERY) + 1)}
        wait_for(lambda: wanted <= set(read_runs(runs)), "every tick's job to run (a killed worker's job "
                 "comes back when its 4 s reservation lapses)", timeout=90)
        for proc in running:
            procs.kill(proc)  # nothing is asserted of their exits: the runs are all in
        by_tick = read_runs(runs)
        assert kills >= MIN_KILLS and len(wanted) >= MIN_TICKS
        missing = sorted(wanted - set(by_tick))
        doubled = {tick: ids for tick, ids in by_tick.items() if len(ids) > 1}
        assert not missing, f"ticks skipped: {missing}"
        assert not doubled, f"ticks dispatched more than once: {doubled}"
    finally:
        procs.close()
