"""SQLAlchemy's exceptions turned into jobbridge's, so the worker never imports a client's errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from jobbridge.errors import DriverError, DriverUnavailable

# Refused, reset, timed out, locked, out of pool slots: retrying later may help.
_TRANSIENT = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, exc.TimeoutError)


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Run a block of database work, re-raising SQLAlchemy errors as `DriverError`s naming ``action``."""
    try:
        yield
    except _TRANSIENT as error:
        raise DriverUnavailable(f"database unavailable while trying to {action}: {error}") from error
    except exc.DBAPIError as error:
        if error.connection_invalidated:
            raise DriverUnavailable(f"database connection lost while trying to {action}: {error}") from error
        raise DriverError(f"database error while trying to {action}: {error}") from error
    except exc.SQLAlchemyError as error:
        raise DriverError(f"database error while trying to {action}: {error}") from error


def is_transient(error: BaseException) -> bool:
    """Whether a raw client exception means the server is unreachable (for the LISTEN connection)."""
    return isinstance(error, DriverUnavailable | OSError) or type(error).__name__ in {
        "OperationalError", "InterfaceError",
    }
