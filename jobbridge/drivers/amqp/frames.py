"""The bytes of a ``basic.publish``: its method, content header and body frames (AMQP 0-9-1, section 4.2).

py-amqp writes each message with a socket write of its own and serializes its
properties field by field, which costs more than the broker takes to store the
message; a push of many jobs here encodes every message of a batch into one
buffer, written once (the acknowledgements of a batch of jobs likewise). Only
what a jobbridge message carries is encoded:
``content_type``, ``delivery_mode`` (2: persistent) and ``message_id`` (the job
id, so an undecodable body still names its job). Everything else (reading the
confirms, returns, channel errors) stays py-amqp's. The bytes are the ones py-amqp
writes for the same message (tests/drivers/test_amqp_frames.py compares them).
"""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct

#: the frame types of AMQP 0-9-1
METHOD, HEADER, BODY = 1, 2, 3
FRAME_END = b"\xce"
#: class basic, method publish; reserved-1 (the old ticket) is 0
_PUBLISH = Struct(">HHH").pack(60, 40, 0)
_FRAME = Struct(">BHI")
_HEADER = Struct(">HHQH")
#: a header frame's framing and its fixed fields; a frame end then the next (body) frame's framing
_HEADER_FRAME = Struct(">BHIHHQH")
_END_BODY = Struct(">BBHI")
#: property flags: content_type (bit 15), delivery_mode (bit 12), message_id (bit 7)
PROPERTY_FLAGS = 0x8000 | 0x1000 | 0x0080
_PERSISTENT = b"\x02"
CONTENT_TYPE = "application/json"
_MANDATORY = b"\x01"


def shortstr(text: str) -> bytes:
    """A short string: its length in one octet, then its UTF-8 bytes (at most 255)."""
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"{text[:40]!r}... is {len(data)} bytes, and an AMQP short string holds at most 255")
    return bytes((len(data),)) + data


class PublishFrames:
    """Encodes messages for one channel, its exchange and routing-key strings encoded once each."""

    def __init__(self, channel_id: int, frame_max: int) -> None:
        self.channel_id = channel_id
        #: the most body bytes one frame carries (frame_max less the frame's 8 bytes of framing)
        self.chunk = frame_max - 8
        self._methods: dict[tuple[str, str], bytes] = {}
        self._content_type = shortstr(CONTENT_TYPE)

    def _method(self, exchange: str, key: str) -> bytes:
        frame = self._methods.get((exchange, key))
        if frame is None:
            payload = _PUBLISH + shortstr(exchange) + shortstr(key) + _MANDATORY
            frame = _FRAME.pack(METHOD, self.channel_id, len(payload)) + payload + FRAME_END
            if len(self._methods) < 4096:  # routing keys of delays vary; keep the cache bounded
                self._methods[(exchange, key)] = frame
        return frame

    def encode(self, exchange: str, key: str, body: bytes, message_id: str) -> bytes:
        """One persistent message, ``mandatory`` (a message no queue takes comes back as returned)."""
        mid = message_id.encode()
        size = len(body)
        if 0 < size <= self.chunk and len(mid) <= 255:  # a job: three frames, packed at once
            properties = self._content_type + _PERSISTENT + bytes((len(mid),)) + mid
            return b"".join((self._method(exchange, key), _HEADER_FRAME.pack(
                HEADER, self.channel_id, _HEADER.size + len(properties), 60, 0, size, PROPERTY_FLAGS), properties,
                _END_BODY.pack(FRAME_END[0], BODY, self.channel_id, size), body, FRAME_END))
        header = (_HEADER.pack(60, 0, size, PROPERTY_FLAGS) + self._content_type + _PERSISTENT
                  + shortstr(message_id))
        parts = [self._method(exchange, key), _FRAME.pack(HEADER, self.channel_id, len(header)), header, FRAME_END]
        for start in range(0, len(body), self.chunk):
            piece = body[start:start + self.chunk]
            parts += (_FRAME.pack(BODY, self.channel_id, len(piece)), piece, FRAME_END)
        return b"".join(parts)


_ACK = Struct(">BHIHHQB")


def acks(channel_id: int, tags: Sequence[tuple[int, bool]]) -> bytes:
    """``basic.ack`` frames, one per ``(delivery tag, multiple)``, to be written at once."""
    return b"".join([_ACK.pack(METHOD, channel_id, 13, 60, 80, tag, int(multiple)) + FRAME_END
                     for tag, multiple in tags])
