"""The job classes `jobbridge demo` dispatches: a small shop's background work.

They live in a module of their own, importable by name, because a worker
decodes each stored job by its name and class, never by pickling the object;
a class defined inside a function could not be found again by a worker in
another process. Failures are simulated from the payload (``fail_times``) so
the demo behaves the same on every run.

`Job` already makes each subclass a dataclass; the explicit ``@dataclass`` is
there only so that type checkers see the payload fields in the constructors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from jobbridge.backoff import Backoff
from jobbridge.context import JobContext
from jobbridge.job import Job

#: the demo's retry wait: short and fixed, so the whole demo ends in seconds
RETRY_AFTER = 1.0


class GatewayTimeout(Exception):
    """The simulated payment gateway did not answer in time (a transient error: worth a retry)."""


class CrmRejected(Exception):
    """The simulated CRM refuses the record every time (a permanent error: retries cannot help)."""


@dataclass
class ResizeImage(Job, name="demo.resize-image", queue="default"):
    """A quick job: a few thousand of these make up most of the demo's queue."""

    image_id: int
    width: int = 320

    def handle(self, ctx: JobContext) -> None:
        # a token amount of real work, so the throughput figure is not of empty calls
        hashlib.blake2b(f"{self.image_id}:{self.width}".encode(), digest_size=16).hexdigest()


@dataclass
class ChargeCard(Job, name="demo.charge-card", queue="default", tries=3,
                 backoff=Backoff.fixed(RETRY_AFTER)):
    """Fails its first ``fail_times`` attempts with a gateway timeout, then succeeds: a retry story."""

    order_id: int
    amount: Decimal
    fail_times: int = 1

    def handle(self, ctx: JobContext) -> None:
        if ctx.attempt <= self.fail_times:
            raise GatewayTimeout(f"payment gateway timed out charging order {self.order_id} ({self.amount} EUR)")


@dataclass
class SyncCustomerToCrm(Job, name="demo.sync-customer-to-crm", queue="default", tries=2,
                        backoff=Backoff.fixed(RETRY_AFTER)):
    """Fails on every attempt: after its last try it lands in the failed store."""

    customer_id: int

    def handle(self, ctx: JobContext) -> None:
        raise CrmRejected(f"CRM rejected customer {self.customer_id}: HTTP 422, field 'vat_id' is invalid")

    def failed(self, ctx: JobContext, error: BaseException) -> None:
        ctx.logger.debug("customer %s was not synced after %d attempts", self.customer_id, ctx.attempt)


@dataclass
class BuildDailyReport(Job, name="demo.build-daily-report", queue="default", unique_for=600):
    """A unique job: one pending report per day, so the second dispatch of the same day is dropped."""

    day: date

    def unique_id(self) -> str | None:
        return self.day.isoformat()

    def handle(self, ctx: JobContext) -> None:
        return None


@dataclass
class SendReminder(Job, name="demo.send-reminder", queue="mail"):
    """Dispatched with a delay: it waits in the store, invisible to the worker, until it is due."""

    user_id: int
    text: str

    def handle(self, ctx: JobContext) -> None:
        return None


ALL: tuple[type[Job], ...] = (ResizeImage, ChargeCard, SyncCustomerToCrm, BuildDailyReport, SendReminder)
