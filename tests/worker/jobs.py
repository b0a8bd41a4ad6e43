"""Job classes the worker tests run; they record what happened in `RAN`."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid

from jobbridge import AcknowledgeJob, Backoff, Job, JobContext

RAN: list[tuple[str, object]] = []
#: set by the test to let `Block` jobs finish
GO = threading.Event()
#: set by a `Block` job once it is running
STARTED = threading.Event()
BARRIER = threading.Barrier(4)


def reset() -> None:
    RAN.clear()
    GO.clear()
    STARTED.clear()
    BARRIER.reset()


class Noop(Job, name="worker.noop"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("noop", self.n))


class OnQueue(Job, name="worker.on-queue"):
    tag: str

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("on-queue", self.tag))


class Fails(Job, name="worker.fails", tries=3, backoff=Backoff.fixed(30)):
    def handle(self, ctx: JobContext) -> None:
        RAN.append(("fails", ctx.attempt))
        raise ConnectionError(f"attempt {ctx.attempt} failed")

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        RAN.append(("fails.failed", str(error)))


class Spin(Job, name="worker.spin", timeout=0.3, tries=2):
    def handle(self, ctx: JobContext) -> None:
        RAN.append(("spin", ctx.attempt))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # pure Python: the watchdog's exception reaches it
            pass


class Stuck(Job, name="worker.stuck", timeout=0.2, tries=2):
    def handle(self, ctx: JobContext) -> None:
        RAN.append(("stuck", ctx.attempt))
        time.sleep(8)  # blocked in C: the watchdog's exception waits until the sleep ends


class Block(Job, name="worker.block", timeout=120):
    def handle(self, ctx: JobContext) -> None:
        RAN.append(("block", ctx.attempt))
        STARTED.set()
        if not GO.wait(60):
            raise RuntimeError("the test never let this job finish")
        RAN.append(("block.done", ctx.attempt))


class Together(Job, name="worker.together"):
    def handle(self, ctx: JobContext) -> None:
        BARRIER.wait(30)  # four of these only pass if four run at once
        RAN.append(("together", ctx.id))


class Async(Job, name="worker.async"):
    n: int

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(0)
        RAN.append(("async", self.n))


class Signals(Job, name="worker.signals", timeout=120):
    """Sends SIGTERM (and with ``twice`` SIGINT) to this process while it runs."""

    twice: bool = False

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("signals", ctx.attempt))
        os.kill(os.getpid(), signal.SIGTERM)
        if self.twice:
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)
            GO.wait(60)
        else:
            time.sleep(0.2)  # the worker has been told to stop while this still runs
        RAN.append(("signals.done", ctx.attempt))


class Keyed(Job, name="worker.keyed"):
    """A payload with a UUID field: a stored integer there once raised AttributeError, not a decode error."""

    ref: uuid.UUID

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("keyed", str(self.ref)))


class Ignored(Job, name="worker.ignored"):
    """Ends itself as done without succeeding (the facade's ``Ignore``)."""

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("ignored", ctx.attempt))
        raise AcknowledgeJob("nothing to do")


ALL = [Noop, OnQueue, Fails, Spin, Stuck, Block, Together, Async, Signals, Keyed, Ignored]
