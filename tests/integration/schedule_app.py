"""The app the schedule process tests run: ``jobbridge worker -A tests.integration.schedule_app:make_bridge``.

Settings come from each process's environment (``JOBBRIDGE_*``). One entry,
``beat``, fires every 2 seconds; each run of its job appends a line
``<tick> <job id> <pid>`` to the file ``JB_SCHED_RUNS`` names (one ``O_APPEND``
write, so lines from many processes never interleave).
"""

from __future__ import annotations

import os

from jobbridge import Job, JobBridge, JobContext
from jobbridge.scheduling.entries import TICK_HEADER
from jobbridge.settings import Settings

RUNS_VARIABLE = "JB_SCHED_RUNS"
EVERY = 2


class Beat(Job, name="schedules.beat", tries=25):
    """Records that it ran, and for which tick."""

    def handle(self, ctx: JobContext) -> None:
        line = f"{float(ctx.headers[TICK_HEADER])!r} {ctx.id} {os.getpid()}\n".encode()
        fd = os.open(os.environ[RUNS_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def make_bridge() -> JobBridge:
    bridge = JobBridge(Settings.from_env(), jobs=[Beat])
    bridge.schedule("beat", Beat(), every=EVERY)
    return bridge
