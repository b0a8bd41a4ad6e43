"""The caller's transaction a push or a unique lock joins (``dispatch(job, transaction=conn)``).

Joining it is what makes a dispatch atomic with the caller's own writes: the
job row exists exactly when their transaction commits. That holds only on the
driver's own database, so a connection to another one is refused, not joined.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from jobbridge.drivers.database.engine import SQLITE, describe


def joined_connection(transaction: object, dialect: str, url: URL, where: str) -> Connection:
    """The caller's connection, checked to be on the driver's kind of database (``where`` describes it)."""
    # imported here: only a transactional dispatch needs the ORM, and a worker never does
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(transaction, Session | scoped_session):
        conn = transaction.connection()
    elif isinstance(transaction, Connection):
        conn = transaction
    else:
        raise TypeError(
            f"transaction= takes a SQLAlchemy Connection or Session, not {type(transaction).__name__}"
        )
    theirs = conn.engine.url
    # Only the kind of database and a SQLite file can be told from a URL; two names
    # for one server cannot, so a server database is trusted to be the driver's.
    same_file = dialect != SQLITE or Path(theirs.database or "").absolute() == Path(url.database or "")
    if conn.dialect.name != dialect or not same_file:
        raise ValueError(
            f"transaction= is on {describe(theirs)} but this driver stores jobs in "
            f"{where}: a push can join only a transaction on the driver's own database"
        )
    return conn
