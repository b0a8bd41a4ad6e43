"""The app that `jobbridge worker -A tests.integration.app_jobs:make_bridge` runs in the process tests.

Settings come from the environment of each process (``JOBBRIDGE_DATABASE_URL``,
``JOBBRIDGE_RESERVATION``). Jobs record what they do as one line each, appended
with ``O_APPEND`` to the file named by ``JB_TEST_RESULTS``:
``<event> <job id> <tag> <attempt> <pid>``.
"""

from __future__ import annotations

import os
import time

from jobbridge import Backoff, Job, JobBridge, JobContext
from jobbridge.settings import Settings

RESULTS_VARIABLE = "JB_TEST_RESULTS"


def record(event: str, ctx: JobContext, tag: object) -> None:
    line = f"{event} {ctx.id} {tag} {ctx.attempt} {os.getpid()}\n".encode()
    fd = os.open(os.environ[RESULTS_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Record(Job, name="it.record"):
    n: int

    def handle(self, ctx: JobContext) -> None:
        record("ran", ctx, self.n)


class Slow(Job, name="it.slow", timeout=120):
    tag: str
    seconds: float

    def handle(self, ctx: JobContext) -> None:
        record("start", ctx, self.tag)
        time.sleep(self.seconds)
        record("done", ctx, self.tag)


class Spin(Job, name="it.spin", timeout=1, tries=2, backoff=Backoff.fixed(0)):
    def handle(self, ctx: JobContext) -> None:
        record("start", ctx, "spin")
        while True:  # pure Python: the watchdog's exception stops it
            pass


class StuckOnce(Job, name="it.stuck-once", timeout=1, tries=3):
    """Blocked in C past its timeout on the first attempt; quick on the next."""

    def handle(self, ctx: JobContext) -> None:
        record("start", ctx, "stuck")
        if ctx.attempt == 1:
            time.sleep(3600)
        record("done", ctx, "stuck")


ALL = [Record, Slow, Spin, StuckOnce]


def make_bridge() -> JobBridge:
    bridge = JobBridge(Settings.load(), jobs=ALL)
    bridge.executor().watchdog.grace = 0.5  # report a stuck attempt half a second after its timeout
    return bridge
