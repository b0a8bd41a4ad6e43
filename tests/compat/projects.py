"""Running the sample projects: in this process (memory driver, fixed clock) or under real workers."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobbridge.compat import Celery

PROJECTS = Path(__file__).resolve().parent / "projects"
DEADLINE = 60.0


def load(module: str) -> Any:
    """Import a sample project's module (the projects folder is on sys.path, as a project root is)."""
    if str(PROJECTS) not in sys.path:
        sys.path.insert(0, str(PROJECTS))
    return importlib.import_module(module)


def memory_events() -> list[list[Any]]:
    return list(load("compat_events").memory)


class Worker:
    """One ``jobbridge worker -A <spec>`` process in the projects folder, recording events to a file."""

    def __init__(self, tmp: Path, spec: str, broker: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.events_file = tmp / "events.jsonl"
        self.events_file.touch()
        self.log = tmp / "worker.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBBRIDGE_", "CELERY_"))}
        self.env.update({"COMPAT_EVENTS": str(self.events_file), "CELERY_BROKER_URL": broker,
                         "PYTHONUNBUFFERED": "1", **(env or {})})
        script = Path(sys.executable).with_name("jobbridge")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "jobbridge.cli"]
        out: IO[bytes] = self.log.open("wb")
        self.proc = subprocess.Popen([*command, "worker", "-A", spec, "--sleep", "0.05", *args],
                                     cwd=PROJECTS, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def events(self) -> list[list[Any]]:
        return [json.loads(line) for line in self.events_file.read_text().splitlines() if line.strip()]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, done: Callable[[list[list[Any]]], bool], what: str) -> list[list[Any]]:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            events = self.events()
            if done(events):
                return events
            if self.proc.poll() is not None:
                raise AssertionError(f"the worker exited ({self.proc.returncode}) before {what}:\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; events: {self.events()}\n{self.output()}")

    def stop(self) -> int:
        """SIGTERM: take no new jobs, finish, exit; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the worker did not stop on SIGTERM:\n{self.output()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def names(events: list[list[Any]]) -> list[str]:
    return [event[0] for event in events]


def of(events: list[list[Any]], kind: str) -> list[list[Any]]:
    return [event for event in events if event[0] == kind]


def lifecycle_is_celerys(events: list[list[Any]]) -> None:
    """Worker signals in Celery's order around the tasks, each once."""
    order = names(events)
    start = ["celeryd_init", "worker_init", "worker_process_init", "worker_ready"]
    end = ["worker_shutting_down", "worker_process_shutdown", "worker_shutdown"]
    assert [n for n in order if n in start] == start, order
    assert [n for n in order if n in end] == end, order
    tasks = [i for i, n in enumerate(order) if n.startswith("task_")]
    assert order.index("worker_ready") < min(tasks) and max(tasks) < order.index("worker_shutting_down")


def use(app: Celery) -> Celery:
    """Make the project's app current and rebuild its JobBridge from this test's store, on the real clock."""
    from jobbridge.clock import SYSTEM_CLOCK

    app.set_current()
    app.jobbridge_options(clock=SYSTEM_CLOCK)
    return app


def start(tmp_path: Path, spec: str, store: dict[str, str], *args: str, **env: str) -> Worker:
    """A worker for the ``store`` fixture's broker and result backend (more variables in ``env``)."""
    extra = {k: v for k, v in store.items() if k != "CELERY_BROKER_URL"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    return Worker(tmp_path, spec, store["CELERY_BROKER_URL"], *args, env={**extra, **env})
