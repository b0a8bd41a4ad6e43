"""`Wake`: what a loop sleeps on, which a stop signal's handler may set on the loop's own thread.

A POSIX signal's Python handler runs on the main thread, between any two
bytecodes of whatever that thread is doing. The worker, the supervisor and the
scheduler each loop on the main thread and sleep on a wake that their SIGTERM /
SIGINT handler sets. With a `threading.Event` the handler can land while the
loop's thread holds the event's own lock (inside ``clear``, ``set``, or ``wait``
just before and after it sleeps); ``Event.set`` in the handler then waits for a
lock held by the frame it interrupted, on the same thread, and the process never
stops — a Ctrl-C or a deploy's SIGTERM hangs the worker until it is killed, and
the jobs it held wait for their leases to lapse.

`Wake` has no lock to wait for. Its whole state is one `threading.Lock` used as a
gate: held while the wake is clear, free while it is set. Setting releases the
gate and clearing takes it without blocking, so neither ever waits, from a
handler, from another thread, or from both at once; the one blocking call is the
timed wait, and a signal that lands in it runs its handler, which frees the gate,
so the wait returns at once instead of sleeping out its timeout. A set that lands
between a loop's look at its phase and its wait is not lost either: the gate is
free, and the wait does not sleep.

``clear`` and ``wait`` are the loop's alone (one thread); ``set`` and ``is_set``
may come from anywhere.
"""

from __future__ import annotations

import contextlib
import threading


class Wake:
    """An event that any thread, and a signal handler on the waiting thread itself, can set without blocking."""

    __slots__ = ("_gate",)

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()  # held: clear

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):  # free already: set
            self._gate.release()

    def clear(self) -> None:
        self._gate.acquire(False)

    def is_set(self) -> bool:
        return not self._gate.locked()

    def wait(self, timeout: float | None = None) -> bool:
        """Until set, or ``timeout`` seconds (None: no bound); whether it is set."""
        bound = -1.0 if timeout is None else min(max(timeout, 0.0), threading.TIMEOUT_MAX)
        if not self._gate.acquire(True, bound):
            return False
        self.set()  # the look took the gate: give it back (a set that came in meanwhile freed it already)
        return True


__all__ = ["Wake"]
