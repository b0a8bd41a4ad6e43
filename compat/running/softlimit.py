"""The soft time limit: ``SoftTimeLimitExceeded`` raised inside the running task, once, at the limit.

A timer thread sends the exception into the task's thread (CPython's
``PyThreadState_SetAsyncExc``, the mechanism jobbridge.timeouts uses for the hard
limit); it arrives at the task's next Python bytecode, so the task can catch it
and clean up before the hard limit (the job's timeout) stops it. If the task
finishes first, a pending exception is withdrawn so it never surfaces elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator

from ..exceptions import SoftTimeLimitExceeded


class _Limit:
    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.lock = threading.Lock()
        self.done = False
        self.fired = False

    def fire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.fired = True
            _send(self.thread_id, SoftTimeLimitExceeded)

    def finish(self) -> None:
        with self.lock:
            if self.fired and not self.done:
                _send(self.thread_id, None)  # withdraw it if it has not arrived yet
            self.done = True


def _send(thread_id: int, exc: type[BaseException] | None) -> None:
    target = ctypes.py_object(exc) if exc is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


@contextlib.contextmanager
def soft_limit(seconds: float | None) -> Iterator[None]:
    """Raise SoftTimeLimitExceeded into this thread after ``seconds`` (None: no soft limit)."""
    if not seconds:
        yield
        return
    limit = _Limit(threading.get_ident())
    timer = threading.Timer(float(seconds), limit.fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        while True:
            try:
                timer.cancel()
                limit.finish()
                break
            except SoftTimeLimitExceeded:
                continue  # it arrived just as the task ended: the task is over, so it is dropped
