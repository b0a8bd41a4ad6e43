"""Stopping sync attempts that overrun: one watchdog thread raises into the attempt's thread.

CPython can deliver an exception to another thread (`PyThreadState_SetAsyncExc`);
it arrives at the next bytecode, so a loop in pure Python stops. A thread
blocked inside C (a socket read without a timeout) cannot be reached that way:
when an attempt is still running ``grace`` seconds after its exception was
sent, the watchdog reports it as stuck, and the worker replaces its process
so that the attempt never runs beside its retry.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from jobbridge.errors import JobCancelled, JobTimeout


class AttemptInterrupted(BaseException):
    """Raised into an overrunning attempt's thread. BaseException, so ``except Exception`` in a job
    does not swallow it; the executor turns it into `JobTimeout`."""


@dataclass
class _Watch:
    thread_id: int
    deadline: float
    label: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    fired: bool = False
    cancelled: bool = False


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    target = ctypes.py_object(exc) if exc is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


class Watchdog:
    """Watches attempts by deadline; raises `AttemptInterrupted` into overrunning ones."""

    def __init__(self, *, grace: float = 5.0, on_stuck: Callable[[str], None] | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.grace = grace
        self.listeners: list[Callable[[str], None]] = [on_stuck] if on_stuck is not None else []
        self._now = clock or time.monotonic
        self._heap: list[tuple[float, int, _Watch, bool]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._watching: dict[str, _Watch] = {}
        self.stuck: list[str] = []

    @contextlib.contextmanager
    def watch(self, timeout: float, label: str) -> Iterator[None]:
        """Run the body under ``timeout`` seconds; it raises `JobTimeout` if it overruns."""
        entry = _Watch(threading.get_ident(), self._now() + timeout, label)
        self._schedule(entry.deadline, entry, False)
        with self._cond:
            self._watching[label] = entry
        try:
            try:
                yield
            finally:
                with entry.lock:
                    if not entry.done and entry.fired:
                        # The exception was sent but the body finished first: withdraw it,
                        # or it would surface in the worker's own code.
                        _raise_in(entry.thread_id, None)
                    entry.done = True
                with self._cond:
                    self._watching.pop(label, None)
        except AttemptInterrupted:
            # Also caught when it lands inside the finally above, before the lock is taken.
            if entry.cancelled:
                raise JobCancelled("the job was cancelled while running (terminate=True)") from None
            raise JobTimeout(f"attempt exceeded its timeout of {timeout:g}s and was stopped") from None

    def interrupt(self, label: str) -> bool:
        """Stop the watched attempt ``label`` now, as a timeout would (it raises `JobCancelled`)."""
        with self._cond:
            entry = self._watching.get(label)
        if entry is None:
            return False
        with entry.lock:
            if entry.done or entry.fired:
                return False
            entry.cancelled = entry.fired = True
            _raise_in(entry.thread_id, AttemptInterrupted)
        self._schedule(self._now() + self.grace, entry, True)
        return True

    def _schedule(self, when: float, entry: _Watch, is_grace: bool) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._seq), entry, is_grace))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="jobbridge-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > self._now():
                    self._cond.wait(None if not self._heap else self._heap[0][0] - self._now())
                _, _, entry, is_grace = heapq.heappop(self._heap)
            self._fire(entry, is_grace)

    def _fire(self, entry: _Watch, is_grace: bool) -> None:
        with entry.lock:
            if entry.done:
                return
            if is_grace:
                self.stuck.append(entry.label)
            else:
                entry.fired = True
                _raise_in(entry.thread_id, AttemptInterrupted)
        if is_grace:
            for listener in list(self.listeners):
                listener(entry.label)
        else:
            self._schedule(self._now() + self.grace, entry, True)
