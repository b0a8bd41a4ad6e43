"""A kafka connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

``lease`` is the reservation (whole seconds a handed-out job stays claimed
between heartbeats); the settings layer also passes it as ``reservation``, a
copy, which is accepted here for that reason and for code that builds a
driver with the name every other driver uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError, RefusedSetting

SETTINGS = frozenset({"brokers", "group", "topic_prefix", "lease", "locks"})

_OFFSETS = (
    "the driver commits a partition's offset only up to the first job not yet finished, so a "
    "restarted consumer never skips one; an automatic commit (or a reset to the newest offset) "
    "would skip every job that was read but not yet done",
    "nothing; offsets are the driver's to commit",
)

REFUSED: Mapping[str, tuple[str, str]] = {
    "bootstrap_servers": ("that is the Kafka client's name for the brokers", "brokers (host:port, ...)"),
    "group_id": ("that is the Kafka client's name for the consumer group", "group"),
    "topic": (
        "every queue has its own topic, named topic_prefix + the queue, so one topic setting would "
        "be a decoy that no job is pushed to",
        "topic_prefix",
    ),
    "enable_auto_commit": _OFFSETS,
    "auto_offset_reset": _OFFSETS,
}

DEFAULT_GROUP = "jobbridge"
DEFAULT_TOPIC_PREFIX = "jobbridge."
DEFAULT_LEASE = 60.0
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
    group: str = DEFAULT_GROUP
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    lease: float = DEFAULT_LEASE

    @property
    def scope(self) -> str:
        """What the lock store files this connection's rows under: its group and its topics."""
        return f"{self.group}@{self.topic_prefix}"


def brokers_from_url(url: str) -> tuple[str, ...]:
    """``kafka://host:port,host:port`` as a tuple of ``host:port``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "kafka":
        raise ConfigurationError(f"a kafka URL is kafka://host:port,host:port, not {url!r}")
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
        raise ConfigurationError(
            "a kafka connection with no brokers has nowhere to push; set brokers = host:port, ...")
    return found


def parse_settings(settings: Mapping[str, Any]) -> KafkaSettings:
    """Validate a connection's settings; a refused, unknown or missing key is a boot failure naming it."""
    for key in settings:
        if key in REFUSED:
            why, instead = REFUSED[key]
            raise RefusedSetting(key, why, instead, where="a kafka connection")
        if key not in SETTINGS and key not in (_COPY, "driver"):
            raise ConfigurationError(
                f"unknown setting {key!r} on a kafka connection; it accepts {', '.join(sorted(SETTINGS))}")
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
        group=_group(settings.get("group", DEFAULT_GROUP)),
        topic_prefix=_prefix(settings.get("topic_prefix", DEFAULT_TOPIC_PREFIX)),
        lease=_lease(settings),
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


def _lease(settings: Mapping[str, Any]) -> float:
    value = settings.get("lease", settings.get(_COPY, DEFAULT_LEASE))
    try:
        lease = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"lease is a number of seconds, not {value!r}") from None
    if not lease > 0:
        raise ConfigurationError(f"lease must be a positive number of seconds, not {value!r}")
    return lease


def topic_name(prefix: str, queue: str) -> str:
    """The queue's topic; a queue whose name Kafka cannot take is refused, naming it."""
    topic = f"{prefix}{queue}"
    if not queue or not _TOPIC_CHARS.fullmatch(queue) or len(topic) > MAX_TOPIC_LENGTH or topic in (".", ".."):
        raise ConfigurationError(
            f"queue {queue!r} cannot be a Kafka topic ({topic!r}): a queue on a kafka connection is named "
            f"with letters, digits, '.', '_' and '-', and its topic is at most {MAX_TOPIC_LENGTH} characters")
    return topic
