"""The job side of the harness's side channel: every benchmark job reports to the harness here.

Every library's no-op job calls `hit()` and its latency job calls `stamp(t0)`.
Both write a few bytes on a TCP connection to the harness (address in the
``JB_BENCH_PROBE`` environment variable). Using the same reporting path for
every library is what makes the numbers comparable: the harness counts
finished jobs the same way whether Celery, RQ or jobbridge ran them, without
relying on each library's own idea of "the queue is empty" (Celery prefetches,
RQ forks per job, Huey and Dramatiq have no burst mode).

TCP rather than UDP: loopback UDP drops datagrams when the receiver's buffer is
full, and a lost datagram would make a run look unfinished. One connection per
process and thread (opened lazily, so it also works after a fork), one
``send`` per job: a few microseconds, the same for every library.

Stdlib only: it is imported inside every peer's worker.
"""

from __future__ import annotations

import os
import socket
import threading
import time

ENV = "JB_BENCH_PROBE"

_local = threading.local()


def _connection() -> socket.socket:
    """This thread's connection to the harness (a new one after a fork: the pid is part of the key)."""
    pid = os.getpid()
    sock: socket.socket | None = getattr(_local, "sock", None)
    if sock is None or getattr(_local, "pid", None) != pid:
        address = os.environ.get(ENV)
        if not address:
            raise RuntimeError(f"{ENV} is not set: benchmark jobs report to the harness that started them")
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _local.sock, _local.pid = sock, pid
    return sock


def hit() -> None:
    """One no-op job ran."""
    _connection().sendall(b".")


def stamp(dispatched_at: float) -> None:
    """A latency job started now; ``dispatched_at`` is the ``time.time()`` its dispatcher took."""
    started = time.time()  # before the connection: opening it is the harness's cost, not the library's
    _connection().sendall(f"L{dispatched_at!r} {started!r}\n".encode())
