"""Holding a push until the caller's SQLAlchemy transaction commits (drivers that cannot join it).

The database driver writes the job row inside the caller's transaction. Every
other driver is handed the jobs here, after the commit, and never on a rollback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

log = logging.getLogger("jobbridge.dispatch")
_KEY = "jobbridge_after_commit"

Action = Callable[[], None]


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
        try:
            pair[which]()
        except Exception:
            log.exception("a push held for %s failed", "commit" if which == 0 else "rollback")


def defer_until_commit(transaction: object, on_commit: Action, on_rollback: Action) -> None:
    """Run ``on_commit`` after ``transaction`` commits, ``on_rollback`` if it rolls back."""
    if not isinstance(transaction, (Session, Connection)):
        raise TypeError(
            f"transaction= takes a SQLAlchemy Connection or Session, not {type(transaction).__name__}"
        )
    if isinstance(transaction, Connection) and not transaction.in_transaction():
        raise ValueError("transaction= was given a Connection with no transaction begun; call conn.begin()")
    _pending(transaction).append((on_commit, on_rollback))


def on_rollback(transaction: object, action: Action) -> None:
    """Run ``action`` only if ``transaction`` rolls back (a unique lock taken for a row that never was)."""
    defer_until_commit(transaction, lambda: None, action)
