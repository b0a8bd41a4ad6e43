"""Job classes the unit tests dispatch and run."""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from jobbridge import Backoff, FailJob, Job, JobContext, ReleaseJob, job

RAN: list[tuple[str, object]] = []


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Address:
    street: str
    zip: str | None = None


class Rich(Job, name="tests.rich"):
    when: datetime
    day: date
    ref: uuid.UUID
    amount: Decimal
    colour: Colour
    address: Address
    tags: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    maybe: int | None = None

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("rich", self))


@job("tests.notify", queue="mail", tries=5, timeout=60)
class Notify:
    post_id: int

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("notify", (self.post_id, ctx.attempt, ctx.queue)))


class Flaky(Job, name="tests.flaky", tries=3, backoff=Backoff.fixed(10)):
    fail_times: int

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("flaky", ctx.attempt))
        if ctx.attempt <= self.fail_times:
            raise ConnectionError(f"attempt {ctx.attempt} failed")

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        RAN.append(("flaky.failed", str(error)))


class Named(Job, name="tests.named"):
    name: str
    queue: str
    timeout: int

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("named", (self.name, self.queue, self.timeout)))


class Unique(Job, name="tests.unique", unique_for=600):
    invoice_id: int

    def unique_id(self) -> str | None:
        return str(self.invoice_id)

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("unique", self.invoice_id))


class AsyncJob(Job, name="tests.async", timeout=0.5, tries=1):
    sleep: float

    async def handle(self, ctx: JobContext) -> None:
        await asyncio.sleep(self.sleep)
        RAN.append(("async", self.sleep))


class Spin(Job, name="tests.spin", timeout=0.3, tries=2, backoff=Backoff.fixed(0)):
    def handle(self, ctx: JobContext) -> None:
        RAN.append(("spin", ctx.attempt))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # pure Python: the watchdog can interrupt it
            pass


class Control(Job, name="tests.control", tries=2):
    action: str

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("control", ctx.attempt))
        if self.action == "release":
            raise ReleaseJob(delay=42)
        if self.action == "fail":
            raise FailJob("no point retrying")


@job("tests.padded", queue="mail")
class Padded:
    """A payload as large as its text: for the drivers' size limits."""

    post_id: int
    text: str = ""

    def handle(self, ctx: JobContext) -> None:
        RAN.append(("padded", self.post_id))


class Later(Job, name="tests.later", tries=5):
    """Asks to run again after ``delay`` seconds, whatever it is."""

    delay: float

    def handle(self, ctx: JobContext) -> None:
        raise ReleaseJob(delay=self.delay)
