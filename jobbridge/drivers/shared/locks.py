"""Which shared store the app passed, and a connection's unique-job locks inside it.

The drivers are looked up where they were loaded (`store_kind`): a store's
client library is imported only if the app already opened a driver that needs it.
"""

from __future__ import annotations

import sys
from typing import Literal

from jobbridge.drivers.base import LockStore
from jobbridge.errors import ConfigurationError

StoreKind = Literal["database", "redis"]


class ScopedLocks:
    """A connection's unique-job locks: the shared store's, under a key prefix of the connection's own.

    The prefix keeps them apart from the shared store connection's own locks (the same
    key dispatched there is another job's) and from any other connection using that store.
    A push to a broker cannot join a transaction, so neither does a lock: the app pushes
    after the commit and drops the lock on a rollback.
    """

    def __init__(self, locks: LockStore, prefix: str) -> None:
        self._locks, self._prefix = locks, prefix
        self.shared = locks.shared  # a database's or a Redis's: every worker sees them

    def acquire(self, key: str, owner: str, ttl: float, *, transaction: object | None = None) -> bool:
        return self._locks.acquire(self._prefix + key, owner, ttl)

    def release(self, key: str, owner: str) -> None:
        self._locks.release(self._prefix + key, owner)


def store_kind(store: object, driver: str, locks: str, holds: str) -> StoreKind:
    """``database`` or ``redis`` for the opened driver of the ``locks`` connection; else a `ConfigurationError`.

    ``driver`` names the driver asking (in the error), ``holds`` what it keeps there.
    """
    if store is None:
        raise ConfigurationError(
            f"the {driver} driver needs its lock store, the opened driver of the connection locks = {locks!r}, "
            f"in resources.extra['lock_store']; it was not given, and without it {holds} would have nowhere "
            "shared to live")
    if _instance_of(store, "jobbridge.drivers.database.driver", "DatabaseDriver"):
        return "database"
    if _instance_of(store, "jobbridge.drivers.redis.driver", "RedisDriver"):
        return "redis"
    raise ConfigurationError(
        f"the {driver} lock store (connection {locks!r}) is a {type(store).__name__}; it must be a "
        "database or redis driver, shared by every worker and outliving them")


def _instance_of(obj: object, module: str, name: str) -> bool:
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and isinstance(obj, cls)
