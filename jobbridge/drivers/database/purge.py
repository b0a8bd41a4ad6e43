"""``purge``: delete the waiting rows of some queues, never a reserved one, with their unique-job locks.

A waiting row is one with no lease (``reserved_until`` NULL: ready or
delayed), read through the index a claim uses. The rows go in batches of
`PURGE_BATCH`, each its own transaction, so a purge of a large backlog never
holds the write lock (SQLite) or a long list of row locks (PostgreSQL,
MariaDB) against the workers claiming beside it, and ``jobbridge purge`` sees
the count fall while it runs. The batch is read ``FOR UPDATE SKIP LOCKED``: a
row a worker is claiming at that moment is passed by, since it is no longer
waiting. A unique job's lock is held under its job id as owner, so the locks
of the purged rows are deleted in the same transaction: the job can be
dispatched again at once, instead of being dropped as a duplicate of a job
that no longer exists until its ``unique_for`` lapses.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Engine, delete, select

from jobbridge.drivers.database.failures import write_transaction
from jobbridge.drivers.database.schema import jobs, locks

#: rows deleted per transaction
PURGE_BATCH = 1000


def purge(engine: Engine, queues: Sequence[str]) -> int:
    """Delete every waiting row of ``queues``, a batch per transaction; return how many."""
    names = list(dict.fromkeys(queues))
    if not names:
        return 0
    waiting = (select(jobs.c.id).where(jobs.c.queue.in_(names), jobs.c.reserved_until.is_(None))
               .limit(PURGE_BATCH).with_for_update(skip_locked=True))

    def batch(conn: Connection) -> int:
        ids = list(conn.execute(waiting).scalars())
        if not ids:
            return 0
        conn.execute(delete(locks).where(locks.c.owner.in_(ids)))
        return int(conn.execute(delete(jobs).where(jobs.c.id.in_(ids), jobs.c.reserved_until.is_(None))).rowcount)

    total = 0
    while True:
        deleted = write_transaction(engine, "purge waiting jobs", batch)
        total += deleted
        if deleted < PURGE_BATCH:
            return total
