"""The failed store of an sqs connection: the SQS queue ``<base>-failed``, one message per failed job.

A message's body is exactly what the job's queue held (the envelope, or the raw
body that never decoded), so SQS's own redrive can move it back; who, when and
why ride as message attributes::

    jb-id, jb-queue, jb-name      String
    jb-attempts, jb-failed-at     Number (failed_at in clock seconds)
    jb-error                      String, the last MAX_ERROR characters; absent when empty
    jb-truncated                  Number, only when the body had to be cut to fit: its length in bytes

A message without them (moved there by an SQS redrive policy) is read from its
body, and one whose attributes are malformed (written by someone else) is read
as far as they go. Every failed job fits: the id and name attributes are cut to
MAX_LABEL characters, and when a body comes near the failed queue's size limit
the error keeps as much of its end as there is room for, then (a body from a
queue that takes more than the failed store) the body keeps its beginning and
``jb-truncated`` says how many bytes it had. SQS has no way to read a queue without receiving from it: listing,
retrying and flushing receive in batches of ten, hiding what they saw for
SCAN_HIDE seconds, and show what they leave behind again at once. A listing
reads at most SCAN_CAP messages (the newest of those come first).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jobbridge.clock import Clock
from jobbridge.drivers.base import FailedFilter
from jobbridge.drivers.sqs_client import (
    QueueUrls,
    attribute,
    attributes_size,
    change_visibility,
    clean,
    counts,
    delete,
    finite,
    max_size,
    number,
    receive,
    send,
    server_ms,
    string,
)
from jobbridge.envelope import Envelope, Reservation
from jobbridge.errors import NoFailedJob, PayloadDecodeError
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef, SendMessageBatchRequestEntryTypeDef

ATTR_ID, ATTR_QUEUE, ATTR_NAME = "jb-id", "jb-queue", "jb-name"
ATTR_ATTEMPTS, ATTR_FAILED_AT, ATTR_ERROR = "jb-attempts", "jb-failed-at", "jb-error"
ATTR_TRUNCATED = "jb-truncated"
#: seconds a scanned message stays hidden if the scan dies before it shows it again
SCAN_HIDE = 30
#: the most messages one listing reads
SCAN_CAP = 1000
#: the most characters of an error kept (the end, where a traceback says what happened)
MAX_ERROR = 32_000
#: the most characters of the id and the name kept in attributes (the body holds them whole)
MAX_LABEL = 512
#: bytes the failed store may add to a job's body: its attributes, with at least the error's last
#: kilobyte (the sqs driver refuses a push whose body leaves less room than this)
FAILED_ROOM = 4 * 1024
#: attempts as SQS can hold them in a Number attribute (38 digits)
MAX_ATTEMPTS = 10**15
REDRIVEN = "moved to the failed store by SQS (a redrive policy on the queue), not by a worker"


class FailedStore:
    """Add, retry, flush, count and list failed jobs on the ``<base>-failed`` queue."""

    def __init__(self, client: SQSClient, queues: QueueUrls, clock: Clock) -> None:
        self.client, self.queues, self.clock = client, queues, clock
        self._max: int | None = None

    def entry(self, reservation: Reservation, error: str) -> SendMessageBatchRequestEntryTypeDef:
        """The failed-store message for a reservation: its stored body, and why as attributes, cut to fit."""
        env = reservation.envelope
        queue = getattr(reservation.receipt, "queue", env.queue)
        attrs: dict[str, Any] = {
            ATTR_ID: string(clean(reservation.id)[:MAX_LABEL] or "-"), ATTR_QUEUE: string(clean(queue)),
            ATTR_NAME: string(clean(env.name)[:MAX_LABEL] or "-"),
            ATTR_ATTEMPTS: number(max(-MAX_ATTEMPTS, min(env.attempts, MAX_ATTEMPTS))),
            ATTR_FAILED_AT: number(self.clock.now()),
        }
        body = clean(_stored(reservation).decode("utf-8", errors="replace")).encode()
        room = self._limit() - attributes_size({**attrs, ATTR_ERROR: string(""), ATTR_TRUNCATED: number(0)})
        if len(body) > room:
            attrs[ATTR_TRUNCATED] = number(len(body))
            body = body[:max(0, room - 1024)]
        text = _tail(clean(error), min(MAX_ERROR * 4, room - len(body)))
        if text:
            attrs[ATTR_ERROR] = string(text)
        return {"Id": "0", "MessageBody": body.decode("utf-8", errors="ignore"), "MessageAttributes": attrs}

    def _limit(self) -> int:
        """The failed queue's MaximumMessageSize, asked once."""
        if self._max is None:
            self._max = max_size(self.client, self.queues.failed_url())
        return self._max

    def add(self, reservation: Reservation, error: str) -> None:
        send(self.client, self.queues.failed_url(), [self.entry(reservation, error)])

    def count(self) -> int:
        return sum(counts(self.client, self.queues.failed_url()))

    def retry(self, id_or_all: str) -> int:
        """Back on its queue, attempts reset; `NoFailedJob` for an id the store does not hold."""
        url = self.queues.failed_url()
        everything = id_or_all == "all"
        retried, left = 0, []
        try:
            for batch in self._scan(url, cap=None):
                chosen = [m for m in batch if everything or job_id(m) == id_or_all]
                left += [m for m in batch if m not in chosen]
                retried += self._requeue(url, chosen)
                if retried and not everything:
                    break
        finally:
            self._show(url, left)
        if not retried and not everything:
            raise NoFailedJob(f"there is no failed job with id {id_or_all}")
        return retried

    def flush(self) -> int:
        """Delete every failed job the queue shows; return how many."""
        url = self.queues.failed_url()
        return sum(delete(self.client, url, [m["ReceiptHandle"] for m in batch])
                   for batch in self._scan(url, cap=None))

    def _requeue(self, url: str, messages: list[MessageTypeDef]) -> int:
        """Send each message's job back to its queue as new, then delete it from the failed store."""
        by_queue: dict[str, list[SendMessageBatchRequestEntryTypeDef]] = {}
        now = self.clock.now()
        for message in messages:
            body = message.get("Body", "")
            queue = attribute(message, ATTR_QUEUE) or _queue_of(body)
            by_queue.setdefault(queue, []).append({"Id": "0", "MessageBody": fresh(body, now)})
        for queue, entries in by_queue.items():
            send(self.client, self.queues.url(queue), entries)
        return delete(self.client, url, [m["ReceiptHandle"] for m in messages]) if messages else 0

    def _scan(self, url: str, cap: int | None) -> Iterator[list[MessageTypeDef]]:
        """Batches received from the failed store, each hidden for SCAN_HIDE seconds, until it runs dry.

        An empty short poll on a queue SQS says is not empty gets one long poll
        (SQS samples its servers on a short poll and may answer empty).
        """
        expected = counts(self.client, url)[0]
        seen, waited = 0, False
        while cap is None or seen < cap:
            want = 10 if cap is None else cap - seen
            batch = receive(self.client, url, want, SCAN_HIDE)
            if not batch and not waited and seen < expected:
                waited = True
                batch = receive(self.client, url, want, SCAN_HIDE, wait=1)
            if not batch:
                return
            seen += len(batch)
            yield batch

    def _show(self, url: str, messages: list[MessageTypeDef]) -> None:
        if messages:
            change_visibility(self.client, url, [m["ReceiptHandle"] for m in messages], 0)

    def list(self, limit: int = 50, where: FailedFilter | None = None) -> list[FailedJob]:
        """The newest ``limit`` that ``where`` matches of the first SCAN_CAP (or ``limit``, if more)
        messages read: SQS has no query, so the filter is applied to each message read."""
        if limit <= 0:
            return []
        where = where or FailedFilter()
        jobs = [job for job in self._read(cap=max(limit, SCAN_CAP)) if where.matches(job)]
        return sorted(jobs, key=lambda job: job.failed_at, reverse=True)[:limit]

    def get(self, job_id: str) -> FailedJob | None:
        """The failed job by id, looked for a batch at a time among the messages the failed store shows."""
        url = self.queues.failed_url()
        seen: builtins.list[MessageTypeDef] = []
        try:
            for batch in self._scan(url, cap=None):
                seen += batch
                found = next((job for job in map(failed_job, batch) if job.id == job_id), None)
                if found is not None:
                    return found
        finally:
            self._show(url, seen)
        return None

    def _read(self, cap: int | None) -> builtins.list[FailedJob]:
        """Every message the scan reads (at most ``cap``), shown again at once afterwards."""
        url = self.queues.failed_url()
        seen: dict[str, MessageTypeDef] = {}
        try:
            for batch in self._scan(url, cap=cap):
                seen.update((m.get("MessageId", m["ReceiptHandle"]), m) for m in batch)
        finally:
            self._show(url, list(seen.values()))
        return [failed_job(m) for m in seen.values()]


def _stored(reservation: Reservation) -> bytes:
    """The body to keep: the raw one when it never decoded, else the envelope (its own encoding if it can)."""
    try:
        return reservation.stored_body()
    except (TypeError, ValueError):  # an envelope that cannot be encoded again (a count past 64 bits)
        return reservation.body


def _tail(text: str, room: int) -> str:
    """The end of ``text`` in at most MAX_ERROR characters and ``room`` UTF-8 bytes, marked when cut."""
    if len(text) > MAX_ERROR:
        text = "\u2026" + text[-MAX_ERROR:]
    data = text.encode()
    if len(data) <= room:
        return text
    if room < 16:
        return ""
    return "\u2026" + data[-(room - 3):].decode("utf-8", errors="ignore")


def _decoded(body: str) -> Envelope | None:
    try:
        return Envelope.decode(body)
    except PayloadDecodeError:
        return None


def _queue_of(body: str) -> str:
    env = _decoded(body)
    return env.queue if env is not None else "default"


def fresh(body: str, now: float) -> str:
    """A failed job's body as a new job: attempts 0, available now, no unique lock to hold.

    A body that never decoded goes back as it was, to be failed again with its reason.
    """
    env = _decoded(body)
    if env is None:
        return body
    return env.replace(attempts=0, available_at=now, unique_key=None).encode().decode()


def job_id(message: MessageTypeDef) -> str:
    found = attribute(message, ATTR_ID)
    if found is not None:
        return found
    env = _decoded(message.get("Body", ""))
    return env.id if env is not None else message.get("MessageId", "")


def failed_job(message: MessageTypeDef) -> FailedJob:
    """A failed-store message as a `FailedJob`; one SQS moved there by itself is read from its body."""
    body = message.get("Body", "")
    env = _decoded(body)
    attempts, failed_at = finite(attribute(message, ATTR_ATTEMPTS)), finite(attribute(message, ATTR_FAILED_AT))
    sent_at = (server_ms(message, "SentTimestamp") or 0.0) / 1000
    if attempts is None or abs(attempts) > MAX_ATTEMPTS:
        attempts = env.attempts if env else 0
    return FailedJob(
        id=job_id(message),
        queue=attribute(message, ATTR_QUEUE) or (env.queue if env else "default"),
        name=attribute(message, ATTR_NAME) or (env.name if env else "<undecodable>"),
        attempts=int(attempts),
        error=attribute(message, ATTR_ERROR) or ("" if attribute(message, ATTR_ID) else REDRIVEN),
        failed_at=failed_at if failed_at is not None else sent_at,
        body=body.encode(),
    )
