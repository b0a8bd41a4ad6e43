"""Reading what the broker sent to the reserving connection: every frame waiting, in as few socket reads as it takes.

py-amqp reads a frame in three socket reads (header, payload, end octet) and
switches the socket's timeout twice per frame; a delivery is three frames, so
a worker spent more of its time reading deliveries than running no-op jobs.
`drain` reads the socket in large chunks, cuts them into frames (AMQP 0-9-1,
section 4.2.3) and hands each to py-amqp's own frame handler, which does the
rest (messages, consumers' callbacks, heartbeats, channel and connection
errors) as if py-amqp had read it. A delivery to one of the consumers named in
``fast`` whose properties are exactly what a jobbridge push writes
(`jobbridge.drivers.amqp.frames`: no headers, so no redelivery count to read)
is decoded here and handed to that consumer's function; any other (a Celery or
hand-made message, a redelivery with ``x-delivery-count``, a body over one frame)
goes through py-amqp. A partial frame at the end goes back into
py-amqp's read buffer, so py-amqp's own reads (a ``queue.declare`` waiting for
its answer) carry on exactly where this left off. TLS connections keep
py-amqp's reads.

The wait is a ``poll`` on the socket, and a read follows only when it is readable:
py-amqp's ``having_timeout`` switches the socket's timeout before and after each
read (a system call each way) and signals "nothing more" by an exception, which
on a worker that just woke for one job cost more than its read (docs/rabbitmq.md,
"Speed"). The socket's own timeout (``read_timeout``) is left as py-amqp set it.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Callable, Mapping
from struct import Struct
from typing import Any

from amqp.exceptions import UnexpectedFrame
from amqp.transport import TCPTransport

from jobbridge.drivers.amqp.frames import PROPERTY_FLAGS

#: bytes asked of the socket at a time
CHUNK = 65536
#: a poll for what makes a read return at once: data, the peer's close, an error
_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP
_FRAME = Struct(">BHI")
_FRAME_END = 0xCE
_DELIVER = b"\x00\x3c\x00\x3c"  # class basic, method deliver
_TAG = Struct(">QB")
_HEADER = Struct(">HHQH")

#: what a consumer is given for a delivery decoded here: tag, redelivered, body, message id (bytes, as sent)
Fast = Callable[[int, bool, bytes, bytes], None]


def drain(conn: Any, timeout: float, fast: Mapping[bytes, Fast] | None = None) -> bool:
    """Dispatch every frame that is here, waiting up to ``timeout`` for the first; False when none came.

    ``fast``: consumer tag (its UTF-8 bytes) -> the function its plain deliveries go to, past py-amqp.
    """
    transport = conn.transport
    if not isinstance(transport, TCPTransport):
        return _drain_by_frame(conn, timeout)
    buf = bytearray(transport._read_buffer)
    transport._read_buffer = b""
    sock = transport.sock
    readable = select.poll()
    readable.register(sock, _READABLE)
    deadline = time.monotonic() + timeout
    handled = 0
    try:
        while True:
            handled += _dispatch(conn, buf, fast or {})
            wait = 0 if handled else max(0, math.ceil((deadline - time.monotonic()) * 1000))
            if not readable.poll(wait):
                return handled > 0
            chunk = sock.recv(CHUNK)  # readable: returns at once (bounded by the socket's read_timeout even so)
            if not chunk:
                transport.connected = False
                raise OSError("Server unexpectedly closed connection")
            buf += chunk
    finally:
        transport._read_buffer = bytes(buf)


def _dispatch(conn: Any, buf: bytearray, fast: Mapping[bytes, Fast]) -> int:
    """Hand each complete frame at the start of ``buf`` on and cut it off; how many went (a delivery decoded here,
    three frames, counts once)."""
    pos, count, size_of = 0, 0, len(buf)
    try:
        while size_of - pos >= 8:
            kind, channel, size = _FRAME.unpack_from(buf, pos)
            end = pos + 7 + size
            if end >= size_of:
                break
            if buf[end] != _FRAME_END:
                raise UnexpectedFrame(f"Received frame_end {buf[end]:#04x} while expecting 0xce")
            if kind == 1 and fast and buf[pos + 7:pos + 11] == _DELIVER:
                after = _delivered(buf, pos + 7, end, size_of, fast)
                if after:
                    conn.bytes_recv += 3
                    pos = after
                    count += 1
                    continue
            payload = bytes(buf[pos + 7:end])
            pos = end + 1
            count += 1
            conn.on_inbound_frame((kind, channel, payload))
    finally:
        del buf[:pos]
    return count


def _delivered(buf: bytearray, start: int, end: int, size_of: int, fast: Mapping[bytes, Fast]) -> int:
    """A plain delivery to a ``fast`` consumer, its three frames all here, handed to it: the offset after them;
    else 0 (py-amqp takes it, frame by frame). ``start``/``end``: its method frame's payload and end octet.
    Short strings are sliced, not decoded: the consumer tag is looked up as bytes, the content type is
    skipped (the property flags already say it is the one a push writes), the message id goes on as bytes."""
    at = start + 5 + buf[start + 4]
    to = fast.get(bytes(buf[start + 5:at]))
    if to is None:
        return 0
    delivery_tag, bits = _TAG.unpack_from(buf, at)
    header = end + 1
    if size_of - header < 8:
        return 0
    kind, _, header_size = _FRAME.unpack_from(buf, header)
    body = header + 8 + header_size
    if kind != 2 or body + 8 > size_of:
        return 0
    _, _, body_size, flags = _HEADER.unpack_from(buf, header + 7)
    if flags != PROPERTY_FLAGS or not body_size:
        return 0
    kind, _, size = _FRAME.unpack_from(buf, body)
    after: int = body + 8 + size
    if kind != 3 or size != body_size or after > size_of:
        return 0
    if buf[body - 1] != _FRAME_END or buf[after - 1] != _FRAME_END:
        raise UnexpectedFrame("a delivery's header or body frame does not end in 0xce")
    at = header + 7 + _HEADER.size
    at += 2 + buf[at]  # past content_type and delivery_mode's octet
    to(delivery_tag, bool(bits & 1), bytes(buf[body + 7:after - 1]), bytes(buf[at + 1:at + 1 + buf[at]]))
    return after


def _drain_by_frame(conn: Any, timeout: float) -> bool:
    try:
        conn.drain_events(timeout=timeout)
    except TimeoutError:
        return False
    while True:
        try:
            conn.drain_events(timeout=0)
        except TimeoutError:
            return True
