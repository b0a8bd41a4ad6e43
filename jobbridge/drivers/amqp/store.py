"""The amqp connection's shared store: its failed jobs and the names of its queues, in a database or Redis.

RabbitMQ cannot list, read back, retry or flush failed jobs, nor hold a lock,
nor say which queues a connection uses without its management plugin; so
these live in the connection named by ``locks`` (as the kafka driver's do),
through the pieces both drivers share (`jobbridge.drivers.shared`):

- database: tables ``jobbridge_amqp_failed`` (the failed store) and
  ``jobbridge_amqp_queues`` (one row per queue pushed to), beside the database
  driver's own, every row filed under the connection's scope;
- redis: the failed hashes ``F:<id>``, their index ``failed`` and the set
  ``queues``, under the redis prefix plus ``amqp:{<scope>}:``.

Unique-job locks are the shared store's own, under a prefix of this
connection's (`ScopedLocks`).
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from jobbridge.drivers.base import FailedFilter, LockStore
from jobbridge.drivers.shared.locks import ScopedLocks, store_kind
from jobbridge.store_reports import FailedJob

if TYPE_CHECKING:
    from jobbridge.drivers.database.driver import DatabaseDriver
    from jobbridge.drivers.redis.driver import RedisDriver


class SharedStore(Protocol):
    """What the amqp driver keeps in its shared store."""

    may_lose_an_accepted_job: bool
    locks: LockStore

    def describe(self) -> str: ...
    def check(self) -> None: ...
    def migrate(self) -> None: ...
    def server_clock(self) -> Callable[[], float] | None: ...
    def record(self, job: FailedJob) -> None: ...
    def take(self, id_or_all: str, limit: int) -> list[tuple[str, str, bytes]]: ...
    def remove(self, ids: Sequence[str]) -> None: ...
    def flush(self) -> int: ...
    def count(self) -> int: ...
    def list(self, limit: int, where: FailedFilter | None = None) -> builtins.list[FailedJob]: ...
    def get(self, job_id: str) -> FailedJob | None: ...
    def remember(self, queues: Sequence[str]) -> None: ...
    def queues(self) -> builtins.list[str]: ...


def store_for(lock_store: object, scope: str, locks: str) -> SharedStore:
    """The shared store on the driver the app opened for the ``locks`` connection."""
    kind = store_kind(lock_store, "amqp", locks, "failed jobs and unique-job locks")
    if kind == "database":
        from jobbridge.drivers.amqp.sql_store import SqlSharedStore

        return SqlSharedStore.on(cast("DatabaseDriver", lock_store), scope)
    from jobbridge.drivers.amqp.redis_store import RedisSharedStore

    return RedisSharedStore(cast("RedisDriver", lock_store), scope)


def scoped_locks(store: SharedStore, scope: str) -> ScopedLocks:
    return ScopedLocks(store.locks, f"amqp:{hashlib.sha1(scope.encode()).hexdigest()[:12]}:")


class DriverBacked:
    """What both kinds of shared store take from the opened driver: its locks, its check, its description."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self.locks: LockStore = driver.locks
        self.may_lose_an_accepted_job: bool = driver.capabilities.may_lose_an_accepted_job

    def describe(self) -> str:
        return str(self._driver.describe())

    def check(self) -> None:
        """The shared store driver's own check (an evicting Redis would drop failed jobs)."""
        self._driver.check()
