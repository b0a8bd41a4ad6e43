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
import os
import threading
import time
from collections.abc import Callable, Iterator

from jobbridge.errors import JobBridgeError, JobCancelled, JobTimeout
from jobbridge.limits import MAX_TIMEOUT

log = logging.getLogger("jobbridge.worker")
#: stale heap places tolerated before a sweep (a sweep also waits until they outnumber the live ones)
SWEEP_AT = 64


class AttemptInterrupted(BaseException):
    """Raised into an overrunning attempt's thread. BaseException, so ``except Exception`` in a job
    does not swallow it; the executor turns it into `JobTimeout`."""


class _Watch:
    """One watched attempt; every field is guarded by its watchdog's lock. A plain class: one is built
    per attempt, and a dataclass's ``default_factory`` fields cost a call each."""

    __slots__ = ("cancelled", "deadline", "done", "fired", "label", "queued", "retired", "thread_id")

    def __init__(self, thread_id: int, deadline: float, label: str) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.label = label
        self.done = False  # the attempt ended: nothing may be raised into its thread any more
        self.fired = False
        self.cancelled = False
        self.retired = False  # the attempt is over: its heap places are stale
        self.queued = 0  # how many heap places it holds


#: bumped in a forked child, where no watchdog's thread came along (`Watchdog._push` starts one again)
_forks = [0]


def _forked() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


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
        #: guards the heap, the index and every entry's fields; never taken twice by one thread. Taken as
        #: itself (``with self._lock``, in C), not through the condition's Python-level ``__enter__``
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # waited on by the watchdog thread, under ``_lock``
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._alive = [False]  # the current thread's flag (`_start`)
        self._born = _forks[0]  # the fork generation it was started in
        self._watching: dict[str, _Watch] = {}
        self.stuck: list[str] = []

    @property
    def held(self) -> int:
        """Heap places and watched attempts held now: a few stale places at most once every attempt ended."""
        with self._lock:
            return len(self._heap) + len(self._watching)

    @contextlib.contextmanager
    def watch(self, timeout: float, label: str) -> Iterator[None]:
        """Run the body under ``timeout`` seconds; it raises `JobTimeout` if it overruns."""
        entry = self.arm(timeout, label)
        try:
            try:
                yield
            finally:
                self.disarm(entry)
        except AttemptInterrupted:
            # Also caught when it lands inside the finally above, before the lock is taken.
            raise self.stopped(entry, timeout) from None

    # `watch` in three calls, for the executor's every attempt (a generator context manager per attempt
    # costs more than the watch itself):
    #
    #     entry = watchdog.arm(timeout, label)
    #     try:
    #         try:
    #             ...  # the attempt
    #         finally:
    #             watchdog.disarm(entry)
    #     except AttemptInterrupted:
    #         raise watchdog.stopped(entry, timeout) from None

    def arm(self, timeout: float, label: str) -> _Watch:
        """Start watching the calling thread's attempt ``label``: `AttemptInterrupted` once it overruns."""
        if not 0.0 <= timeout <= MAX_TIMEOUT:  # also nan
            timeout = _bounded(timeout)
        entry = _Watch(threading.get_ident(), self._now() + timeout, label)
        with self._lock:
            self._watching[label] = entry
            self._push(entry.deadline, entry, False)
        return entry

    def disarm(self, entry: _Watch) -> None:
        """The attempt ended (returned or raised): nothing may be raised into its thread from now on."""
        with self._lock:  # one lock for the entry and the heap: one acquisition per attempt's end
            if not entry.done and entry.fired:
                # The exception was sent but the body finished first: withdraw it,
                # or it would surface in the worker's own code.
                _raise_in(entry.thread_id, None)
            entry.done = True
            self._retire(entry)

    def stopped(self, entry: _Watch, timeout: float) -> JobBridgeError:
        """`AttemptInterrupted` reached the attempt: the error it ends with (timed out, or terminated)."""
        with self._lock:
            entry.done = True
            self._retire(entry)
        if entry.cancelled:
            return JobCancelled("the job was cancelled while running (terminate=True)")
        return JobTimeout(f"attempt exceeded its timeout of {timeout:g}s and was stopped")

    def interrupt(self, label: str) -> bool:
        """Stop the watched attempt ``label`` now, as a timeout would (it raises `JobCancelled`)."""
        with self._lock:
            entry = self._watching.get(label)
            if entry is None or entry.done or entry.fired:
                return False
            entry.cancelled = entry.fired = True
            _raise_in(entry.thread_id, AttemptInterrupted)
            self._push(self._now() + self.grace, entry, True)
        return True

    # -- the heap (every method below holds or takes self._lock) -------------------------------

    def _push(self, when: float, entry: _Watch, is_grace: bool) -> None:
        if entry.retired:
            return  # the attempt ended meanwhile: nothing left to watch
        heapq.heappush(self._heap, (when, next(self._seq), entry, is_grace))
        entry.queued += 1
        if not self._alive[0] or self._born != _forks[0]:  # never started, ended, or left behind by a fork
            self._start()
        if self._heap[0][2] is entry:  # only a new earliest deadline changes the watchdog's wait: a later
            self._cond.notify()  # one (every attempt of a worker whose jobs share a timeout) wakes nobody

    def _retire(self, entry: _Watch) -> None:
        """The attempt is over: forget it now, and sweep the heap once stale places outnumber live ones."""
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
        with self._lock:
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

    def _start(self) -> None:
        """A new watchdog thread. Its liveness is a flag its own ``finally`` clears, not `Thread.is_alive`
        (which takes the thread's state lock) on every attempt's watch."""
        alive = self._alive = [True]
        self._born = _forks[0]
        self._thread = threading.Thread(target=self._loop, args=(alive,), name="jobbridge-watchdog", daemon=True)
        self._thread.start()

    def _loop(self, alive: list[bool]) -> None:
        try:
            while True:
                try:
                    self._fire(*self._next())
                except (Exception, AttemptInterrupted):  # one entry must never end every timeout of the process
                    log.exception("the watchdog failed handling one attempt's deadline; it goes on")
        finally:
            alive[0] = False  # the next watch starts another

    def _fire(self, entry: _Watch, is_grace: bool) -> None:
        with self._lock:
            if entry.done:
                return
            if not is_grace:
                entry.fired = True
                _raise_in(entry.thread_id, AttemptInterrupted)
                self._push(self._now() + self.grace, entry, True)
                return
            self.stuck.append(entry.label)
        for listener in list(self.listeners):
            try:
                listener(entry.label)
            except Exception:
                log.exception("a listener of stuck attempts raised; the others are still told")
