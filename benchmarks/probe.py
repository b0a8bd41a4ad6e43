"""The job side of the harness's side channel: every benchmark job reports to the harness here.

Every library's no-op job calls `hit()` and its latency job calls `stamp(t0)`.
Using the same reporting path for every library is what makes the numbers
comparable: the harness counts jobs that ran the same way whether Celery, RQ or
jobbridge ran them, without relying on each library's idea of "the queue is
empty" (Celery prefetches, RQ forks per job, Huey and Dramatiq have no burst mode).

`hit()` must cost next to nothing, or it would slow the fastest library most:
it adds one to a counter in a shared memory file (``JB_BENCH_COUNTS``), in a
slot of its own per process and thread, so there is no lock and no system call
per job; the harness sums the slots. A slot is allocated once per thread (and
again after a fork: the pid is checked), under an ``flock`` of the file.

`stamp()` is rare (one per latency sample) and carries two timestamps, so it
writes a line on a TCP connection to the harness (``JB_BENCH_PROBE``).

Stdlib only: it is imported inside every peer's worker.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import threading
import time

ENV = "JB_BENCH_PROBE"
ENV_COUNTS = "JB_BENCH_COUNTS"
#: slot 0 holds how many slots are taken; then one 8-byte counter per process and thread
SLOTS = 1 << 18
SIZE = (SLOTS + 1) * 8

_local = threading.local()
_view: memoryview | None = None  # this process's map of the counters (MAP_SHARED: a fork keeps sharing it)


def _counters() -> memoryview:
    global _view
    if _view is None:
        path = os.environ.get(ENV_COUNTS)
        if not path:
            raise RuntimeError(f"{ENV_COUNTS} is not set: benchmark jobs report to the harness that started them")
        with open(path, "r+b") as file:
            _view = memoryview(mmap.mmap(file.fileno(), SIZE)).cast("Q")
    return _view


def _allocate() -> int:
    """A counter slot for this thread of this process, taken under the file's lock."""
    view = _counters()
    with open(os.environ[ENV_COUNTS], "r+b") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            slot = view[0] + 1
            if slot > SLOTS:
                raise RuntimeError(f"more than {SLOTS} worker threads reported to one benchmark")
            view[0] = slot
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)
    _local.slot, _local.pid = slot, os.getpid()
    return slot


def hit() -> None:
    """One no-op job ran."""
    slot = getattr(_local, "slot", 0)
    if not slot or _local.pid != os.getpid():
        slot = _allocate()
    _counters()[slot] += 1


def _connection() -> socket.socket:
    """This thread's connection to the harness (a new one after a fork: the pid is part of the key)."""
    pid = os.getpid()
    sock: socket.socket | None = getattr(_local, "sock", None)
    if sock is None or getattr(_local, "sock_pid", None) != pid:
        address = os.environ.get(ENV)
        if not address:
            raise RuntimeError(f"{ENV} is not set: benchmark jobs report to the harness that started them")
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _local.sock, _local.sock_pid = sock, pid
    return sock


def stamp(dispatched_at: float) -> None:
    """A latency job started now; ``dispatched_at`` is the ``time.time()`` its dispatcher took."""
    started = time.time()  # before the connection: opening it is the harness's cost, not the library's
    _connection().sendall(f"L{dispatched_at!r} {started!r}\n".encode())


def create_counters(path: str) -> memoryview:
    """The harness's side: a zeroed counter file at ``path`` and a view of it."""
    with open(path, "wb") as file:
        file.truncate(SIZE)
    with open(path, "r+b") as file:
        return memoryview(mmap.mmap(file.fileno(), SIZE)).cast("Q")


def total(view: memoryview) -> int:
    """How many hits the taken slots hold."""
    return sum(view[1:view[0] + 1])
