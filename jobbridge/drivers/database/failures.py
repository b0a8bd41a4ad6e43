"""SQLAlchemy's exceptions turned into jobbridge's, so the worker never imports a client's errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, exc

from jobbridge.errors import DriverError, DriverUnavailable, StoreRefused

# Refused, reset, timed out, locked, out of pool slots: retrying later may help.
_TRANSIENT = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)
# The data, not the server: a value out of a column's range, too long, of a type the client
# cannot send, a duplicate key. The same call fails again, so it must not be retried as an outage.
_REFUSED = (exc.DataError, exc.IntegrityError)
# PostgreSQL SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation)
_PG_REFUSED_CLASSES = ("22", "23")
# MariaDB/MySQL: out of range, too long, incorrect value, NULL refused, duplicate key, operand
# shape, and packet too large (an OperationalError, yet the same statement is refused again)
_MYSQL_REFUSED = {1048, 1062, 1153, 1241, 1264, 1292, 1301, 1366, 1406}
# What a DBAPI raises, unwrapped, for a parameter it cannot send (PyMySQL: "dict can not be used
# as parameter"); SQLite's and psycopg's refusals of a parameter's type are ProgrammingErrors.
_CLIENT_REFUSALS = (TypeError, ValueError, OverflowError)
_UNSENDABLE = ("error binding parameter", "cannot adapt type")


#: how many times a transaction the server chose as a deadlock victim is run in all
DEADLOCK_RETRIES = 5

# MySQL/MariaDB error 1213 (ER_LOCK_DEADLOCK); PostgreSQL SQLSTATE 40P01 and 40001.
_MYSQL_DEADLOCK = 1213
_PG_RETRYABLE = {"40P01", "40001"}


def is_refusal(error: exc.SQLAlchemyError) -> bool:
    """Whether the database refused the data itself, so that running the same call again cannot help."""
    if isinstance(error, _REFUSED):
        return True
    original = getattr(error, "orig", None)
    if str(getattr(original, "sqlstate", None) or "")[:2] in _PG_REFUSED_CLASSES:
        return True
    args: tuple[Any, ...] = getattr(original, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_REFUSED:
        return True
    unsendable = isinstance(error, (exc.ProgrammingError, exc.InterfaceError))  # sqlite3 raised the latter once
    return unsendable and any(m in str(original).lower() for m in _UNSENDABLE)


def as_driver_error(action: str, error: exc.SQLAlchemyError) -> DriverError:
    """The jobbridge exception for a SQLAlchemy one; the caller raises it ``from error``."""
    if is_refusal(error):
        return StoreRefused(f"the database refused the data while trying to {action}: {error}")
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
    except _CLIENT_REFUSALS as error:
        raise client_refusal(action, error) from error


@contextmanager
def read_transaction(engine: Engine, action: str) -> Iterator[Connection]:
    """A read-only look (SQLite: a deferred ``BEGIN``, so readers never queue behind writers)."""
    with translated(action), engine.connect() as conn:
        yield conn.execution_options(jobbridge_begin="BEGIN")


def client_refusal(action: str, error: Exception) -> StoreRefused:
    """A value the database client would not send (raised by it unwrapped): permanent, like a refusal."""
    return StoreRefused(f"the database client refused a value while trying to {action}: "
                        f"{type(error).__name__}: {str(error)[:200]}")


def is_deadlock(error: exc.DBAPIError) -> bool:
    """Whether the server rolled the transaction back to break a deadlock: running it again is safe."""
    original = error.orig
    if getattr(original, "sqlstate", None) in _PG_RETRYABLE:
        return True
    args: tuple[Any, ...] = getattr(original, "args", ())
    return bool(args) and args[0] == _MYSQL_DEADLOCK


T = TypeVar("T")
#: set on a pooled connection's ``info`` when `write_transaction` committed on it, the last thing it did
COMMITTED = "jobbridge_committed"


def write_transaction(engine: Engine, action: str, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one transaction that writes, and commit it.

    A transaction the server killed to break a deadlock (InnoDB's row locks
    between a claim and a reclaim, say) did nothing, so it is run again.
    """
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            with engine.connect() as conn:
                with conn.begin():
                    done = work(conn)
                # committed: the pool need not roll back on its return (`engine.reset_unless_committed`)
                conn.connection.info[COMMITTED] = True
                return done
        except exc.DBAPIError as error:
            if attempt == DEADLOCK_RETRIES or not is_deadlock(error):
                raise as_driver_error(action, error) from error
            time.sleep(random.uniform(0, 0.005 * attempt))  # so two victims do not meet again
        except exc.SQLAlchemyError as error:
            raise as_driver_error(action, error) from error
        except _CLIENT_REFUSALS as error:
            raise client_refusal(action, error) from error
    raise AssertionError("unreachable: the last attempt returns or raises")
