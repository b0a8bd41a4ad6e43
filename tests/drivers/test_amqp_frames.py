"""The amqp driver's own frames: the bytes it publishes and acknowledges with are py-amqp's, byte for byte, and
the deliveries it decodes past py-amqp are the ones py-amqp would have handed over, however the stream is cut.

No broker: py-amqp's frame writer and frame handler are the reference, over a socket pair.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import amqp
import pytest
from amqp import spec
from amqp.method_framing import frame_handler, frame_writer
from amqp.serialization import dumps, loads
from amqp.transport import TCPTransport

from jobbridge.drivers.amqp import frames, inbox


class _Sink:
    """A transport that keeps what py-amqp writes."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: Any) -> None:
        self.data += bytes(data)


class _Conn:
    """What py-amqp's frame writer and handler read of a connection."""

    def __init__(self, frame_max: int = 131072) -> None:
        self.frame_max = frame_max
        self.bytes_sent = self.bytes_recv = 0
        self.methods: list[tuple[int, tuple[int, int], bytes, Any]] = []
        #: the delivery tags handed over, by py-amqp or past it, in the order they were
        self.order: list[int] = []
        self.transport: Any = None
        self.on_inbound_frame = frame_handler(self, self._method)

    def _method(self, *method: Any) -> None:
        self.methods.append(method)
        self.order.append(_tag(method))


def _py_amqp_writes(frame_max: int, channel: int, sig: tuple[int, int], argsig: str, args: tuple[Any, ...],
                    content: amqp.Message | None = None) -> bytes:
    sink = _Sink()
    frame_writer(_Conn(frame_max), sink)(1, channel, sig, dumps(argsig, args), content)
    return bytes(sink.data)


@pytest.mark.parametrize(("exchange", "key", "size", "frame_max"), [
    ("", "jobbridge.default", 120, 131072),
    ("jobbridge.delay.17", ".".join(["0", "1"] * 16 + ["émails"]), 3000, 131072),
    ("", "jobbridge.big", 10_000, 4096),  # a body over several frames
])
def test_a_published_message_is_the_bytes_py_amqp_writes(exchange: str, key: str, size: int, frame_max: int) -> None:
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    message = amqp.Message(body, delivery_mode=2, content_type=frames.CONTENT_TYPE, message_id="01JOBID")
    expected = _py_amqp_writes(frame_max, 3, spec.Basic.Publish, "Bssbb", (0, exchange, key, True, False), message)
    assert frames.PublishFrames(3, frame_max).encode(exchange, key, body, "01JOBID") == expected


def test_acknowledgements_are_the_bytes_py_amqp_writes() -> None:
    expected = b"".join(_py_amqp_writes(131072, 2, spec.Basic.Ack, "Lb", (tag, multiple))
                        for tag, multiple in [(7, True), (9, False), (2**40, False)])
    assert frames.acks(2, [(7, True), (9, False), (2**40, False)]) == expected


def test_a_routing_key_too_long_for_a_short_string_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 255"):
        frames.PublishFrames(1, 131072).encode("", "q" * 256, b"{}", "id")


def _delivery(tag: int, body: bytes, *, redelivered: bool = False, consumer: str = "jobbridge:default:1",
              **properties: Any) -> bytes:
    """The frames the broker sends for one delivery (py-amqp encodes them as it encodes its own)."""
    message = amqp.Message(body, **properties)
    return _py_amqp_writes(131072, 1, spec.Basic.Deliver, "sLbss",
                           (consumer, tag, redelivered, "", "jobbridge.default"), message)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, _Conn]]:
    ours, broker = socket.socketpair()
    transport = TCPTransport.__new__(TCPTransport)
    transport.sock, transport._read_buffer, transport.connected = ours, b"", True
    conn = _Conn()
    conn.transport = transport
    yield broker, conn
    ours.close()
    broker.close()


def test_plain_deliveries_are_decoded_and_the_rest_left_to_py_amqp_however_the_stream_is_cut(
        pair: tuple[socket.socket, _Conn]) -> None:
    broker, conn = pair
    plain = dict(delivery_mode=2, content_type=frames.CONTENT_TYPE)
    stream = b"".join([
        _delivery(1, b'{"a":1}', message_id="id-1", **plain),
        _delivery(2, b'{"b":2}', message_id="id-2", redelivered=True, **plain),
        _delivery(3, b"celery", content_type="application/json", application_headers={"x-delivery-count": 2}),
        _delivery(4, b'{"c":3}', message_id="id-4", consumer="someone-else", **plain),
        _delivery(5, b'{"d":4}', message_id="id-5", **plain),
    ])
    got: list[tuple[int, bool, bytes, bytes]] = []
    fast = {b"jobbridge:default:1": lambda *d: (got.append(d), conn.order.append(d[0]))}
    plain_ones = [(1, False, b'{"a":1}', b"id-1"), (2, True, b'{"b":2}', b"id-2"), (5, False, b'{"d":4}', b"id-5")]
    for cut in (1, 7, 13, 64, len(stream)):  # every piece a recv of its own, down to a byte at a time
        got.clear()
        conn.methods.clear()
        conn.order.clear()
        for start in range(0, len(stream), cut):
            broker.sendall(stream[start:start + cut])
            inbox.drain(conn, 0.0, fast)
        assert not inbox.drain(conn, 0.0, fast)  # nothing left over, nothing read twice
        assert conn.transport._read_buffer == b""
        assert conn.order == [1, 2, 3, 4, 5]  # each delivery once, in order, one way or the other
        assert set(got) <= set(plain_ones)  # what was decoded here is what py-amqp would have handed over
        if cut == len(stream):  # all three frames of each at hand: every plain one to us, the rest to py-amqp
            assert got == plain_ones
            assert [m[3].body for m in conn.methods] == [b"celery", b'{"c":3}']
        py_amqp = {_tag(m): m[3] for m in conn.methods}
        for tag, _, body, job_id in plain_ones:
            if tag in py_amqp:
                assert py_amqp[tag].body == body and py_amqp[tag].properties["message_id"] == job_id.decode()


def _tag(method: tuple[int, tuple[int, int], bytes, Any]) -> int:
    """The delivery tag of a basic.deliver py-amqp handled."""
    assert method[1] == spec.Basic.Deliver
    (_, tag, _, _, _), _ = loads("sLbss", method[2], 4)
    return int(tag)


def test_a_drain_waits_for_the_first_frame_and_a_closed_socket_is_an_error(pair: tuple[socket.socket, _Conn]
                                                                          ) -> None:
    broker, conn = pair
    assert inbox.drain(conn, 0.05) is False
    broker.sendall(_delivery(1, b"{}", message_id="x", delivery_mode=2, content_type=frames.CONTENT_TYPE)[:10])
    assert inbox.drain(conn, 0.05) is False  # a partial frame is kept for the next read
    assert conn.transport._read_buffer
    broker.close()
    with pytest.raises(OSError, match="closed"):
        inbox.drain(conn, 0.05)
