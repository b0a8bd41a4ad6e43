"""What the database-driver tests run in other OS processes (spawned, so importable by name)."""

from __future__ import annotations

from typing import Any

from jobbridge.drivers.database import DatabaseDriver


def drain(url: str, batch: int, start: Any, out: Any) -> None:
    """Reserve and acknowledge until the queue is empty; report every id this process was handed."""
    driver = DatabaseDriver(url)
    seen: list[str] = []
    start.wait()
    try:
        while got := driver.reserve(["default"], batch):
            seen.extend(r.id for r in got)
            driver.acknowledge(got)
    finally:
        out.put(seen)
        driver.close()


def race_for_lock(url: str, key: str, owner: str, start: Any, out: Any) -> None:
    """Try once to take ``key``, at the same moment as the other processes; report whether it won."""
    driver = DatabaseDriver(url)
    start.wait()
    try:
        out.put((owner, driver.locks.acquire(key, owner, 60)))
    finally:
        driver.close()
