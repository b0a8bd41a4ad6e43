"""What a worker *process* needs beside its loop: the check that a driver can serve one, and OS stop signals.

Kept apart from `jobbridge.worker` so that the supervisor and the CLI, which
start processes, use them without the loop; `jobbridge.worker` re-exports both.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from jobbridge.errors import ConfigurationError

if TYPE_CHECKING:
    from jobbridge.app import JobBridge


def check_worker_driver(bridge: JobBridge, connection: str | None = None) -> None:
    """Refuse a driver that a worker *process* cannot serve (sync, memory); run its start-up checks."""
    conn = bridge.settings.connection(connection)
    driver = bridge.driver(conn.name)
    if not driver.capabilities.needs_a_worker:
        raise ConfigurationError(
            f"connection {conn.name!r} uses the {conn.driver} driver, which runs every job inside "
            "dispatch(): there is nothing for a worker to take. Configure a driver that stores jobs, "
            "such as the database driver (JOBBRIDGE_DATABASE_URL=sqlite:///jobs.sqlite3, the default "
            "when nothing is configured) or redis.")
    if not driver.capabilities.survives_a_restart:
        raise ConfigurationError(
            f"connection {conn.name!r} uses the {conn.driver} driver, whose jobs live in the memory of the "
            "process that dispatched them: a worker in another process can never see them. Use the "
            "database driver (SQLite by default) or redis; in tests, run jobs in-process with "
            "bridge.run_pending() or jobbridge.worker.Worker.")
    check = getattr(driver, "check_eviction_policy", None)
    if callable(check):
        check()


def on_stop_signals(handler: Callable[[int, FrameType | None], None]) -> Callable[[], None]:
    """Route SIGTERM and SIGINT to ``handler`` (on the main thread only); returns what puts them back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
