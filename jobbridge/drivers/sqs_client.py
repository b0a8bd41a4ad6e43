"""The boto3 client an sqs driver talks through, its batched calls, and the wall that keeps botocore out.

Every call goes through `translated()`, so the worker sees `DriverUnavailable`
(unreachable, timed out, throttled, the service down), `StoreRefused` (SQS
refused the data itself: too long, characters it cannot hold; sending it again
cannot help) or `DriverError`, never a botocore exception, with the client's
error chained as ``__cause__``. Retries are botocore's own ("standard" mode),
never hand-written here.

Nothing waits forever: each client is made with the connection's
``connect_timeout`` and ``read_timeout`` and ``max_attempts`` tries a call
(`jobbridge.drivers.sqs_settings`). A long-polling receive legitimately waits
up to ``wait_time`` for a message, so it goes through a second client of the
connection's, whose read timeout is that wait plus ``read_timeout``, instead
of loosening the bound of every other call.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, HTTPClientError, ReadTimeoutError
from botocore.exceptions import ConnectionError as BotoConnectionError

from jobbridge.drivers.sqs_settings import QUEUE_NAME, SqsSettings
from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused
from jobbridge.redaction import mask_url

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef, SendMessageBatchRequestEntryTypeDef

#: SQS's batch limits: ten entries, and (for sends) 256 KiB of bodies and attributes per call
MAX_BATCH = 10
MAX_BATCH_BYTES = 256 * 1024
#: the longest message (body and attributes) every SQS queue takes; a queue may be set to take more
MAX_MESSAGE_BYTES = 256 * 1024
#: the failed store's queue is ``<base>-failed``, so no jobbridge queue may be called that
FAILED_SUFFIX = "failed"
#: receipt handles that no longer hold the message: its visibility lapsed and it was received again
STALE = frozenset({"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue",
                   "AWS.SimpleQueueService.MessageNotInflight"})
_MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_BUSY = frozenset({"Throttling", "ThrottlingException", "RequestThrottled", "ServiceUnavailable",
                   "InternalError", "InternalFailure", "KmsThrottled"})
#: SQS refused the data itself (too long, characters or attributes it cannot hold): never transient
_REFUSED_DATA = frozenset({"InvalidMessageContents", "MessageTooLong", "BatchRequestTooLong",
                           "AWS.SimpleQueueService.BatchRequestTooLong", "InvalidParameterValue",
                           "InvalidAttributeValue", "InvalidAttributeName", "InvalidBatchEntryId"})
# the characters an SQS body or string attribute may hold; anything else is replaced
_NOT_ALLOWED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_RECEIVE_ATTRIBUTES: Any = ["ApproximateReceiveCount", "SentTimestamp", "ApproximateFirstReceiveTimestamp"]


#: each client's companion for long-polling receives (`connect`): dropped, and its connections closed, with
#: the client it serves
_LONG_POLLING: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def connect(settings: SqsSettings) -> SQSClient:
    """A client for the connection's region and endpoint, bounded as the settings say, with botocore's retries.

    Its companion for long polls (read timeout: ``wait_time`` more) is made with it,
    and `receive` uses it whenever it waits.
    """
    client = _client(settings, settings.read_timeout)
    _LONG_POLLING[client] = _client(settings, settings.read_timeout + settings.wait_time) \
        if settings.wait_time else client
    return client


def _client(settings: SqsSettings, read_timeout: float) -> SQSClient:
    config = Config(retries={"mode": "standard", "total_max_attempts": settings.max_attempts},
                    connect_timeout=settings.connect_timeout, read_timeout=read_timeout, max_pool_connections=32)
    with translated("creating the SQS client"):
        return boto3.session.Session().client(
            "sqs", region_name=settings.region, endpoint_url=settings.endpoint,
            aws_access_key_id=settings.key, aws_secret_access_key=settings.secret, config=config)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_stale(exc: DriverError) -> bool:
    """Whether SQS refused a call because its receipt handle no longer holds the message."""
    cause = exc.__cause__
    return isinstance(cause, ClientError) and error_code(cause) in STALE


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn botocore's exceptions into jobbridge's, naming what was being done."""
    try:
        yield
    except (ConnectTimeoutError, ReadTimeoutError) as exc:
        raise DriverUnavailable(unanswered(what, exc)) from exc
    except (BotoConnectionError, HTTPClientError) as exc:
        raise DriverUnavailable(f"SQS is unreachable ({what}): {mask_url(str(exc))}") from exc
    except ClientError as exc:
        code = error_code(exc)
        if code in _BUSY:
            raise DriverUnavailable(f"SQS is busy ({what}): {exc}") from exc
        if code in _MISSING:
            raise DriverError(f"{what}: the SQS queue does not exist; jobbridge does not create queues, "
                              "create it first") from exc
        if code in _REFUSED_DATA:
            raise StoreRefused(f"SQS refused {what}: {exc}") from exc
        raise DriverError(f"SQS refused {what}: {exc}") from exc
    except BotoCoreError as exc:
        raise DriverError(f"SQS client failed ({what}): {exc}") from exc


def unanswered(what: str, exc: Exception) -> str:
    """What a timed-out call says: which endpoint, and the settings that bounded the wait."""
    if isinstance(exc, ConnectTimeoutError):
        bound, key = "connect_timeout", "JOBBRIDGE_SQS_CONNECT_TIMEOUT"
    else:
        bound, key = "read_timeout", "JOBBRIDGE_SQS_READ_TIMEOUT"
    return (f"SQS did not answer ({what}) within {bound}, in any of max_attempts tries: {mask_url(str(exc))}; "
            f"if the endpoint is only slow, raise {bound} ({key}) or max_attempts (JOBBRIDGE_SQS_MAX_ATTEMPTS); "
            "if it should answer at once, check that the endpoint is an SQS server")


def clean(text: str) -> str:
    """``text`` with the characters SQS refuses in a body or attribute replaced by U+FFFD."""
    return _NOT_ALLOWED.sub("\ufffd", text)


def string(value: str) -> Any:
    return {"DataType": "String", "StringValue": value}


def number(value: float) -> Any:
    return {"DataType": "Number", "StringValue": repr(value) if isinstance(value, float) else str(value)}


def attribute(message: MessageTypeDef, name: str) -> str | None:
    """A message attribute's string value, if the message carries it."""
    value = message.get("MessageAttributes", {}).get(name)
    return value.get("StringValue") if value is not None else None


def has_attribute(message: MessageTypeDef, name: str) -> bool:
    """Whether the message carries the attribute at all (of any type, a binary one included)."""
    return name in message.get("MessageAttributes", {})


def finite(text: str | None) -> float | None:
    """``text`` as a finite number, or None: attributes come from any producer, not only this driver."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def receive_count(message: MessageTypeDef) -> int:
    """SQS's ApproximateReceiveCount (1 when a server leaves it out or sends something else)."""
    count = finite(message.get("Attributes", {}).get("ApproximateReceiveCount"))
    return int(count) if count is not None and 1 <= count < 2**31 else 1


def server_ms(message: MessageTypeDef, name: str) -> float | None:
    """A system attribute that is a time on SQS's clock (epoch milliseconds), if the server sent it."""
    return finite(message.get("Attributes", {}).get(name))  # type: ignore[call-overload]


def receive(client: SQSClient, url: str, count: int, visibility: int, wait: int = 0) -> list[MessageTypeDef]:
    """Up to ``count`` (at most ten) messages, hidden for ``visibility`` seconds; ``wait`` > 0 long-polls."""
    polling = _LONG_POLLING.get(client, client) if wait > 0 else client
    with translated(f"ReceiveMessage on {url}"):
        got = polling.receive_message(
            QueueUrl=url, MaxNumberOfMessages=max(1, min(count, MAX_BATCH)), VisibilityTimeout=visibility,
            WaitTimeSeconds=wait, MessageAttributeNames=["All"],
            MessageSystemAttributeNames=_RECEIVE_ATTRIBUTES, AttributeNames=_RECEIVE_ATTRIBUTES)
    return list(got.get("Messages", []))


def attributes_size(attrs: Any) -> int:
    """What message attributes count toward a message's size: each name, type and value (with slack)."""
    return sum(len(k.encode()) + len(str(v.get("StringValue", "")).encode()) + 16 for k, v in attrs.items())


def size_of(entry: SendMessageBatchRequestEntryTypeDef) -> int:
    """The bytes SQS counts for one message: its body (UTF-8) and its attributes."""
    return len(entry["MessageBody"].encode()) + attributes_size(entry.get("MessageAttributes", {}))


def _chunks(entries: Sequence[SendMessageBatchRequestEntryTypeDef]) -> Iterator[list[Any]]:
    """Ten entries a call, fewer when their bodies would pass the batch's byte limit."""
    chunk: list[Any] = []
    size = 0
    for entry in entries:
        cost = size_of(entry)
        if chunk and (len(chunk) == MAX_BATCH or size + cost > MAX_BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append({**entry, "Id": str(len(chunk))})
        size += cost
    if chunk:
        yield chunk


def send(client: SQSClient, url: str, entries: Sequence[SendMessageBatchRequestEntryTypeDef]) -> None:
    """SendMessageBatch, ten at a time; an entry SQS refuses fails the push naming its error.

    An entry refused as the sender's fault (its data) is `StoreRefused`; one refused
    as SQS's own fault may succeed when sent again (`DriverUnavailable`).
    """
    for chunk in _chunks(entries):
        with translated(f"SendMessageBatch on {url}"):
            result = client.send_message_batch(QueueUrl=url, Entries=chunk)
        failed = result.get("Failed", [])
        if failed:
            reasons = "; ".join(sorted({f"{f['Code']}: {f.get('Message', '')}" for f in failed}))
            kind = StoreRefused if any(f.get("SenderFault", True) for f in failed) else DriverUnavailable
            raise kind(f"SQS stored {len(chunk) - len(failed)} of {len(chunk)} messages on {url}; "
                       f"refused: {reasons}")


def delete(client: SQSClient, url: str, handles: Sequence[str]) -> int:
    """DeleteMessageBatch, ten at a time; a stale receipt deletes nothing. Returns how many were deleted."""
    deleted = 0
    for start in range(0, len(handles), MAX_BATCH):
        entries: Any = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start:start + MAX_BATCH])]
        with translated(f"DeleteMessageBatch on {url}"):
            result = client.delete_message_batch(QueueUrl=url, Entries=entries)
        deleted += len(result.get("Successful", []))
        refused = [f for f in result.get("Failed", []) if f["Code"] not in STALE]
        if refused:
            raise DriverError(f"SQS refused to delete {len(refused)} message(s) on {url}: "
                              f"{refused[0]['Code']}: {refused[0].get('Message', '')}")
    return deleted


def change_visibility(client: SQSClient, url: str, handles: Sequence[str], seconds: int) -> set[str]:
    """ChangeMessageVisibilityBatch, ten at a time; the handles SQS accepted (a stale one is not)."""
    kept: set[str] = set()
    for start in range(0, len(handles), MAX_BATCH):
        chunk = list(handles[start:start + MAX_BATCH])
        entries: Any = [{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": seconds}
                        for i, h in enumerate(chunk)]
        with translated(f"ChangeMessageVisibilityBatch on {url}"):
            result = client.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        kept.update(chunk[int(ok["Id"])] for ok in result.get("Successful", []))
    return kept


def counts(client: SQSClient, url: str) -> tuple[int, int, int]:
    """(ready, delayed, reserved): SQS's approximate visible, delayed and in-flight numbers."""
    names: Any = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed",
                  "ApproximateNumberOfMessagesNotVisible"]
    with translated(f"GetQueueAttributes on {url}"):
        attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=names).get("Attributes", {})
    ready, delayed, reserved = (int(attrs.get(name, "0")) for name in names)
    return ready, delayed, reserved


def max_size(client: SQSClient, url: str) -> int:
    """The longest message the queue takes (its MaximumMessageSize), or SQS's floor if it does not say."""
    with translated(f"GetQueueAttributes on {url}"):
        attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])
    found = finite(attrs.get("Attributes", {}).get("MaximumMessageSize"))
    return int(found) if found is not None and found >= 1024 else MAX_MESSAGE_BYTES


class QueueUrls:
    """jobbridge queue names to SQS queue URLs: ``default`` is ``queue_url``, ``x`` is ``<base>-x``.

    Resolved with GetQueueUrl at first use and cached; a queue that does not
    exist is an error naming it (this driver never creates queues).
    """

    def __init__(self, client: SQSClient, settings: SqsSettings) -> None:
        self.client, self.base = client, settings.base
        path = urlsplit(settings.queue_url).path.strip("/").split("/")
        self._account = path[-2] if len(path) >= 2 and path[-2].isdigit() else None
        self._urls: dict[str, str] = {settings.base: settings.queue_url}
        self._guard = threading.Lock()

    def sqs_name(self, queue: str) -> str:
        """The SQS name of a jobbridge queue; a queue name SQS cannot hold is an error naming why."""
        if queue == "default":
            return self.base
        name = f"{self.base}-{queue}"
        if queue == FAILED_SUFFIX:
            raise DriverError(f"no jobbridge queue may be called {queue!r} on an sqs connection: "
                              f"{name!r} is the connection's failed store")
        if not QUEUE_NAME.fullmatch(name):
            raise DriverError(f"jobbridge queue {queue!r} cannot be an SQS queue: {name!r} must be letters, "
                              "digits, '-' and '_', at most 80 characters")
        return name

    def url(self, queue: str) -> str:
        return self._resolve(self.sqs_name(queue), f"jobbridge queue {queue!r}")

    def failed_url(self) -> str:
        return self._resolve(f"{self.base}-{FAILED_SUFFIX}", "the failed store")

    def _resolve(self, name: str, what: str) -> str:
        with self._guard:
            found = self._urls.get(name)
        if found is not None:
            return found
        kwargs: Any = {"QueueName": name}
        if self._account is not None:
            kwargs["QueueOwnerAWSAccountId"] = self._account
        try:
            with translated(f"GetQueueUrl {name!r}"):
                url = self.client.get_queue_url(**kwargs)["QueueUrl"]
        except DriverError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and error_code(cause) in _MISSING:
                raise DriverError(
                    f"the SQS queue {name!r} ({what}) does not exist; jobbridge does not create queues: create "
                    f"it beside {self.base!r}, in the same account and region (aws sqs create-queue "
                    f"--queue-name {name})") from cause
            raise
        with self._guard:
            self._urls[name] = url
        return url

    def listed(self) -> dict[str, str]:
        """Every jobbridge queue that exists on this connection (``<base>`` and ``<base>-*``), by name."""
        found: dict[str, str] = {}
        with translated(f"ListQueues {self.base!r}*"):
            for page in self.client.get_paginator("list_queues").paginate(QueueNamePrefix=self.base):
                for url in page.get("QueueUrls", []):
                    name = url.rstrip("/").rsplit("/", 1)[-1]
                    queue = "default" if name == self.base else name.removeprefix(f"{self.base}-")
                    if (name == self.base or name.startswith(f"{self.base}-")) and queue != FAILED_SUFFIX:
                        found[queue] = url
        found["default"] = self._urls[self.base]
        return found
