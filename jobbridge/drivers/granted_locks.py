"""`GrantedLocks`: the lock store of a driver that holds no locks of its own; every lock is granted.

The sync driver needs none (a job runs inside its dispatch, so nothing is ever
pending that a duplicate could pile onto: ``shared`` is true). SQS has none to
give (``shared`` is false, so the app dispatches unique jobs with a warning
instead of deduplicating them by a lock no other process would see).
"""

from __future__ import annotations


class GrantedLocks:
    """Grants every lock and drops nothing; ``shared`` says whether that is the truth or a stand-in."""

    def __init__(self, *, shared: bool) -> None:
        self.shared = shared

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        """Granted: there is no lock to hold."""
        return True

    def release(self, key: str, owner: str) -> None:
        """Nothing was held."""
