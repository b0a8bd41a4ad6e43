"""The sqs driver: the reservation protocol on Amazon SQS (or an SQS-compatible server), through boto3.

URL: ``queue_url`` is the whole URL of a standard (not FIFO) queue,
``https://sqs.<region>.amazonaws.com/<account>/<name>``, or ``sqs://<account>/<name>``
for the same queue at ``endpoint`` (else at AWS in ``region``).

Storage: one SQS queue per jobbridge queue, all beside the connection's queue::

    <name>            the jobbridge queue "default" (the queue_url itself)
    <name>-<queue>    every other jobbridge queue ("high" is <name>-high); the name "failed" is taken
    <name>-failed     the failed store: the stored body, with id, queue, name, attempts, error and
                      failed_at as message attributes (see jobbridge.drivers.sqs_failed)

A message's body is the encoded envelope; its ``attempts`` are the attempts
started before the message was sent, and a reservation's are that plus SQS's
``ApproximateReceiveCount``. A release re-sends the envelope carrying the
attempt it is on. The visibility timeout is the reservation, measured by the
server's clock: a message whose visibility lapses is visible again by itself,
so ``reclaim_expired`` has nothing to do, and no worker compares its own clock
with another's. A delay longer than SQS's 15 minutes is sent with the longest
delay and a ``jb-wait`` attribute (the seconds to wait from the send), and
re-sent on each receipt until that wait, measured on SQS's clock (the
message's SentTimestamp to its ApproximateFirstReceiveTimestamp), has passed.
A message that cannot become a job (its body, or a ``jb-wait`` that is not a
number) is handed out with its reason, to be failed. An encoded envelope may
be at most `MAX_BODY` bytes. The driver creates no queues: one that does not
exist is an error naming it, at first use.

SQS has no lock: ``driver.locks`` grants every lock and says it is not shared
(``locks.shared`` is false), so the app dispatches unique jobs with a warning.

Settings: `jobbridge.drivers.sqs_settings` declares them (``SCHEMA``: each key's
type, bounds and default, and the keys refused with what to write instead).
docs/sqs.md is the manual.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.granted_locks import GrantedLocks
from jobbridge.drivers.sqs_client import (
    MAX_MESSAGE_BYTES,
    QueueUrls,
    attribute,
    change_visibility,
    connect,
    counts,
    delete,
    finite,
    has_attribute,
    is_stale,
    number,
    receive,
    receive_count,
    send,
    server_ms,
    translated,
)
from jobbridge.drivers.sqs_failed import FAILED_ROOM, FailedStore
from jobbridge.drivers.sqs_settings import MAX_VISIBILITY, REFUSED, SETTINGS, SqsSettings, parse_settings
from jobbridge.envelope import Envelope, Reservation, reservation_from_body, undecodable
from jobbridge.errors import DriverError, PayloadDecodeError, PayloadTooLarge
from jobbridge.store_reports import QueueCounts

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef, SendMessageBatchRequestEntryTypeDef

    from jobbridge.drivers import Resources

__all__ = ["CAPABILITIES", "REFUSED", "SETTINGS", "SqsDriver", "SqsSettings", "open"]

#: SQS's longest DelaySeconds
MAX_DELAY = 900
#: seconds a message received by a purge stays hidden if the purge dies before deleting it
PURGE_HIDE = 30
#: the attribute of a message sent early because its delay was longer than MAX_DELAY: seconds to wait
#: from its send, on SQS's clock
WAIT = "jb-wait"
#: the attribute older versions wrote instead (a due time on the sender's clock), still honoured
DUE = "jb-due"
#: the longest encoded envelope a push takes: what every SQS queue holds, less what the failed store
#: adds to a message when the job fails (its attributes), so that every job that fits can be failed
MAX_BODY = MAX_MESSAGE_BYTES - FAILED_ROOM

CAPABILITIES = Capabilities(
    is_deferred=True,
    survives_a_restart=True,
    needs_a_worker=True,
    may_lose_an_accepted_job=False,
    delayed_push=True,  # natively up to 15 minutes; longer by re-sending (jb-due)
    per_message_release=True,
    priorities=True,  # by the order of the queues a worker names
    transactional_push=False,
    blocking_reserve=True,  # long polling (off when wait_time = 0)
    max_message_bytes=MAX_BODY,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Receipt:
    """Where a reserved message lives and the handle SQS gave this receipt of it."""

    queue: str
    url: str
    handle: str


class SqsDriver:
    """One SQS queue per jobbridge queue; the visibility timeout is the reservation."""

    capabilities = CAPABILITIES

    def __init__(self, settings: SqsSettings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self.reservation = float(settings.visibility_timeout)
        #: the longest DelaySeconds sent; longer delays are re-sent until due (tests lower it)
        self.max_delay = MAX_DELAY
        self.client = connect(settings)
        self.queues = QueueUrls(self.client, settings)
        self.failed = FailedStore(self.client, self.queues, clock)
        # SQS has no lock: every lock is granted, and not shared, so the app warns at a unique dispatch
        self.locks = GrantedLocks(shared=False)
        if settings.wait_time == 0:
            self.capabilities = dataclasses.replace(CAPABILITIES, blocking_reserve=False)

    # -- push and reserve -------------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        """SendMessageBatch per queue; a body longer than `MAX_BODY` fails the push before anything is sent."""
        if transaction is not None:
            raise TypeError("the sqs driver cannot join a transaction; the app pushes after the commit")
        now = self.clock.now()
        by_queue: dict[str, list[SendMessageBatchRequestEntryTypeDef]] = {}
        for env in envelopes:
            body = env.encode()
            if len(body) > MAX_BODY:
                raise PayloadTooLarge(
                    f"job {env.id} ({env.name}) is {len(body)} bytes encoded, and an sqs connection takes at most "
                    f"{MAX_BODY} (SQS's 256 KiB, less what the failed store adds): keep large data elsewhere "
                    "(a database, object storage) and pass its key in the payload")
            by_queue.setdefault(env.queue, []).append(self._entry(body.decode(), env.available_at - now))
        for queue, entries in by_queue.items():
            send(self.client, self.queues.url(queue), entries)

    def _entry(self, body: str, wait: float) -> SendMessageBatchRequestEntryTypeDef:
        """A message available in ``wait`` seconds: delayed natively up to ``max_delay``, marked ``jb-wait`` beyond."""
        delay = max(0, math.ceil(wait - 1e-6))
        entry: SendMessageBatchRequestEntryTypeDef = {
            "Id": "0", "MessageBody": body, "DelaySeconds": min(delay, self.max_delay)}
        if delay > self.max_delay:
            entry["MessageAttributes"] = {WAIT: number(float(wait))}
        return entry

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        """Short polls in priority order; when all are empty and ``wait`` > 0, one long poll per queue.

        SQS long-polls one queue per call, so each queue gets its share of ``wait``
        (whole seconds, at least one, at most ``wait_time``) in priority order.
        """
        names = list(dict.fromkeys(queues))
        if limit <= 0 or not names:
            return []
        got = self._reserve_now(names, limit)
        if got or wait <= 0 or self.settings.wait_time == 0:
            return got
        share = min(self.settings.wait_time, max(1, int(wait / len(names))))
        for queue in names:
            got = self._receive(queue, limit, poll=share)
            if got:
                return got
        return []

    def _reserve_now(self, queues: list[str], limit: int) -> list[Reservation]:
        """One short poll after another, in priority order, until ``limit`` are reserved or all are empty."""
        got: list[Reservation] = []
        for queue in queues:
            got += self._receive(queue, limit - len(got), poll=0)
            if len(got) >= limit:
                break
        return got

    def _receive(self, queue: str, want: int, poll: int) -> list[Reservation]:
        """Receive from one queue until ``want`` are claimed or it answers empty."""
        url = self.queues.url(queue)
        out: list[Reservation] = []
        while len(out) < want:
            now = self.clock.now()  # before the receive: the lease is never later than the server's
            messages = receive(self.client, url, want - len(out), self.settings.visibility_timeout, poll)
            if not messages:
                break
            poll = 0
            for message in messages:
                claimed = self._claimed(queue, url, message, now)
                if claimed is not None:
                    out.append(claimed)
        return out

    def _claimed(self, queue: str, url: str, message: MessageTypeDef, now: float) -> Reservation | None:
        """A received message as a reservation, or None when it was re-sent because it is not yet due."""
        body = message.get("Body", "")
        receipt = Receipt(queue, url, message["ReceiptHandle"])
        lease_until = now + self.reservation
        count = receive_count(message)
        stand_in_id = message.get("MessageId", receipt.handle)
        try:
            left = self._left(message, now)
        except PayloadDecodeError as exc:
            stand_in = undecodable(id=stand_in_id, queue=queue, attempts=count, now=now)
            return Reservation(stand_in, receipt, lease_until, body=body.encode(), decode_error=str(exc))
        if left > 0:
            send(self.client, url, [self._entry(body, left)])
            delete(self.client, url, [message["ReceiptHandle"]])
            return None
        return reservation_from_body(body, receipt=receipt, lease_until=lease_until, now=now, id_hint=stand_in_id,
                                     queue_hint=queue, attempts_added=count)

    def _left(self, message: MessageTypeDef, now: float) -> float:
        """Seconds this message must still wait (0 or less: it is due), judged by SQS's clock.

        ``jb-wait`` counts from the send; SQS stamps both the send and the first
        receipt, so no worker's clock takes part. A message an older version sent
        carries ``jb-due`` instead, a time on the sender's clock.
        """
        for name in (WAIT, DUE):
            if has_attribute(message, name) and finite(attribute(message, name)) is None:
                raise PayloadDecodeError(f"the message attribute {name} is not a finite number of seconds")
        wait, due = finite(attribute(message, WAIT)), finite(attribute(message, DUE))
        if wait is not None:
            sent, seen = server_ms(message, "SentTimestamp"), server_ms(message, "ApproximateFirstReceiveTimestamp")
            waited = (seen - sent) / 1000 if sent is not None and seen is not None else float(self.max_delay)
            return wait - waited
        return due - now if due is not None else 0.0

    # -- settle -----------------------------------------------------------------------------

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        """DeleteMessageBatch per queue; a stale receipt (the message was received again) deletes nothing."""
        for url, handles in _by_url(reservations).items():
            delete(self.client, url, handles)

    def release(self, reservation: Reservation, delay: float) -> None:
        """Re-send the envelope (attempts so far, available after ``delay``), then delete the received one."""
        self._send_again(reservation, delay, reservation.envelope.attempts)

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """As `release`, with the attempts before this receive: the job never started."""
        self._send_again(reservation, delay, max(0, reservation.envelope.attempts - 1))

    def _send_again(self, reservation: Reservation, delay: float, attempts: int) -> None:
        if not self._still_held(reservation):
            return
        receipt: Receipt = reservation.receipt
        now = self.clock.now()
        if reservation.decode_error is not None:
            body = reservation.body.decode("utf-8", errors="replace")
        else:
            env = reservation.envelope.replace(available_at=now + max(0.0, delay), attempts=attempts)
            body = env.encode().decode()
        send(self.client, receipt.url, [self._entry(body, delay)])
        delete(self.client, receipt.url, [receipt.handle])

    def fail(self, reservation: Reservation, error: str) -> None:
        """Send the stored body to ``<name>-failed`` with why, then delete the received one."""
        if not self._still_held(reservation):
            return
        self.failed.add(reservation, error)
        delete(self.client, reservation.receipt.url, [reservation.receipt.handle])

    def _still_held(self, reservation: Reservation) -> bool:
        """Whether this receipt still holds the message: a stale one settles nothing (the new holder will)."""
        receipt: Receipt = reservation.receipt
        try:
            with translated(f"ChangeMessageVisibility on {receipt.url}"):
                self.client.change_message_visibility(
                    QueueUrl=receipt.url, ReceiptHandle=receipt.handle,
                    VisibilityTimeout=self.settings.visibility_timeout)
        except DriverError as exc:
            if is_stale(exc):
                return False
            raise
        return True

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        """ChangeMessageVisibilityBatch to ``seconds``; a receipt SQS refuses (stale, or past 12 h) is dropped."""
        visibility = min(MAX_VISIBILITY, max(1, math.ceil(seconds)))
        now = self.clock.now()
        kept: set[str] = set()
        for url, handles in _by_url(reservations).items():
            kept |= change_visibility(self.client, url, handles, visibility)
        return [dataclasses.replace(res, lease_until=now + seconds) for res in reservations
                if res.receipt.handle in kept]

    def reclaim_expired(self) -> int:
        """Nothing to do: SQS makes a message visible again by itself when its visibility lapses."""
        return 0

    # -- counts -------------------------------------------------------------------------------

    def counts(self) -> list[QueueCounts]:
        """Every jobbridge queue of this connection that exists (SQS's approximate numbers)."""
        listed = self.queues.listed()
        return [QueueCounts(queue, *counts(self.client, listed[queue])) for queue in sorted(listed)]

    def purge(self, queues: Sequence[str]) -> int:
        """Receive and delete what each queue shows now: its jobs available to a worker.

        SQS shows a message to one receiver at a time, so a message a worker holds is
        never received here and never deleted (PurgeQueue would delete it too). A
        delayed message (a delayed dispatch, or a release waiting out its backoff) is
        not shown either: it stays, to be purged once due. Each received message is
        hidden for `PURGE_HIDE` seconds, so one a failed purge leaves comes back.
        """
        total = 0
        for queue in dict.fromkeys(queues):
            url = self.queues.url(queue)
            waited = False
            while True:
                batch = receive(self.client, url, 10, PURGE_HIDE)
                if not batch and not waited and counts(self.client, url)[0]:
                    waited = True  # a short poll samples SQS's servers and may answer empty
                    batch = receive(self.client, url, 10, PURGE_HIDE, wait=1)
                if not batch:
                    break
                total += delete(self.client, url, [m["ReceiptHandle"] for m in batch])
        return total

    # -- lifecycle ------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Create nothing; check that the default queue and the failed store exist, naming what is missing."""
        counts(self.client, self.queues.url("default"))
        self.failed.count()

    def check(self) -> None:
        """Nothing to check: the queues are checked when first used (`migrate` names a missing one)."""

    def describe(self) -> str:
        where = f", via {self.settings.endpoint}" if self.settings.endpoint else ""
        return f"sqs {self.settings.queue_url} ({self.settings.region}{where})"

    def close(self) -> None:
        self.client.close()


def _by_url(reservations: Sequence[Reservation]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for res in reservations:
        receipt: Receipt = res.receipt
        grouped.setdefault(receipt.url, []).append(receipt.handle)
    return grouped


def open(settings: Mapping[str, Any], resources: Resources) -> SqsDriver:
    """Build an sqs driver from a connection's options (a refused or unknown key fails here)."""
    return SqsDriver(parse_settings(settings), clock=resources.clock)
