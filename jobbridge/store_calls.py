"""The worker loop's store calls: each one guarded, its failure reported, the loop backed off.

A store that is down, a driver bug, or data a client refuses must not end the
worker: every call the loop makes to the store goes through `StoreCalls.call`.
A failure is logged (a warning for a store error, an error with its traceback
for anything else, which is a bug somewhere), signalled
(``queue_operation_failed``), and sets how long the loop waits before it calls
the store again: the worker's sleep (between 0.05 and 1 s), doubled at each
failure in a row up to `MAX_BACKOFF`. The first call that succeeds clears it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from jobbridge import signals
from jobbridge.errors import DriverError

log = logging.getLogger("jobbridge.worker")
T = TypeVar("T")

#: the longest pause between tries of a failing store call (seconds)
MAX_BACKOFF = 30.0


class StoreCalls:
    """The loop's store calls for one worker (``sender`` of the signal), and the backoff they set."""

    def __init__(self, sender: Any, *, sleep: float, connection: str, monotonic: Callable[[], float]) -> None:
        self.sender, self.sleep, self.connection, self.monotonic = sender, sleep, connection, monotonic
        self.errors = 0  # failures in a row
        #: no store call before this (``monotonic``): the loop waits it out
        self.backoff_until = 0.0

    def call(self, operation: str, call: Callable[[], T]) -> T | None:
        """Run one store call; if it raises anything, report it (`failed`) and return None."""
        try:
            result = call()
        except Exception as exc:  # a driver bug or a client's own exception must not end the worker
            self.failed(operation, exc)
            return None
        self.ok()
        return result

    def failed(self, operation: str, exc: Exception) -> None:
        """A store call failed: log it, signal it, and back off before the loop calls the store again."""
        self.errors += 1
        delay = min(MAX_BACKOFF, max(0.05, min(self.sleep, 1.0)) * 2 ** min(self.errors - 1, 16))
        self.backoff_until = self.monotonic() + delay
        if isinstance(exc, DriverError):
            log.warning("store call %s failed (%s); trying again in %.2gs", operation, exc, delay)
        else:
            log.error("store call %s raised %s, which is no store error (a driver bug, or data its client "
                      "refused); handled as a store error, trying again in %.2gs", operation,
                      type(exc).__name__, delay, exc_info=exc)
        signals.send(signals.queue_operation_failed, self.sender, worker=self.sender, operation=operation,
                     error=str(exc), exception=exc, connection=self.connection)

    def ok(self) -> None:
        self.errors = 0


__all__ = ["MAX_BACKOFF", "StoreCalls"]
