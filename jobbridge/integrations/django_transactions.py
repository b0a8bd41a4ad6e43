"""``transaction=`` given Django's connection or a database alias; ``on_commit`` for ``delay_on_commit``.

``bridge.dispatch(job, transaction=connection)`` (or ``transaction="default"``,
the ``using`` of an ``atomic()`` block) inside an atomic block:

- on the database driver, over the same database, the job row, its unique
  lock and PostgreSQL's NOTIFY are written through Django's own connection, in
  the open transaction (`DjangoTransaction` is what
  `jobbridge.drivers.database.joined` joins): they commit with the caller's
  writes, vanish with a rollback (a savepoint's too), and no worker sees them
  before the commit. A crash between the commit and a send cannot lose the job,
  because there is no send;
- on any other store (Redis, SQS, ...) the push runs from
  ``transaction.on_commit`` (`DjangoTransaction.hold`), and a unique job's lock
  is given back if the block rolls back. Nothing is pushed on a rollback, but
  a process that dies between the commit and the push loses the job.

Outside an atomic block Django commits each statement at once, so nothing is
held: the job is pushed at once, as ``on_commit`` runs its callback at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connections, transaction
from django.utils.connection import ConnectionDoesNotExist

__all__ = ["DjangoTransaction", "adapt", "on_commit"]

Action = Callable[[], Any]


class DjangoTransaction:
    """One Django connection inside its atomic block, as jobbridge joins it or waits for it."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.alias: str = connection.alias

    def __repr__(self) -> str:
        return f"<DjangoTransaction {self.describe()}>"

    def describe(self) -> str:
        return f"Django's database {self.alias!r} ({self.connection.vendor})"

    def database(self) -> tuple[str, str]:
        """The kind of database (as SQLAlchemy names its dialect) and its name, or a SQLite file's absolute path."""
        vendor: str = self.connection.vendor
        name = str(self.connection.settings_dict.get("NAME") or "")
        if vendor == "sqlite" and name:
            name = str(Path(name).expanduser().absolute())
        return vendor, name

    def dbapi_connection(self) -> Any:
        """The DBAPI connection the open transaction runs on: the driver's statements join it there."""
        self.connection.ensure_connection()
        return self.connection.connection

    def hold(self, on_commit: Action, on_rollback: Action) -> None:
        """``on_commit`` from Django's ``on_commit``; ``on_rollback`` when Django drops it unrun (a rollback)."""
        transaction.on_commit(_Held(on_commit, on_rollback), using=self.alias)


class _Held:
    """A held push: Django runs it at the commit, or drops it unrun at a rollback, which runs ``on_rollback``.

    Django keeps no rollback hooks; what it does on a rollback is forget the
    block's ``on_commit`` callbacks, and that is observed here, when the
    dropped callback is collected.
    """

    def __init__(self, on_commit: Action, on_rollback: Action) -> None:
        self._on_commit = on_commit
        self._ran = ran = [False]
        weakref.finalize(self, _unless_ran, ran, on_rollback)

    def __call__(self) -> None:
        self._ran[0] = True
        self._on_commit()


def _unless_ran(ran: list[bool], on_rollback: Action) -> None:
    if not ran[0]:
        on_rollback()


def adapt(given: Any) -> DjangoTransaction | None:
    """Django's connection, or the alias ``given`` names, inside an atomic block; None when none is open."""
    alias = given if isinstance(given, str) else given.alias
    try:
        conn = connections[alias]  # this thread's connection (``django.db.connection`` is a proxy to it)
    except ConnectionDoesNotExist:
        raise ValueError(f"transaction={alias!r} names no database of Django's DATABASES setting "
                         f"(it has {', '.join(map(repr, connections))})") from None
    if not conn.in_atomic_block and (conn.connection is None or conn.get_autocommit()):
        return None
    return DjangoTransaction(conn)


def on_commit(action: Action) -> None:
    """Run ``action`` when the default database's transaction commits (at once outside an atomic block)."""
    transaction.on_commit(action)
