"""The result store's port: states, the stored record, and the `ResultStore` protocol.

A result store keeps three kinds of thing, each with an expiry judged by the
injected clock:

- *results*: one `ResultRecord` per job id (state, JSON return value or error,
  progress ``meta``), read by pollers and waited on by ``wait``;
- *cancellations*: job ids nobody may run any more, kept in the store (not in a
  worker's memory) so that a restart or a worker that was offline cannot miss them;
- *counters*: a chord's join, decremented atomically as each header job ends.

Values cross the process boundary as JSON (through orjson, so a datetime, a
UUID or a dataclass comes back as its JSON form). Every store, the memory one
included, round-trips them through that codec so that tests on memory see what
production will.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from jobbridge.errors import JobBridgeError, PayloadEncodeError

PENDING, STARTED, RETRY, SUCCESS, FAILURE, REVOKED = "PENDING", "STARTED", "RETRY", "SUCCESS", "FAILURE", "REVOKED"

#: the states after which a job's record changes no more; a custom state is never ready
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})

#: one day, the issue's default for how long a result is kept
DEFAULT_TTL = 86_400.0

#: the longest id, state, name or counter key a store accepts (MySQL's utf8mb4 index limit on ids)
MAX_ID = 191
MAX_STATE = 64


class ResultEncodeError(PayloadEncodeError):
    """A result or ``meta`` that cannot become JSON; raised by ``store``, naming the field."""


class UnknownCounter(JobBridgeError, LookupError):
    """``counter_decrement`` on a key never initialised, expired or pruned."""


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """What the store holds for one job id; times are the store clock's epoch seconds."""

    id: str
    state: str
    name: str | None = None
    result: Any = None
    meta: Mapping[str, Any] | None = None
    error: str | None = None
    traceback: str | None = None
    exception_type: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    expires_at: float = 0.0

    @property
    def ready(self) -> bool:
        """Whether the job is over (SUCCESS, FAILURE or REVOKED): nothing more will be stored."""
        return self.state in READY_STATES


@runtime_checkable
class ResultStore(Protocol):
    """Results, durable cancellations and chord counters, all expiring by the injected clock."""

    def store(self, record: ResultRecord, ttl: float) -> None:
        """Insert or replace ``record.id``'s record, kept ``ttl`` seconds from now.

        ``updated_at`` and ``expires_at`` are set here; ``created_at`` is the first
        store's (or the record's own, when non-zero, on the first store). A ready
        state wakes every ``wait`` on the id, in any process.
        """
        ...

    def get(self, id: str) -> ResultRecord | None:
        """The record, or None when the id is unknown or its record expired (pruned or not)."""
        ...

    def get_many(self, ids: Sequence[str]) -> dict[str, ResultRecord]:
        """The live records among ``ids``, by id, in one round trip."""
        ...

    def wait(self, id: str, timeout: float) -> ResultRecord | None:
        """Block until the record is ready or ``timeout`` real seconds pass; return the latest record.

        The result may be None or not ready (the timeout passed). It wakes on the
        store's signal where the backend has one, and never blocks past the
        timeout for long because a connection dropped: errors while the store
        is unreachable are retried until the deadline, then raised as `DriverUnavailable`.
        """
        ...

    def forget(self, id: str) -> None:
        """Delete the record now (a no-op for an unknown id)."""
        ...

    def prune(self) -> int:
        """Delete every expired result, cancellation and counter; return how many."""
        ...

    def cancel(self, ids: Sequence[str], ttl: float) -> None:
        """Mark ``ids`` cancelled for ``ttl`` seconds, durably: every worker, now or later, sees it."""
        ...

    def cancelled(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are cancelled (and not expired), in one round trip."""
        ...

    def counter_init(self, key: str, count: int, ttl: float) -> None:
        """Set counter ``key`` to ``count`` for ``ttl`` seconds, forgetting any earlier members."""
        ...

    def counter_decrement(self, key: str, member: str | None = None) -> int:
        """Take one off ``key`` atomically and return what remains; `UnknownCounter` if there is none.

        With ``member`` (a header job's id), a member counts once: a job that runs
        again after a reclaim gets the current value back without taking another
        one off, so the join can reach 0 only when every member has counted.
        """
        ...

    def close(self) -> None:
        """Release connections and threads."""
        ...


# -- shared by the stores ---------------------------------------------------------------------


def encode_json(value: Any, field: str, id: str) -> str:
    """``value`` as JSON text; what cannot be JSON is a `ResultEncodeError` naming the field."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError as exc:
        raise ResultEncodeError(f"the {field} of result {id!r} cannot be stored as JSON: {exc}") from exc


def decode_json(text: str | bytes | None) -> Any:
    """The value stored by `encode_json` (None for a missing column)."""
    return None if text is None else orjson.loads(text)


def check_record(record: ResultRecord) -> None:
    """Refuse, before any I/O, what no store can hold."""
    check_key(record.id, "a result id")
    if not record.state or len(record.state) > MAX_STATE:
        raise ValueError(f"result state must be 1 to {MAX_STATE} characters, got {record.state!r}")
    if record.name is not None and len(record.name) > MAX_ID:
        raise ValueError(f"a result's name is at most {MAX_ID} characters, got {len(record.name)}")


def check_key(key: str, what: str) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_ID:
        raise ValueError(f"{what} must be a string of 1 to {MAX_ID} characters, got {key!r}")


def stamped(record: ResultRecord, *, now: float, ttl: float, created_at: float) -> ResultRecord:
    """The record as stored: its times set, and its values as JSON gives them back."""
    meta = round_trip(record.meta, "meta", record.id)
    return dataclasses.replace(
        record,
        result=round_trip(record.result, "result", record.id),
        meta=meta,
        created_at=created_at,
        updated_at=now,
        expires_at=now + ttl,
    )


def round_trip(value: Any, field: str, id: str) -> Any:
    """``value`` after a trip through the JSON codec (a tuple comes back a list)."""
    return None if value is None else decode_json(encode_json(value, field, id))
