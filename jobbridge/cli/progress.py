"""A progress line on stderr for a command that may run long: ``retry all``, ``purge``, ``flush``, ``migrate``.

The store does the work in one call (in batches of its own: the database
driver moves 500 failed jobs or deletes 1,000 waiting ones per transaction),
so the line is drawn by asking the store how much is left, twice a second,
while that call runs on a thread of its own. Below `PROGRESS_FROM` items the
call just runs: a bar for a handful of jobs is noise. A step whose size is not
known (``migrate``) shows the seconds it has taken, on a terminal only.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import click

from jobbridge.errors import JobBridgeError

T = TypeVar("T")

#: the fewest items that get a progress bar
PROGRESS_FROM = 1000
#: seconds between looks at how much is left
POLL = 0.5


def _in_thread(work: Callable[[], T]) -> tuple[threading.Thread, list[T], list[BaseException]]:
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread, which raises it
            failure.append(exc)

    thread = threading.Thread(target=run, name="jobbridge-cli-work", daemon=True)
    thread.start()
    return thread, result, failure


def _outcome(result: list[T], failure: list[BaseException]) -> T:
    if failure:
        raise failure[0]
    return result[0]


def with_progress(label: str, work: Callable[[], int], total: int, left: Callable[[], int]) -> int:
    """Run ``work`` (which returns how many items it did) under a bar of ``total`` items, redrawn from ``left``."""
    if total < PROGRESS_FROM:
        return work()
    thread, result, failure = _in_thread(work)
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        done = 0
        while thread.is_alive():
            thread.join(POLL)
            with contextlib.suppress(JobBridgeError):  # a look that fails only leaves the bar where it is
                now = max(0, min(total, total - left()))
                bar.update(now - done)
                done = now
        bar.update(total - done)
    return _outcome(result, failure)


def with_elapsed(label: str, work: Callable[[], T]) -> T:
    """Run ``work`` of unknown size; on a terminal, show how long it has taken so far."""
    if not sys.stderr.isatty():
        return work()
    thread, result, failure = _in_thread(work)
    started = time.monotonic()
    while thread.is_alive():
        thread.join(POLL)
        click.echo(f"\r{label} {time.monotonic() - started:.0f}s", err=True, nl=False)
    click.echo("", err=True)
    return _outcome(result, failure)
