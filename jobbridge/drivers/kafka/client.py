"""The confluent-kafka clients the driver talks through, and the wall that keeps their errors out.

Every call into the client goes through `translated()`: a transport failure
(broker down, timed out) becomes `DriverUnavailable`, a refusal of the data
itself (a message too large, a record the broker rejects) `StoreRefused`,
anything else `DriverError`, with the `KafkaException` chained as ``__cause__``.

Nothing waits forever: every client's config bounds setting up a broker
connection (`CONNECT_TIMEOUT_MS`) and a request (`REQUEST_TIMEOUT_MS`), and a
producer's deliveries (``message.timeout.ms``, the request timeout unless
given); an admin request waits the request timeout and a push's flush the
delivery timeout, read off the client's own config, so a connection's
``connect_timeout`` and ``request_timeout`` (`jobbridge.drivers.kafka.settings`)
reach every wait. An error for brokers that did not answer names them and
those settings.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused

#: partitions of a topic the driver creates (an operator may create topics beforehand with more)
TOPIC_PARTITIONS = 4
#: milliseconds to set up a broker connection, and for one request, unless the client config says otherwise
CONNECT_TIMEOUT_MS = 5_000
REQUEST_TIMEOUT_MS = 10_000
#: seconds `Producer.flush` waits beyond the delivery timeout, by which every delivery has reported
_FLUSH_MARGIN = 1.0
#: the consumer's group session (a dead worker's partitions move after this long)
SESSION_TIMEOUT_MS = 10_000
#: a consumer that has not reserved for this long hands its partitions to the others
MAX_POLL_INTERVAL_MS = 60_000
#: the producer's ``message.max.bytes`` unless the client config sets it (librdkafka's default)
MESSAGE_MAX_BYTES = 1_000_000
#: what a record adds to its value within ``message.max.bytes``: the key (a job id) and the framing
RECORD_OVERHEAD = 100

_TRANSPORT = {
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._RESOLVE, KafkaError._WAIT_COORD, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NETWORK_EXCEPTION,
}


#: the broker or the client refused the record itself: sending it again cannot help
_REFUSED = {
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD, KafkaError.INVALID_MSG,
}


#: the brokers did not answer in time, or at all: the errors whose message says which settings bound the wait
_UNANSWERED = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
               KafkaError.REQUEST_TIMED_OUT}


def error_for(action: str, error: KafkaError | None, detail: object = "") -> DriverError:
    """The jobbridge exception for a Kafka error; the caller raises it ``from`` the original."""
    text = f"kafka failed to {action}: {error if error is not None else detail}"
    if error is not None and error.code() in _REFUSED:
        return StoreRefused(text)
    if error is not None and error.code() in _UNANSWERED:
        return DriverUnavailable(
            f"{text}; the brokers did not answer within connect_timeout (to connect) or request_timeout (for a "
            "request or a delivery): if they are only slow, raise kafka connect_timeout / request_timeout "
            "(JOBBRIDGE_KAFKA_CONNECT_TIMEOUT, JOBBRIDGE_KAFKA_REQUEST_TIMEOUT); if they should answer at once, "
            "check that brokers lists Kafka brokers' host:port")
    if error is None or error.code() in _TRANSPORT or (error.retriable() and not error.fatal()):
        return DriverUnavailable(text)
    return DriverError(text)


def _millis(config: Mapping[str, Any], key: str, default: int) -> int:
    """A librdkafka duration from a client config; one that is not a number is the client's to refuse."""
    try:
        return int(config.get(key, default))
    except (TypeError, ValueError):
        return default


def message_limit(config: Mapping[str, Any]) -> int:
    """The longest value this connection produces: the producer's ``message.max.bytes`` less a record's key
    and framing. A limit that is not a whole number of bytes is refused when the producer is made."""
    try:
        configured = int(config.get("message.max.bytes", MESSAGE_MAX_BYTES))
    except (TypeError, ValueError):
        configured = MESSAGE_MAX_BYTES
    return max(1, configured - RECORD_OVERHEAD)


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Run client calls, re-raising `KafkaException` as a `DriverError` naming ``action``."""
    try:
        yield
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        raise error_for(action, error, exc) from exc


def common_config(brokers: Iterable[str], extra: Mapping[str, Any]) -> dict[str, Any]:
    """What every client is given: the brokers, and the bounds on connecting and on a request."""
    return {"bootstrap.servers": ",".join(brokers), "client.id": "jobbridge",
            "socket.connection.setup.timeout.ms": CONNECT_TIMEOUT_MS, "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            **extra}


def producer_config(brokers: Iterable[str], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Idempotent, every in-sync replica acknowledging: a push that returned is on the brokers.

    A delivery that the brokers have not acknowledged within the request timeout
    fails the push (librdkafka would otherwise keep trying for five minutes).
    """
    config = {**common_config(brokers, {}), "enable.idempotence": True, "acks": "all", "linger.ms": 5,
              **extra}
    config.setdefault("message.timeout.ms", _millis(config, "socket.timeout.ms", REQUEST_TIMEOUT_MS))
    return config


def consumer_config(brokers: Iterable[str], group: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Offsets committed only by the driver; a new group starts at the oldest message, never the newest."""
    config: dict[str, Any] = {
        **common_config(brokers, {}),
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        "fetch.wait.max.ms": 100,
        "queued.max.messages.kbytes": 8192,
        **extra,
    }
    config.setdefault("heartbeat.interval.ms", max(100, int(config["session.timeout.ms"]) // 3))
    if int(config["max.poll.interval.ms"]) < int(config["session.timeout.ms"]):
        config["max.poll.interval.ms"] = config["session.timeout.ms"]
    return config


class Admin:
    """Topics and offsets: create a queue's topic once, list partitions and their ends."""

    def __init__(self, config: Mapping[str, Any], partitions: int = TOPIC_PARTITIONS) -> None:
        self._config = dict(config)
        self._client: AdminClient | None = None
        self._pid = 0
        self.partitions = partitions
        #: seconds an admin request waits: the client config's request timeout
        self.timeout = _millis(self._config, "socket.timeout.ms", REQUEST_TIMEOUT_MS) / 1000
        self._where = f"{self._config.get('bootstrap.servers', '')} (request_timeout {self.timeout:g} s)"
        self._known: set[str] = set()
        self._lock = threading.Lock()

    @property
    def client(self) -> AdminClient:
        """Built in the process that uses it: a client's threads do not survive a fork."""
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client, self._pid = AdminClient(self._config), os.getpid()
            return self._client

    def ensure(self, topics: Iterable[str]) -> None:
        """Create the topics that do not exist yet (replication as the brokers' default)."""
        with self._lock:
            missing = sorted(set(topics) - self._known)
        if not missing:
            return
        with translated(f"create topics on {self._where}"):
            existing = set(self.client.list_topics(timeout=self.timeout).topics)
            wanted = [NewTopic(t, num_partitions=self.partitions, replication_factor=-1)
                      for t in missing if t not in existing]
            futures = self.client.create_topics(
                wanted, operation_timeout=self.timeout, request_timeout=self.timeout) if wanted else {}
            for future in futures.values():
                _created(future)
        with self._lock:
            self._known.update(missing)

    def topics(self) -> dict[str, list[int]]:
        """Every topic the cluster holds, with its partition numbers."""
        with translated(f"list topics on {self._where}"):
            found = self.client.list_topics(timeout=self.timeout).topics
        return {name: sorted(meta.partitions) for name, meta in found.items() if meta.error is None}

    def offsets(self, partitions: Iterable[tuple[str, int]], *, earliest: bool = False) -> dict[tuple[str, int], int]:
        """Each partition's first (``earliest``) or next-to-be-written offset, as the broker reports it.

        Some brokers (Tansu) report the end as the start of the last batch + 1,
        which is never past the true end: callers treat it as a lower bound.
        """
        # (the client's OffsetSpec factories are untyped)
        factory: Callable[[], OffsetSpec] = getattr(OffsetSpec, "earliest" if earliest else "latest")
        spec = factory()
        wanted = {TopicPartition(t, p): spec for t, p in partitions}
        if not wanted:
            return {}
        with translated(f"list offsets on {self._where}"):
            futures = self.client.list_offsets(wanted, request_timeout=self.timeout)
            return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}


def _created(future: Any) -> None:
    try:
        future.result()
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return  # another worker created it first
        raise


class Sender:
    """The producer: a batch is produced in full, then flushed once; any failed delivery raises."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        with translated("create the producer"):  # a client option it refuses (KafkaException) surfaces here
            self.producer = Producer(dict(config))
        #: a fatal error (the idempotent producer fenced or out of sequence) ends this producer
        self.broken = False
        #: seconds a push waits for its deliveries: every one has reported (or timed out) by then
        self.flush_timeout = _millis(config, "message.timeout.ms", REQUEST_TIMEOUT_MS) / 1000 + _FLUSH_MARGIN
        self.brokers = str(config.get("bootstrap.servers", ""))

    def send(self, messages: Iterable[tuple[str, str | None, bytes]]) -> None:
        """Produce ``(topic, key, value)`` messages and wait until the brokers acknowledged them all."""
        failed: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failed.append(error)

        count = 0
        with translated("produce jobs"):
            for topic, key, value in messages:
                self._produce(topic, key, value, delivered)
                count += 1
            if not count:
                return
            left = self.producer.flush(self.flush_timeout)
        if failed:
            self.broken = any(error.fatal() for error in failed)
            waited = self.flush_timeout - _FLUSH_MARGIN
            raise error_for(f"deliver a job to {self.brokers} (request_timeout {waited:g} s)", failed[0])
        if left:
            raise DriverUnavailable(f"kafka ({self.brokers}) did not acknowledge {left} message(s) within "
                                    f"{self.flush_timeout:g} s; if the brokers are only slow, raise "
                                    "request_timeout (JOBBRIDGE_KAFKA_REQUEST_TIMEOUT)")

    def _produce(self, topic: str, key: str | None, value: bytes, delivered: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, value=value, key=key, on_delivery=delivered)
                return
            except BufferError:
                # the local queue is full: let deliveries drain it, then go on
                self.producer.poll(0.1)

    def close(self) -> None:
        self.producer.flush(self.flush_timeout)
