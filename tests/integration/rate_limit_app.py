"""The app `jobbridge worker -A tests.integration.rate_limit_app:make_bridge` runs in the rate-limit process tests.

Each job appends ``<tag> <job id> <attempt> <pid> <wall-clock start>`` to the file named by
``JB_TEST_RESULTS`` when it starts; the store comes from the environment.
"""

from __future__ import annotations

import os
import time

from jobbridge import Job, JobBridge, JobContext, RateLimit
from jobbridge.settings import Settings

RESULTS_VARIABLE = "JB_TEST_RESULTS"
RATE = 5  # per second


def record(tag: str, ctx: JobContext) -> None:
    line = f"{tag} {ctx.id} {ctx.attempt} {os.getpid()} {time.time():.6f}\n".encode()
    fd = os.open(os.environ[RESULTS_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Limited(Job, name="rl.limited", rate_limit=f"{RATE}/s"):
    n: int

    def handle(self, ctx: JobContext) -> None:
        record("limited", ctx)


class Shared(Job, name="rl.shared", rate_limit=RateLimit(f"{RATE}/s", shared=True)):
    n: int

    def handle(self, ctx: JobContext) -> None:
        record("shared", ctx)


class Free(Job, name="rl.free"):
    n: int

    def handle(self, ctx: JobContext) -> None:
        record("free", ctx)


ALL = (Limited, Shared, Free)


def make_bridge() -> JobBridge:
    return JobBridge(Settings.from_env(), jobs=ALL)
