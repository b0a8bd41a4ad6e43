"""The wire message (`Envelope`) and a driver's claim on one (`Reservation`).

The envelope is what crosses the process boundary: a stable job name, a JSON
payload and the options dispatch fixed. It is separate from the user's job
class so that a worker can read, count and fail a message whose class it
cannot load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import uuid_utils

from jobbridge.errors import PayloadDecodeError

FORMAT_VERSION = 1


def new_id() -> str:
    """A UUIDv7 string: unique, and sortable by creation time."""
    return str(uuid_utils.uuid7())


@dataclass(frozen=True, slots=True)
class Envelope:
    """One queued job as every driver stores it.

    ``attempts`` counts attempts *started*: a driver increments it when it
    reserves the envelope, so a reservation whose worker died still counts.
    """

    id: str
    name: str
    queue: str
    payload: Mapping[str, Any]
    tries: int
    timeout: float
    available_at: float
    created_at: float
    attempts: int = 0
    unique_key: str | None = None
    unique_for: float | None = None
    headers: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The stored form: compact JSON, versioned."""
        return orjson.dumps(
            {
                "v": FORMAT_VERSION,
                "id": self.id,
                "name": self.name,
                "queue": self.queue,
                "payload": self.payload,
                "tries": self.tries,
                "timeout": self.timeout,
                "available_at": self.available_at,
                "created_at": self.created_at,
                "attempts": self.attempts,
                "unique_key": self.unique_key,
                "unique_for": self.unique_for,
                "headers": self.headers,
            }
        )

    @classmethod
    def decode(cls, body: bytes | str, attempts: int | None = None) -> Envelope:
        """Read a stored envelope; anything malformed is a `PayloadDecodeError` naming why.

        ``attempts`` overrides the stored count, for drivers that keep it beside the body.
        """
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise PayloadDecodeError(f"stored message is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise PayloadDecodeError("stored message is not a JSON object")
        if data.get("v") != FORMAT_VERSION:
            raise PayloadDecodeError(f"unknown envelope format version {data.get('v')!r}")
        try:
            return cls(
                id=str(data["id"]),
                name=str(data["name"]),
                queue=str(data["queue"]),
                payload=dict(data["payload"]),
                tries=int(data["tries"]),
                timeout=float(data["timeout"]),
                available_at=float(data["available_at"]),
                created_at=float(data["created_at"]),
                attempts=int(data.get("attempts", 0)) if attempts is None else attempts,
                unique_key=data.get("unique_key"),
                unique_for=data.get("unique_for"),
                headers=dict(data.get("headers") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PayloadDecodeError(f"stored message is missing or mistypes {exc}") from exc

    def replace(self, **changes: Any) -> Envelope:
        """A copy with some fields changed (envelopes are immutable)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Reservation:
    """A driver's claim on one envelope until ``lease_until`` (clock seconds).

    ``receipt`` is the driver's own handle (row id and token, stream entry id,
    SQS receipt handle, partition and offset); nobody else looks inside it.
    When the stored body could not be decoded, ``decode_error`` says why,
    ``envelope`` is a stand-in carrying the id and queue, and ``body`` keeps
    the raw bytes so that the failed store holds exactly what was stored.
    """

    envelope: Envelope
    receipt: Any
    lease_until: float
    body: bytes = b""
    decode_error: str | None = None

    @property
    def id(self) -> str:
        return self.envelope.id

    @property
    def attempt(self) -> int:
        return self.envelope.attempts

    def stored_body(self) -> bytes:
        """What a failed-store row keeps: the raw body when undecodable, else the envelope."""
        return self.body if self.decode_error is not None else self.envelope.encode()


def undecodable(*, id: str, queue: str, attempts: int, now: float) -> Envelope:
    """The stand-in envelope a driver hands out for a body it could not decode."""
    return Envelope(
        id=id,
        name="<undecodable>",
        queue=queue,
        payload={},
        tries=1,
        timeout=0.0,
        available_at=now,
        created_at=now,
        attempts=attempts,
    )


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A row of the failed store: what gave up, when and why."""

    id: str
    queue: str
    name: str
    attempts: int
    error: str
    failed_at: float
    body: bytes


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many jobs a queue holds, by state, for ``jobbridge status``."""

    queue: str
    ready: int = 0
    delayed: int = 0
    reserved: int = 0

    @property
    def pending(self) -> int:
        """Waiting, delayed or running: everything not yet acknowledged or failed."""
        return self.ready + self.delayed + self.reserved
