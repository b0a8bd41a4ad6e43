"""What the reliability tests share: real `jobbridge worker` processes, polling, and reading the runs back.

Every wait polls for an outcome against a generous deadline; nothing sleeps a
fixed time to "wait for" something.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import Engine, create_engine, text

from jobbridge.drivers.database.engine import parse_url
from tests.integration.appended_lines import whole_lines
from tests.integration.reliability_app import RUNS_TABLE, RUNS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
APP = "tests.integration.reliability_app:make_bridge"
DEADLINE = 120.0


def wait_for(check: Callable[[], object], what: str, timeout: float = DEADLINE, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


@dataclass(frozen=True)
class Run:
    """One run of a job, as the job itself recorded it."""

    job_id: str
    pid: int
    attempt: int
    started_at: float
    finished_at: float | None
    tag: str = "-"


def times_run(runs: Iterable[Run]) -> Counter[str]:
    return Counter(run.job_id for run in runs)


def duplicates(runs: Iterable[Run]) -> int:
    """Runs beyond the first of each job."""
    return sum(count - 1 for count in times_run(runs).values())


#: after its banner, how long a worker is given to install its signal handlers
STARTUP_GRACE = 0.5


class Workers:
    """`jobbridge worker` processes on one app and environment; each one's output goes to its own log."""

    def __init__(self, tmp: Path, variables: Mapping[str, str]) -> None:
        self.tmp = tmp
        self.vars = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
        self.vars.update(variables)
        self.vars["PYTHONUNBUFFERED"] = "1"
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, *args: str, app: str = APP) -> subprocess.Popen[bytes]:
        script = Path(sys.executable).with_name("jobbridge")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
        log = self.tmp / f"worker-{len(self.procs)}.log"
        out: IO[bytes] = log.open("wb")
        proc = subprocess.Popen([*command, "worker", "-A", app, *args],
                                cwd=REPO, env=self.vars, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append((proc, log))
        return proc

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        return next(log for p, log in self.procs if p is proc).read_text()

    def processed(self, proc: subprocess.Popen[bytes]) -> int:
        found = re.search(r"Processed (\d+) job attempt", self.output(proc))
        assert found, f"no summary from worker {proc.pid}:\n{self.output(proc)[-3000:]}"
        return int(found.group(1))

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc, _ in self.procs if proc.poll() is None]

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL

    def stop(self, procs: Iterable[subprocess.Popen[bytes]], timeout: float = 60) -> dict[int, int]:
        """SIGTERM, then each exit status by pid: a graceful stop exits 0.

        A process is signalled only once it has printed its banner and had a moment to install its
        signal handlers: a SIGTERM during interpreter start-up ends any Python process with -15, which
        says nothing about the worker (a freshly started replacement had held nothing yet).
        """
        procs = list(procs)
        for proc in procs:
            wait_for(lambda proc=proc: proc.poll() is not None or bool(self.output(proc)),
                     f"worker {proc.pid} to start")
        time.sleep(STARTUP_GRACE)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = {}
        for proc in procs:
            try:
                codes[proc.pid] = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"worker {proc.pid} did not stop:\n{self.output(proc)[-3000:]}") from None
        return codes

    def exited(self, proc: subprocess.Popen[bytes], timeout: float = DEADLINE) -> int:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker {proc.pid} did not exit:\n{self.output(proc)[-3000:]}") from None

    def close(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


class SqlRunsReader:
    """The ``jb_runs`` table of a database the test owns: created here, read back by the test."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = create_engine(parse_url(url), pool_size=1, max_overflow=2)
        self.kind = self.engine.dialect.name
        with self.engine.begin() as conn:
            if self.kind == "mysql":
                conn.execute(text("SET SESSION max_heap_table_size = 256 * 1024 * 1024"))
            conn.execute(text(RUNS_TABLE[self.kind]))

    @property
    def variable(self) -> dict[str, str]:
        return {RUNS_VARIABLE: self.url}

    def scalar(self, sql: str, **params: object) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(text(sql), params).scalar_one())

    def count(self) -> int:
        return self.scalar("SELECT count(*) FROM jb_runs")

    def finished(self) -> int:
        return self.scalar("SELECT count(*) FROM jb_runs WHERE finished_at IS NOT NULL")

    def ids_run(self) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(text("SELECT DISTINCT job_id FROM jb_runs")).scalars())

    def all(self) -> list[Run]:
        with self.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT job_id, pid, attempt, started_at, finished_at FROM jb_runs ORDER BY run_id")).all()
        return [Run(str(r[0]), int(r[1]), int(r[2]), float(r[3]), None if r[4] is None else float(r[4]))
                for r in rows]

    def close(self) -> None:
        self.engine.dispose()


class FileRunsReader:
    """The lines `reliability_app.FileRuns` appends, paired up by run key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    @property
    def variable(self) -> dict[str, str]:
        return {RUNS_VARIABLE: f"file://{self.path}"}

    def all(self) -> list[Run]:
        started: dict[str, Run] = {}
        done: dict[str, float] = {}
        for line in whole_lines(self.path):
            event, key, job_id, pid, attempt, at, tag = line.split()
            if event == "start":
                started[key] = Run(job_id, int(pid), int(attempt), float(at), None, tag)
            else:
                done[key] = float(at)
        return [Run(r.job_id, r.pid, r.attempt, r.started_at, done.get(key), r.tag) for key, r in started.items()]

    def ids_done(self) -> set[str]:
        return {run.job_id for run in self.all() if run.finished_at is not None}
