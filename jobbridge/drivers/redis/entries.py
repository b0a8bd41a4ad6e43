"""Stream entries to reservations and envelopes to script arguments.

An entry carries three fields: ``id`` (the job id), ``body`` (the envelope as
pushed) and ``attempts`` (attempts started before this entry). The body is
never rewritten while the job moves between stream, delayed set and failed
store; ``attempts`` is the count that travels, and a reservation's envelope is
the body with ``attempts`` one higher.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobbridge.drivers.redis.connection import as_text
from jobbridge.envelope import Envelope, Reservation, undecodable
from jobbridge.errors import PayloadDecodeError


@dataclass(frozen=True, slots=True)
class Receipt:
    """Which stream entry a reservation holds; the lease member names it in the lease set."""

    queue: str
    entry_id: str

    @property
    def member(self) -> str:
        return f"{self.entry_id} {self.queue}"


def push_args(envelopes: Sequence[Envelope], now: float) -> list[str | bytes | int]:
    """push.lua's ARGV quads: ready now unless ``available_at`` is still ahead of the clock."""
    args: list[str | bytes | int] = []
    for env in envelopes:
        due = "" if env.available_at <= now else repr(env.available_at)
        args += [due, env.attempts, env.id, env.encode()]
    return args


def from_fields(
    queue: str, entry_id: str, fields: Mapping[bytes, Any], lease_until: float, now: float
) -> Reservation:
    """The reservation of an entry read by XREADGROUP (fields as a mapping)."""
    return reservation(
        queue, entry_id, fields.get(b"id", b""), fields.get(b"body", b""), fields.get(b"attempts", b"0"),
        lease_until, now,
    )


def reservation(
    queue: str, entry_id: str, job_id: bytes, body: bytes, stored_attempts: bytes, lease_until: float, now: float
) -> Reservation:
    """The reservation of one claimed entry; an undecodable body becomes a stand-in to be failed."""
    try:
        attempts = int(stored_attempts) + 1
    except ValueError:
        attempts = 1  # a field this driver did not write; the body decides whether the job runs
    receipt = Receipt(queue, entry_id)
    try:
        env = Envelope.decode(body).replace(attempts=attempts)
    except PayloadDecodeError as exc:
        stand_in = undecodable(id=as_text(job_id) or entry_id, queue=queue, attempts=attempts, now=now)
        return Reservation(stand_in, receipt, lease_until, body=body, decode_error=str(exc))
    return Reservation(env, receipt, lease_until)


def claimed(
    flat: Sequence[Any], queues: Sequence[str], lease_until: float, now: float
) -> Iterator[Reservation]:
    """reserve.lua's (queue index, entry id, job id, body, attempts) quintuples, in claim order."""
    for i in range(0, len(flat), 5):
        queue = queues[int(flat[i]) - 1]
        entry_id, job_id, body, attempts = flat[i + 1 : i + 5]
        yield reservation(queue, as_text(entry_id), job_id, body, attempts, lease_until, now)
