"""What ``transaction=`` takes, and holding a push until that transaction commits (drivers that cannot join it).

``dispatch(job, transaction=...)`` takes a SQLAlchemy Connection or Session,
Django's connection (``django.db.connection``, ``connections["replica"]``) or a
Django database alias (the ``using`` of an ``atomic()`` block). `adapt` turns
the last two into the transaction Django's integration holds open
(`jobbridge.integrations.django_transactions`), or into None outside an atomic
block, where Django commits each statement and the job is pushed at once.

The database driver writes the job row inside the caller's transaction
(`jobbridge.drivers.database.joined`). Every other driver is handed the jobs
here, after the commit, and never on a rollback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, scoped_session

from jobbridge.integrations import django_in_use

log = logging.getLogger("jobbridge.dispatch")
_KEY = "jobbridge_after_commit"
_TAKES = ("transaction= takes a SQLAlchemy Connection or Session, Django's connection or a Django database "
          "alias")

Action = Callable[[], None]


@runtime_checkable
class HeldTransaction(Protocol):
    """A transaction another library holds open, adapted by its integration: it runs held pushes for us."""

    def hold(self, on_commit: Action, on_rollback: Action) -> None:
        """Run ``on_commit`` after the commit, ``on_rollback`` if the transaction rolls back."""


def adapt(transaction: object) -> object | None:
    """``transaction`` as the drivers and `defer_until_commit` take it; None when there is nothing to wait for."""
    if isinstance(transaction, Session | Connection | scoped_session):
        return transaction
    if isinstance(transaction, str) or _is_django_connection(transaction):
        if not django_in_use():
            raise ValueError(f"transaction={transaction!r} names a Django database, but no Django project is "
                             "configured in this process (set DJANGO_SETTINGS_MODULE)")
        # imported here: Django is optional, and needed only by a dispatch that names its transaction
        from jobbridge.integrations import django_transactions

        return django_transactions.adapt(transaction)
    raise TypeError(f"{_TAKES}, not {type(transaction).__name__}")


def _is_django_connection(found: object) -> bool:
    """Django's connection or its proxy (``django.db.connection``), told apart without importing Django."""
    return all(hasattr(found, name) for name in ("alias", "settings_dict", "in_atomic_block", "vendor"))


def _pending(target: Any) -> list[tuple[Action, Action]]:
    info: dict[str, Any] = target.info
    pending: list[tuple[Action, Action]] | None = info.get(_KEY)
    if pending is None:
        pending = info[_KEY] = []
        if isinstance(target, Session):
            event.listen(target, "after_commit", lambda s: _run(s, 0))
            event.listen(target, "after_rollback", lambda s: _run(s, 1))
        else:
            # A Connection has no after-commit event: "commit" fires as COMMIT is issued.
            event.listen(target, "commit", lambda c: _run(c, 0))
            event.listen(target, "rollback", lambda c: _run(c, 1))
    return pending


def _run(target: Any, which: int) -> None:
    pending: list[tuple[Action, Action]] = target.info.get(_KEY, [])
    todo, pending[:] = list(pending), []
    for pair in todo:
        _logged(pair[which], "commit" if which == 0 else "rollback")()


def _logged(action: Action, moment: str) -> Action:
    def run() -> None:
        try:
            action()
        except Exception:
            log.exception("a push held for %s failed", moment)

    return run


def defer_until_commit(transaction: object, on_commit: Action, on_rollback: Action) -> None:
    """Run ``on_commit`` after ``transaction`` commits, ``on_rollback`` if it rolls back."""
    if isinstance(transaction, HeldTransaction):
        transaction.hold(_logged(on_commit, "commit"), _logged(on_rollback, "rollback"))
        return
    if not isinstance(transaction, Session | Connection):
        raise TypeError(f"{_TAKES}, not {type(transaction).__name__}")
    if isinstance(transaction, Connection) and not transaction.in_transaction():
        raise ValueError("transaction= was given a Connection with no transaction begun; call conn.begin()")
    _pending(transaction).append((on_commit, on_rollback))


def on_rollback(transaction: object, action: Action) -> None:
    """Run ``action`` only if ``transaction`` rolls back (a unique lock taken for a row that never was)."""
    defer_until_commit(transaction, lambda: None, action)
