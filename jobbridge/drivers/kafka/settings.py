"""A kafka connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

`SCHEMA` is the one declaration of them: the boot-time checks (`jobbridge.settings`)
and `parse_settings` both read it, and this module imports no client library, so
a configuration is checked the same way whether or not confluent-kafka is installed.

``brokers`` and ``locks`` are required: the brokers to push to, and the database
or redis connection (by name) whose store holds each job's lease and the delayed
and failed jobs. ``lease`` is the reservation (seconds a handed-out job stays
leased between heartbeats); the settings layer also passes it as
``reservation``, a copy, which is accepted here for that reason and for code
that builds a driver with the name every other driver uses. Client options
beyond these (TLS, SASL) come from code, not from this table
(`jobbridge.drivers.kafka`).

Nothing waits forever: ``connect_timeout`` (5 s unless written) bounds setting
up a connection to a broker (librdkafka's ``socket.connection.setup.timeout.ms``),
and ``request_timeout`` (10 s) one request and the delivery of a push
(``socket.timeout.ms`` and ``message.timeout.ms``; an admin request and a push's
flush wait as long), so a push to brokers that do not answer fails within it.
A consumer's wait for work is the worker's, not a request's. A client option
given in code (``kafka_config``) wins over these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError, RefusedSetting
from jobbridge.limits import MAX_NAME_LENGTH
from jobbridge.redaction import quoted
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, check_keys, describe, within

_OFFSETS = Refusal(
    "the driver commits a partition's offset only up to the first job not yet finished, so a "
    "restarted consumer never skips one; an automatic commit (or a reset to the newest offset) "
    "would skip every job that was read but not yet done",
    "nothing; offsets are the driver's to commit",
)
_LEASE = Refusal("on kafka the reservation is the lease", "lease")
#: seconds to set up a broker connection, and one request (a push's delivery included) may take, unless written
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 10.0
NO_BROKERS = Refusal("a kafka connection with no brokers has nowhere to push",
                     "brokers, a list of host:port (or one comma-separated string)")


def _combination(options: Mapping[str, Any]) -> tuple[str, Refusal] | None:
    """An empty ``brokers`` is a valid list and a connection that cannot push."""
    return ("brokers", NO_BROKERS) if "brokers" in options and not options["brokers"] else None


SCHEMA = DriverSchema(
    fields={
        "brokers": Field("list", empty_ok=True),
        "group": Field("str", default="jobbridge"),
        "topic_prefix": Field("str", empty_ok=True, default="jobbridge."),
        "lease": RESERVATION,
        "locks": Field("str", top_level=False),
        # librdkafka takes whole milliseconds, and sets up a connection in no less than one second
        "connect_timeout": Field("float", least=1, default=DEFAULT_CONNECT_TIMEOUT),
        "request_timeout": Field("float", least=0.01, most=300, default=DEFAULT_REQUEST_TIMEOUT),
    },
    refused={
        "bootstrap_servers": Refusal("that is the Kafka client's name for the brokers", "brokers (host:port, ...)"),
        "group_id": Refusal("that is the Kafka client's name for the consumer group", "group"),
        "topic": Refusal(
            "every queue has its own topic, named topic_prefix + the queue, so one topic setting would "
            "be a decoy that no job is pushed to",
            "topic_prefix",
        ),
        "enable_auto_commit": _OFFSETS,
        "auto_offset_reset": _OFFSETS,
        "reservation": _LEASE,
        "retry_after": _LEASE,
        "prefix": Refusal("on kafka the prefix is the topics'", "topic_prefix"),
        "url": Refusal("a kafka connection is given its brokers, not one URL", "brokers (host:port, ...)"),
    },
    required="brokers",
    reservation_key="lease",
    store_keys=("brokers", "topic_prefix"),
    combination=_combination,
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused

#: what Kafka allows in a topic name, and its longest
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]*")
MAX_TOPIC_LENGTH = 249
#: the copy the settings layer adds; accepted in ``open`` and never written by a user
_COPY = "reservation"


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """One kafka connection, validated."""

    brokers: tuple[str, ...]
    locks: str
    group: str = SCHEMA.default("group")
    topic_prefix: str = SCHEMA.default("topic_prefix")
    lease: float = SCHEMA.default("lease")
    connect_timeout: float = SCHEMA.default("connect_timeout")
    request_timeout: float = SCHEMA.default("request_timeout")

    def client_config(self) -> dict[str, int]:
        """The librdkafka options that bound every client of this connection (see the module's docstring)."""
        return {"socket.connection.setup.timeout.ms": round(self.connect_timeout * 1000),
                "socket.timeout.ms": round(self.request_timeout * 1000)}

    @property
    def scope(self) -> str:
        """What the lock store files this connection's rows under: its group and its topics."""
        return f"{self.group}@{self.topic_prefix}"


def brokers_from_url(url: str) -> tuple[str, ...]:
    """``kafka://host:port,host:port`` as a tuple of ``host:port``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "kafka":
        raise ConfigurationError(f"a kafka URL is kafka://host:port,host:port, not {quoted(url)}")
    return _brokers(rest.strip("/"))


def _brokers(value: object) -> tuple[str, ...]:
    items: Iterable[object]
    if isinstance(value, str):
        if value.lower().startswith("kafka://"):
            return brokers_from_url(value)
        items = value.split(",")
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise ConfigurationError(f"brokers is a list of host:port, not {value!r}")
    found = tuple(str(item).strip() for item in items if str(item).strip())
    if not found:
        raise RefusedSetting("brokers", NO_BROKERS.why, NO_BROKERS.instead, where="a kafka connection")
    return found


def parse_settings(settings: Mapping[str, Any]) -> KafkaSettings:
    """Validate a connection's settings; a refused, unknown or missing key is a boot failure naming it."""
    check_keys(SCHEMA, settings, "a kafka connection")
    if "brokers" not in settings:
        raise ConfigurationError("a kafka connection needs brokers = host:port, ... (JOBBRIDGE_KAFKA_BROKERS)")
    locks = settings.get("locks")
    if not isinstance(locks, str) or not locks.strip():
        raise ConfigurationError(
            "a kafka connection needs locks = \"<name of a database or redis connection>\" (declare both in "
            "a connections section): Kafka keeps offsets, not per-job reservations, so each job's lease and the "
            "delayed and failed jobs live in that shared store; without it two workers could run one job and "
            "a dead worker's job would never come back")
    return KafkaSettings(
        brokers=_brokers(settings["brokers"]),
        locks=locks.strip(),
        group=_group(settings.get("group", SCHEMA.default("group"))),
        topic_prefix=_prefix(settings.get("topic_prefix", SCHEMA.default("topic_prefix"))),
        lease=_lease(settings),
        connect_timeout=_seconds(settings, "connect_timeout"),
        request_timeout=_seconds(settings, "request_timeout"),
    )


def _group(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"group is the consumer group's name, not {value!r}")
    return value.strip()


def _prefix(value: object) -> str:
    if not isinstance(value, str) or not _TOPIC_CHARS.fullmatch(value):
        raise ConfigurationError(
            f"topic_prefix {value!r} cannot begin a Kafka topic name: use letters, digits, '.', '_' and '-'")
    return value


def _seconds(settings: Mapping[str, Any], key: str) -> float:
    field = SCHEMA.fields[key]
    value = settings.get(key, field.default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not within(field, value):
        raise ConfigurationError(f"{key} on a kafka connection must be {describe(field)}, not {value!r}")
    return float(value)


def _lease(settings: Mapping[str, Any]) -> float:
    value = settings.get("lease", settings.get(_COPY, SCHEMA.default("lease")))
    try:
        lease = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"lease is a number of seconds, not {value!r}") from None
    if not within(SCHEMA.fields["lease"], lease):
        raise ConfigurationError(f"lease must be {describe(SCHEMA.fields['lease'])}, not {value!r}")
    return lease


def topic_name(prefix: str, queue: str) -> str:
    """The queue's topic; a queue whose name Kafka cannot take is refused, naming it."""
    topic = f"{prefix}{queue}"
    if not queue or not _TOPIC_CHARS.fullmatch(queue) or len(topic) > MAX_TOPIC_LENGTH or topic in (".", "..") \
            or len(queue) > MAX_NAME_LENGTH:
        raise ConfigurationError(
            f"queue {queue[:MAX_TOPIC_LENGTH]!r} cannot be a Kafka topic: a queue on a kafka connection is named "
            f"with letters, digits, '.', '_' and '-', in at most {MAX_NAME_LENGTH} characters (the lock store's "
            f"queue column), and its topic is at most {MAX_TOPIC_LENGTH}")
    return topic
