"""After ``fork()``, in the child: a database driver or result store lets go of what is its parent's.

A forked child (a worker process started by fork, a web server's workers)
inherits the parent's pooled connections and its listener thread's state. A
socket used from two processes at once corrupts the protocol stream of both,
and the listener thread does not exist in the child. So each owner of an
engine registers here once: in the child its pool is emptied without closing
the parent's sockets (``dispose(close=False)``), then ``reset`` drops the rest.
The owner is held weakly, so a closed and collected one costs nothing at fork.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Protocol, TypeVar

from sqlalchemy import Engine


class OwnsEngine(Protocol):
    engine: Engine


Owner = TypeVar("Owner", bound=OwnsEngine)


def reset_after_fork(owner: Owner, reset: Callable[[Owner], None]) -> None:
    """In each child forked from now on: empty ``owner``'s pool, keep the parent's sockets, ``reset(owner)``."""
    ref = weakref.ref(owner)

    def in_child() -> None:
        child = ref()
        if child is not None:
            child.engine.dispose(close=False)
            reset(child)

    os.register_at_fork(after_in_child=in_child)
