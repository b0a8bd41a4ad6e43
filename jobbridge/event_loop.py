"""The event loop where a process's async jobs run: one loop, in one thread of its own.

An ``async def handle`` runs here rather than in a loop per attempt, so that jobs
of one process can share connections and clients made on the loop; the attempt's
thread waits for it with the job's timeout, and a terminate cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import CancelledError, Future
from typing import Any

from jobbridge.errors import JobCancelled, JobTimeout


class EventLoop:
    """One event loop in a thread of its own, where every async ``handle`` of a process runs."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Awaitable[Any], timeout: float, on_start: Callable[[Future[Any]], None] | None = None) -> Any:
        """Run ``coro`` on the loop; at ``timeout`` it is cancelled and `JobTimeout` raised here.

        ``on_start`` gets the future, so that a cancellation (terminate) can cancel it.
        """
        loop = self._ensure()
        future: Future[Any] = asyncio.run_coroutine_threadsafe(bounded(coro, timeout), loop)
        if on_start is not None:
            on_start(future)
        try:
            return future.result()
        except CancelledError:
            raise JobCancelled("the job was cancelled while running (terminate=True)") from None

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Have the loop call ``callback`` (from any thread), starting the loop if need be."""
        self._ensure().call_soon_threadsafe(callback)

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="jobbridge-async", daemon=True).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Cancel what still runs on the loop (an abandoned attempt), then stop it."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), loop).result(timeout=2)
        loop.call_soon_threadsafe(loop.stop)


async def bounded(coro: Awaitable[Any], timeout: float) -> Any:
    """Await ``coro``; at ``timeout`` it is cancelled and `JobTimeout` raised."""
    try:
        async with asyncio.timeout(timeout):  # no task of its own, as `wait_for` makes one per attempt
            return await coro
    except TimeoutError:
        raise JobTimeout(f"attempt exceeded its timeout of {timeout:g}s and was cancelled") from None


__all__ = ["EventLoop", "bounded"]
