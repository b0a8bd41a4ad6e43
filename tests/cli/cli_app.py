"""The app the CLI tests run with ``-A tests.cli.cli_app:make``: jobs on several queues, one with a pydantic payload.

Registered in this order, so a worker without ``-Q`` works default, mail,
reports, orders: the default queue first, then each job's queue as first named.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pydantic

from jobbridge import Job, JobBridge, JobContext
from jobbridge.settings import Settings


class Address(pydantic.BaseModel):
    street: str
    zip_code: int


class Order(pydantic.BaseModel):
    id: int
    placed_at: datetime
    total: Decimal
    ship_to: Address
    tags: list[str] = []

    @pydantic.field_validator("id")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"order id {value} is not positive")
        return value


class Noop(Job, name="cli.noop"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


class SendMail(Job, name="cli.mail", queue="mail"):
    to: str = ""

    def handle(self, ctx: JobContext) -> None:
        pass


class Report(Job, name="cli.report", queue="reports"):
    def handle(self, ctx: JobContext) -> None:
        pass


class Boom(Job, name="cli.boom", tries=1):
    invoice: int = 0

    def handle(self, ctx: JobContext) -> None:
        raise ValueError("no such invoice")


class Ship(Job, name="cli.ship", queue="orders"):
    order: Order

    def handle(self, ctx: JobContext) -> None:
        """Write what the worker decoded, with the Python types it came back as, to $CLI_TEST_OUT."""
        seen = {"model": type(self.order).__name__, "placed_at": type(self.order.placed_at).__name__,
                "total": type(self.order.total).__name__, "zip_code": type(self.order.ship_to.zip_code).__name__,
                "dump": self.order.model_dump(mode="json")}
        Path(os.environ["CLI_TEST_OUT"]).write_text(json.dumps(seen))


JOBS = [Noop, SendMail, Report, Boom, Ship]


def make() -> JobBridge:
    """The app for ``-A``: settings from the environment, read per call."""
    return JobBridge(Settings.load(), jobs=JOBS)


def bridge_for(url: str) -> JobBridge:
    """The same app in a test's own process, on a store URL."""
    return JobBridge(Settings.from_mapping({"database_url": url}), jobs=JOBS)
