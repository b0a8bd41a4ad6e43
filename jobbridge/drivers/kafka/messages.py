"""What one message read from a queue's topic is to the driver: where it sits, its body, and its job or why not.

A topic takes messages from any producer, not only this driver: the body may
hold anything, the key anything, the record headers anything. So the driver
reads no record header (a malformed one cannot matter), keys nothing by the
record's key beyond naming an undecodable message, and decodes each body once,
here, into an `Item` (its envelope tells when the job is due and its id).
Whatever keeps a body from becoming a job becomes the item's ``error``: never
an exception in the poll, which would drop the messages read beside it. The
reservation itself is built by `jobbridge.envelope.reservation_from_body`,
which holds every field to `jobbridge.limits` (an id no lock store column
holds is undecodable there, not a reserve that fails for its whole partition).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from confluent_kafka import Message

from jobbridge.drivers.kafka.store import Spot
from jobbridge.envelope import Envelope
from jobbridge.errors import PayloadDecodeError

#: a record key used as an undecodable message's id: short and plain
_PLAIN_KEY = re.compile(r"[A-Za-z0-9._:@-]{1,64}")


@dataclass(frozen=True, slots=True)
class Item:
    """One read message, decoded once: its envelope, or the reason it has none."""

    spot: Spot
    key: str | None
    body: bytes
    envelope: Envelope | None
    error: str | None

    @property
    def available_at(self) -> float:
        return self.envelope.available_at if self.envelope is not None else float("-inf")

    @property
    def job_id(self) -> str:
        if self.envelope is not None:
            return self.envelope.id
        # an undecodable body: the key the producer gave it, or a stable id for its spot
        if self.key is not None and _PLAIN_KEY.fullmatch(self.key):
            return self.key
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafka:{self.spot.key}"))


def decode(body: bytes) -> tuple[Envelope | None, str | None]:
    """The envelope in ``body``, or None and why: whatever the decoder raises, never past here."""
    try:
        env = Envelope.decode(body)
    except PayloadDecodeError as exc:
        return None, str(exc)
    except Exception as exc:  # a decoder bug must not take the poll (and the messages beside it) down
        return None, f"stored message could not be read ({type(exc).__name__})"
    return env, None


def item_of(message: Message) -> Item:
    """A polled message as an `Item` (its record headers are not read)."""
    body = message.value() or b""
    raw_key = message.key()
    key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else raw_key
    spot = Spot(str(message.topic()), int(message.partition() or 0), int(message.offset() or 0))
    env, error = decode(body)
    return Item(spot, key, body, env, error)
