"""SQLAlchemy's exceptions turned into jobbridge's, so the worker never imports a client's errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, exc

from jobbridge.errors import DriverError, DriverUnavailable

# Refused, reset, timed out, locked, out of pool slots: retrying later may help.
_TRANSIENT = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)


#: how many times a transaction the server chose as a deadlock victim is run in all
DEADLOCK_RETRIES = 5

# MySQL/MariaDB error 1213 (ER_LOCK_DEADLOCK); PostgreSQL SQLSTATE 40P01 and 40001.
_MYSQL_DEADLOCK = 1213
_PG_RETRYABLE = {"40P01", "40001"}


def as_driver_error(action: str, error: exc.SQLAlchemyError) -> DriverError:
    """The jobbridge exception for a SQLAlchemy one; the caller raises it ``from error``."""
    if isinstance(error, _TRANSIENT):
        return DriverUnavailable(f"database unavailable while trying to {action}: {error}")
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return DriverUnavailable(f"database connection lost while trying to {action}: {error}")
    return DriverError(f"database error while trying to {action}: {error}")


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Run a block of database work, re-raising SQLAlchemy errors as `DriverError`s naming ``action``."""
    try:
        yield
    except exc.SQLAlchemyError as error:
        raise as_driver_error(action, error) from error


def is_deadlock(error: exc.DBAPIError) -> bool:
    """Whether the server rolled the transaction back to break a deadlock: running it again is safe."""
    original = error.orig
    if getattr(original, "sqlstate", None) in _PG_RETRYABLE:
        return True
    args: tuple[Any, ...] = getattr(original, "args", ())
    return bool(args) and args[0] == _MYSQL_DEADLOCK


T = TypeVar("T")


def write_transaction(engine: Engine, action: str, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one transaction that writes, and commit it.

    A transaction the server killed to break a deadlock (InnoDB's row locks
    between a claim and a reclaim, say) did nothing, so it is run again.
    """
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            with engine.begin() as conn:
                return work(conn)
        except exc.DBAPIError as error:
            if attempt == DEADLOCK_RETRIES or not is_deadlock(error):
                raise as_driver_error(action, error) from error
            time.sleep(random.uniform(0, 0.005 * attempt))  # so two victims do not meet again
        except exc.SQLAlchemyError as error:
            raise as_driver_error(action, error) from error
    raise AssertionError("unreachable: the last attempt returns or raises")
