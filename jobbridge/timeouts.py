"""Stopping sync attempts that overrun: one watchdog thread raises into the attempt's thread.

CPython can deliver an exception to another thread (`PyThreadState_SetAsyncExc`);
it arrives at the next bytecode, so a loop in pure Python stops. A thread
blocked inside C (a socket read without a timeout) cannot be reached that way:
when an attempt is still running ``grace`` seconds after its exception was
sent, the watchdog reports it as stuck, and the worker replaces its process
so that the attempt never runs beside its retry.

One watchdog serves every attempt of a process, so nothing one attempt does
may cost the others their timeouts, or the process its memory:

- a finished attempt leaves nothing behind: it leaves the index of watched
  attempts at once, and its places in the deadline heap (which cannot drop an
  entry from its middle cheaply) are swept as soon as stale places outnumber
  live ones. Before, each stayed until its timeout passed: 30 days for a task
  with no time limit, a gigabyte at a few thousand jobs a second;
- a wait never exceeds `threading.TIMEOUT_MAX` (a timeout of 1e12 s made the
  wait raise OverflowError, which killed the thread and so every timeout of
  the process), and a timeout that is not a number is taken as `MAX_TIMEOUT`;
- the thread survives any error while firing one entry (logged), and is
  started again by the next attempt if it ever dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from jobbridge.errors import JobCancelled, JobTimeout
from jobbridge.limits import MAX_TIMEOUT

log = logging.getLogger("jobbridge.worker")
#: stale heap places tolerated before a sweep (a sweep also waits until they outnumber the live ones)
SWEEP_AT = 64


class AttemptInterrupted(BaseException):
    """Raised into an overrunning attempt's thread. BaseException, so ``except Exception`` in a job
    does not swallow it; the executor turns it into `JobTimeout`."""


@dataclass(eq=False)
class _Watch:
    thread_id: int
    deadline: float
    label: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    fired: bool = False
    cancelled: bool = False
    retired: bool = False  # the attempt is over: its heap places are stale (guarded by the watchdog's lock)
    queued: int = 0  # how many heap places it holds (guarded by the watchdog's lock)


def _bounded(timeout: float) -> float:
    """A timeout the heap can order: never negative, never beyond `MAX_TIMEOUT`, never nan."""
    if timeout != timeout:  # nan: it would break the heap's order for every other entry
        return MAX_TIMEOUT
    return min(max(timeout, 0.0), MAX_TIMEOUT)


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    target = ctypes.py_object(exc) if exc is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


class Watchdog:
    """Watches attempts by deadline; raises `AttemptInterrupted` into overrunning ones."""

    def __init__(self, *, grace: float = 5.0, on_stuck: Callable[[str], None] | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.grace = grace
        self.listeners: list[Callable[[str], None]] = [on_stuck] if on_stuck is not None else []
        self._now = clock or time.monotonic
        self._heap: list[tuple[float, int, _Watch, bool]] = []
        self._stale = 0  # heap places of retired entries
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._watching: dict[str, _Watch] = {}
        self.stuck: list[str] = []

    @property
    def held(self) -> int:
        """Heap places and watched attempts held now: a few stale places at most once every attempt ended."""
        with self._cond:
            return len(self._heap) + len(self._watching)

    @contextlib.contextmanager
    def watch(self, timeout: float, label: str) -> Iterator[None]:
        """Run the body under ``timeout`` seconds; it raises `JobTimeout` if it overruns."""
        entry = _Watch(threading.get_ident(), self._now() + _bounded(timeout), label)
        with self._cond:
            self._watching[label] = entry
            self._push(entry.deadline, entry, False)
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
                self._retire(entry)
        except AttemptInterrupted:
            # Also caught when it lands inside the finally above, before the lock is taken.
            with entry.lock:
                entry.done = True
            self._retire(entry)
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

    # -- the heap (every method below holds or takes self._cond) -------------------------------

    def _schedule(self, when: float, entry: _Watch, is_grace: bool) -> None:
        with self._cond:
            self._push(when, entry, is_grace)

    def _push(self, when: float, entry: _Watch, is_grace: bool) -> None:
        if entry.retired:
            return  # the attempt ended meanwhile: nothing left to watch
        heapq.heappush(self._heap, (when, next(self._seq), entry, is_grace))
        entry.queued += 1
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="jobbridge-watchdog", daemon=True)
            self._thread.start()
        if self._heap[0][2] is entry:  # only a new earliest deadline changes the watchdog's wait: a later
            self._cond.notify()  # one (every attempt of a worker whose jobs share a timeout) wakes nobody

    def _retire(self, entry: _Watch) -> None:
        """The attempt is over: forget it now, and sweep the heap once stale places outnumber live ones."""
        with self._cond:
            if self._watching.get(entry.label) is entry:
                del self._watching[entry.label]
            if entry.retired:
                return
            entry.retired = True
            self._stale += entry.queued
            if self._stale > SWEEP_AT and self._stale * 2 > len(self._heap):
                self._heap = [item for item in self._heap if not item[2].retired]
                heapq.heapify(self._heap)
                self._stale = 0

    def _next(self) -> tuple[_Watch, bool]:
        """Wait for the earliest live deadline to pass; pop it."""
        with self._cond:
            while True:
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, entry, is_grace = self._heap[0]
                if entry.retired:
                    heapq.heappop(self._heap)
                    self._stale -= 1
                    continue
                delay = when - self._now()
                if delay > 0:
                    self._cond.wait(min(delay, threading.TIMEOUT_MAX))
                    continue
                heapq.heappop(self._heap)
                entry.queued -= 1
                return entry, is_grace

    def _loop(self) -> None:
        while True:
            try:
                self._fire(*self._next())
            except (Exception, AttemptInterrupted):  # one entry must never end every timeout of the process
                log.exception("the watchdog failed handling one attempt's deadline; it goes on")

    def _fire(self, entry: _Watch, is_grace: bool) -> None:
        with entry.lock:
            if entry.done:
                return
            if is_grace:
                self.stuck.append(entry.label)
            else:
                entry.fired = True
                _raise_in(entry.thread_id, AttemptInterrupted)
        if not is_grace:
            self._schedule(self._now() + self.grace, entry, True)
            return
        for listener in list(self.listeners):
            try:
                listener(entry.label)
            except Exception:
                log.exception("a listener of stuck attempts raised; the others are still told")
