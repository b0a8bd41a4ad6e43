"""Worker subprocesses: how the harness starts a library's worker, stops it, and reads its CPU time."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.probe import ENV as PROBE_ENV
from benchmarks.probe import ENV_COUNTS as COUNTS_ENV

if TYPE_CHECKING:
    from benchmarks.common import ProbeServer

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = Path(tempfile.gettempdir()) / "jb-bench-logs"


def child_env(probe: ProbeServer | None = None, **extra: str) -> dict[str, str]:
    """The environment a worker subprocess gets: the repo importable, the probe address, no stray config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBBRIDGE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    if probe is not None:
        env[PROBE_ENV] = probe.address
        env[COUNTS_ENV] = probe.counts_path
    env.update(extra)
    return env


def venv_bin(name: str) -> str:
    """A console script of the interpreter running the harness (celery, rq, jobbridge, ...)."""
    return str(Path(sys.executable).parent / name)


class WorkerGroup:
    """One or more worker OS processes, each started in its own session so the whole tree can be stopped."""

    def __init__(self, label: str, commands: Sequence[Sequence[str]], env: dict[str, str]) -> None:
        self.label = label
        self.commands = [list(c) for c in commands]
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        slug = "".join(ch if ch.isalnum() else "-" for ch in label)
        self.log = LOG_DIR / f"{slug}-{os.getpid()}.log"

    def start(self) -> None:
        with self.log.open("wb") as out:
            for cmd in self.commands:
                self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True))

    def exited(self) -> int | None:
        """The exit code of the first process that has ended, if any has."""
        for proc in self.procs:
            if proc.poll() is not None:
                return proc.returncode
        return None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to each process group we started, then SIGKILL whatever is left after ``grace``."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group: prefork children too
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def cpu_seconds(self) -> float:
        """User + system CPU used so far by every process in the sessions started here.

        Read from /proc: a session holds the worker, its prefork children, a
        supervisor's children (their own process groups, the same session) and,
        through cutime/cstime, children already reaped (RQ's work horses). CPU
        time is what stays meaningful when other work shares the machine.
        """
        sessions = {proc.pid for proc in self.procs}
        ticks = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    data = stat.read()
            except OSError:
                continue
            fields = data[data.rindex(")") + 2:].split()  # fields[0] is field 3 (state) of proc(5)
            if int(fields[3]) in sessions:  # field 6: session
                ticks += sum(int(v) for v in fields[11:15])  # fields 14-17: utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def tail(self, lines: int = 6) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])
