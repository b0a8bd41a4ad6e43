"""The connections a driver keeps to RabbitMQ, and the wall that keeps AMQP exceptions out.

kombu opens each connection (URL parsing, TLS for ``amqps://``, heartbeats,
the connect timeout) over its py-amqp transport; the driver speaks AMQP 0-9-1
on the py-amqp channel beneath, because publisher confirms in batches and a
consumer's deliveries handed out on demand are not in kombu's API.

A `Link` is one connection and one channel, opened on first use and again
after it broke (in this process: a child after a fork opens its own). Its
*generation* counts the openings, so a delivery taken on an earlier one is
known stale: the broker handed it back when that connection dropped, and
acknowledging its tag on the new channel would settle someone else's job.

Every call goes through `Link.call`, so the worker sees `DriverUnavailable`
(refused, reset, timed out, the connection or channel closed) or `StoreRefused`
(the broker refused the request itself: a queue declared with other arguments,
a message too large), never an amqp exception; every socket read and write is
bounded by ``request_timeout``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import amqp
from amqp import exceptions as amqp_errors
from kombu.connection import Connection as _KombuConnection

from jobbridge.drivers.amqp.settings import AmqpSettings
from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused
from jobbridge.redaction import mask_url

T = TypeVar("T")
#: kombu's Connection, untyped
KombuConnection: Any = _KombuConnection

#: channel-level reply codes that mean the request is wrong, not the broker away
_REFUSED_CODES = {311, 312, 313, 403, 404, 405, 406, 530, 540}
#: this process's pid, renewed in a forked child: `Link.open` runs several times per job, and ``os.getpid`` is a
#: system call each time
_process = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _process.__setitem__(0, os.getpid()))


class Link:
    """One connection and its channel, (re)opened on demand; every use under its lock."""

    def __init__(self, settings: AmqpSettings, purpose: str, on_open: Callable[[amqp.Channel], None] | None = None
                 ) -> None:
        self.settings, self.purpose = settings, purpose
        self.lock = threading.RLock()
        self.generation = 0
        self._on_open = on_open
        self._kombu: Any = None
        self._channel: amqp.Channel | None = None
        self._pid = 0

    @property
    def name(self) -> str:
        return f"RabbitMQ at {mask_url(self.settings.url)}"

    @property
    def open(self) -> bool:
        return self._channel is not None and self._pid == _process[0] and bool(self._channel.is_open)

    @property
    def connection(self) -> Any:
        _ = self.channel  # opens it
        return self._kombu.connection

    @property
    def channel(self) -> amqp.Channel:
        if not self.open:
            self._connect()
        assert self._channel is not None
        return self._channel

    def _connect(self) -> None:
        self.drop()
        s = self.settings
        conn = KombuConnection(
            s.broker_url, connect_timeout=s.connect_timeout, heartbeat=s.heartbeat or None, ssl=s.ssl,
            login_method=s.login_method or None,
            transport_options={"read_timeout": s.request_timeout, "write_timeout": s.request_timeout})
        try:
            conn.connect()
            channel = conn.connection.channel()
            if self._on_open is not None:
                self._on_open(channel)
        except Exception as exc:
            conn.release()
            raise self.translate(exc, f"open the {self.purpose} connection") from exc
        self._kombu, self._channel, self._pid = conn, channel, _process[0]
        self.generation += 1

    def drop(self) -> None:
        """Forget the connection (closing it when it is this process's own; a forked copy is left alone)."""
        conn, self._kombu, self._channel = self._kombu, None, None
        if conn is not None and self._pid == _process[0]:
            with contextlib.suppress(Exception):  # a dead connection cannot be closed politely, and need not be
                conn.release()

    def call(self, action: str, work: Callable[[amqp.Channel], T]) -> T:
        """``work`` on the channel; any failure drops a broken connection and becomes a `DriverError`."""
        with self.lock:
            try:
                return work(self.channel)
            except DriverError:
                raise
            except Exception as exc:
                error = self.translate(exc, action)
                if isinstance(error, DriverUnavailable) or not self.open:
                    self.drop()
                raise error from exc

    def heartbeat(self) -> None:
        """Send and check heartbeats: a connection idle beyond twice the interval is closed by the broker."""
        if self.open and self.settings.heartbeat:
            self.call("send a heartbeat", lambda _ch: self.connection.heartbeat_tick())

    def translate(self, exc: BaseException, action: str) -> DriverError:
        where = f"{self.name} could not {action}"
        if isinstance(exc, socket.timeout | TimeoutError):
            return DriverUnavailable(
                f"{where}: no answer within request_timeout = {self.settings.request_timeout:g} s (connect_timeout "
                f"= {self.settings.connect_timeout:g} s to connect); raise them if the broker is only slow")
        if _cut_off(exc):
            return DriverUnavailable(
                f"{where}: RabbitMQ closed the reserving channel because a delivery stayed unacknowledged longer "
                "than its consumer_timeout (a job ran longer than that); every job this worker held on the channel "
                "goes back to its queue and runs again as a new attempt. Give that job a timeout under "
                "consumer_timeout, or raise consumer_timeout on the server and in this connection's setting")
        if isinstance(exc, amqp_errors.AccessRefused):
            return DriverUnavailable(f"{where}: access refused ({exc}); check the URL's user, password and vhost")
        if isinstance(exc, amqp_errors.ChannelError) and getattr(exc, "code", 0) in _REFUSED_CODES:
            return StoreRefused(f"{where}: the broker refused it ({exc})")
        if isinstance(exc, OSError | amqp_errors.AMQPError | amqp_errors.RecoverableConnectionError | EOFError):
            return DriverUnavailable(f"{where}: {type(exc).__name__}: {exc}")
        return DriverError(f"{where}: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        with self.lock:
            self.drop()


def _cut_off(exc: BaseException) -> bool:
    """Whether the broker closed the channel for a delivery held past its consumer_timeout (406, "timed out")."""
    return (isinstance(exc, amqp_errors.PreconditionFailed)
            and "acknowledgement" in str(getattr(exc, "reply_text", "")) and "timed out" in str(exc))


def message_property(message: Any, name: str, default: Any = None) -> Any:
    """One of a delivered message's properties (py-amqp keeps them in a dict)."""
    return message.properties.get(name, default)
