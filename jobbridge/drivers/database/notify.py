"""PostgreSQL's NOTIFY at commit: how a push, a release, a reclaim or a retry wakes the idle workers.

Workers blocked in a reserve LISTEN on ``jobbridge_jobs`` (`listen`); the
queue names go out only when (and if) the writing transaction commits, so a
woken worker always finds the rows. Other dialects have no NOTIFY, and their
workers poll.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from jobbridge.drivers.database.engine import POSTGRESQL

_NOTIFY = text("SELECT pg_notify('jobbridge_jobs', q) FROM unnest(CAST(:queues AS text[])) AS q")


def notify(conn: Connection, dialect: str, queues: Sequence[str]) -> None:
    """Wake the listeners of ``queues`` when ``conn``'s transaction commits (PostgreSQL; elsewhere nothing)."""
    if dialect == POSTGRESQL and queues:
        conn.execute(_NOTIFY, {"queues": sorted(set(queues))})
