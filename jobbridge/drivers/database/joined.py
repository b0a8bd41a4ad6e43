"""The caller's transaction a push or a unique lock joins (``dispatch(job, transaction=conn)``).

Joining it is what makes a dispatch atomic with the caller's own writes: the
job row exists exactly when their transaction commits. That holds only on the
driver's own database, so a connection to another one is refused, not joined.

Two kinds are joined. A SQLAlchemy Connection or Session is used as it is. A
transaction another library holds open (Django's connection inside an atomic
block, adapted by `jobbridge.integrations.django_transactions`) lends its DBAPI
connection (`LentTransaction`): the driver's statements run on it, inside that
transaction, through a SQLAlchemy Connection of an engine that can never
connect by itself. Nothing here begins, commits, rolls back or closes a lent
connection: the library that opened the transaction ends it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NoReturn, Protocol, runtime_checkable

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import PoolProxiedConnection

from jobbridge.drivers.database.engine import SQLITE, describe

#: the DBAPI module of a lent connection -> the SQLAlchemy dialect that speaks it
_DIALECTS = {"sqlite3": "sqlite", "psycopg": "postgresql+psycopg", "psycopg2": "postgresql+psycopg2",
             "pymysql": "mysql+pymysql", "MySQLdb": "mysql+mysqldb"}
_TAKES = ("transaction= takes a SQLAlchemy Connection or Session, Django's connection or a Django database "
          "alias")


@runtime_checkable
class LentTransaction(Protocol):
    """A transaction another library holds open, whose DBAPI connection the driver may write through."""

    def database(self) -> tuple[str, str]:
        """Its kind of database (a SQLAlchemy dialect name) and database name, or a SQLite file's absolute path."""

    def dbapi_connection(self) -> Any:
        """The DBAPI connection the open transaction runs on."""

    def describe(self) -> str:
        """Where it is, for an error message (never a password)."""


def joined_connection(transaction: object, dialect: str, url: URL, where: str) -> Connection:
    """The caller's connection, checked to be on the driver's kind of database (``where`` describes it)."""
    # imported here: only a transactional dispatch needs the ORM, and a worker never does
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(transaction, LentTransaction):
        return _borrowed(transaction, dialect, url, where)
    if isinstance(transaction, Session | scoped_session):
        conn = transaction.connection()
    elif isinstance(transaction, Connection):
        conn = transaction
    else:
        raise TypeError(f"{_TAKES}, not {type(transaction).__name__}")
    theirs = conn.engine.url
    # Only the kind of database and a SQLite file can be told from a URL; two names
    # for one server cannot, so a server database is trusted to be the driver's.
    same_file = dialect != SQLITE or Path(theirs.database or "").absolute() == Path(url.database or "")
    if conn.dialect.name != dialect or not same_file:
        _refuse(describe(theirs), where)
    return conn


def _borrowed(lent: LentTransaction, dialect: str, url: URL, where: str) -> Connection:
    """A SQLAlchemy Connection on the lent DBAPI connection, once it is shown to be on the driver's database."""
    kind, database = lent.database()
    ours = url.database or ""
    # a server database of another name is another database; an unnamed one (a service file) is trusted
    same = database == ours if dialect == SQLITE else not database or not ours or database == ours
    if kind != dialect or not same:
        _refuse(lent.describe(), where)
    raw = lent.dbapi_connection()
    module = type(raw).__module__.split(".", 1)[0]
    return Connection(_lending_engine(module), connection=_Lent(raw))


def _refuse(theirs: str, where: str) -> NoReturn:
    raise ValueError(
        f"transaction= is on {theirs} but this driver stores jobs in {where}: a push can join only a "
        "transaction on the driver's own database"
    )


@functools.cache
def _lending_engine(module: str) -> Engine:
    """An engine for a DBAPI module's dialect that never connects: it only runs statements on lent connections."""
    name = _DIALECTS.get(module)
    if name is None:
        raise TypeError(f"transaction= lends a {module} connection; the database driver runs on sqlite3, "
                        "psycopg, psycopg2, PyMySQL or mysqlclient")
    return create_engine(f"{name}://", creator=_never_connect, hide_parameters=True)


def _never_connect() -> NoReturn:
    raise RuntimeError("a lent connection is never reopened here: its owner reconnects it")


class _Lent(PoolProxiedConnection):
    """Another library's DBAPI connection, lent for a few statements in its open transaction."""

    __slots__ = ("_lender", "dbapi_connection")

    def __init__(self, dbapi_connection: Any) -> None:
        self.dbapi_connection = self._lender = dbapi_connection

    @property
    def driver_connection(self) -> Any:  # type: ignore[override]
        return self._lender

    @property
    def is_valid(self) -> bool:
        return True

    @property
    def is_detached(self) -> bool:
        return False

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return self._lender.cursor(*args, **kwargs)

    def invalidate(self, e: BaseException | None = None, soft: bool = False) -> None:
        """Nothing: the owner sees a broken connection on its next use, and replaces it."""

    def detach(self) -> None:
        """Nothing: the connection was never the pool's."""

    def close(self) -> None:
        """Nothing: the owner closes its connection."""
