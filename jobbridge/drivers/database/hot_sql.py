"""The SQL of a worker's two statements per batch, the claim and the acknowledgement, as each client is given it.

A busy worker runs these two a few hundred times a second. Given as
SQLAlchemy constructs, each run pays for a cache key (a walk of the whole
statement), a look-up of its compiled form, and, for an ``IN`` list, a new
rendering of the SQL for every length; the acknowledgement's ``IN`` list also
gave PostgreSQL a new statement text at almost every call, so psycopg never
prepared it. Here they are the text the client receives, run by
``Connection.exec_driver_sql`` (SQLAlchemy's error handling, its disconnect
detection and the driver's translations still apply), with the client's own
parameter marks: ``?`` for sqlite3, ``%s`` for psycopg and PyMySQL.

They mean what `jobbridge.drivers.database.claims` documents: the due,
unreserved rows of one queue in ``(available_at, id)`` order, marked with the
batch's token and lease and one attempt more (a count outside
``[0, ATTEMPTS_CEILING)`` is left as it is, to be failed as malformed); and
the acknowledgement deletes only rows still held under their token.

Each claim also comes with a sixth column, for a driver that reads a database result store's
cancellations in its reserve (`jobbridge.drivers.base.ReadsCancellations`): whether the row's id
is in ``jobbridge_cancelled`` and not yet expired by the result store's clock (a parameter of its own),
read by the claim itself, so the worker makes no lookup of its own per batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache, lru_cache

from jobbridge.drivers.database.engine import POSTGRESQL
from jobbridge.drivers.database.limits import ATTEMPTS_CEILING
from jobbridge.drivers.database.schema import jobs

#: ids per acknowledging DELETE on SQLite and MariaDB: far below SQLite's bound on parameters
ACK_CHUNK = 1000
#: statement texts kept per id-list builder below: one per batch size a worker asks for; a worker with
#: thousands of threads would otherwise keep one text per count it ever saw, each as long as its list
TEXTS_KEPT = 256
_T = jobs.name
_MARK = (f"attempts = CASE WHEN attempts >= 0 AND attempts < {ATTEMPTS_CEILING} THEN attempts + 1 "
         f"ELSE attempts END, token = {{m}}, reserved_until = {{m}}")
_READY = (f"SELECT {{columns}} FROM {_T} WHERE queue = {{m}} AND reserved_until IS NULL AND available_at <= {{m}} "
          "ORDER BY available_at, id LIMIT {m}")
_RETURNED = "id, queue, body, attempts, available_at"
#: the result store's cancellations (`jobbridge.results.tables.cancelled`), as this SQL names the table
CANCELLED_TABLE = "jobbridge_cancelled"
#: the claimed row is cancelled, by the store's clock (its one parameter, the store's now); its id is the key
_IS_CANCELLED = (f"EXISTS (SELECT 1 FROM {CANCELLED_TABLE} cancelled WHERE cancelled.id = {_T}.id "
                 "AND cancelled.expires_at > {m})")

#: SQLite, under the write lock its BEGIN IMMEDIATE took; parameters: token, lease, queue, due by, batch
#: (``*_CANCELS``: then the store's now). RETURNING gives no order: the caller restores the claim's.
SQLITE_CLAIM = (f"UPDATE {_T} SET {_MARK.format(m='?')} WHERE id IN ({_READY.format(columns='id', m='?')}) "
                f"RETURNING {_RETURNED}")
SQLITE_CLAIM_CANCELS = f"{SQLITE_CLAIM}, {_IS_CANCELLED.format(m='?')}"

#: PostgreSQL, in one statement, skipping rows another transaction has locked; parameters: queue, due by,
#: batch, token, lease (``*_CANCELS``: then the store's now). One text for every batch size: psycopg
#: prepares it after a few runs.
POSTGRES_CLAIM = (f"WITH picked AS ({_READY.format(columns='id', m='%s')} FOR UPDATE SKIP LOCKED) "
                  f"UPDATE {_T} SET {_MARK.format(m='%s')} FROM picked WHERE {_T}.id = picked.id "
                  f"RETURNING {', '.join(f'{_T}.{c}' for c in _RETURNED.split(', '))}")
POSTGRES_CLAIM_CANCELS = f"{POSTGRES_CLAIM}, {_IS_CANCELLED.format(m='%s')}"

#: MariaDB (no UPDATE ... RETURNING), first: the ready rows' ids in claim order by a plain read (parameters:
#: queue, due by, batch). A plain read passes over the delete-marked index entries every claimed and every
#: acknowledged row leaves at the front of ``jobbridge_jobs_ready`` until InnoDB's purge removes them; a
#: locking read of that range looks at the row behind each (9,421 pages read against 199, docs/benchmarks.md).
MYSQL_READY_IDS = _READY.format(columns="id", m="%s")
#: ... or, when `mysql_lock` came up short (another claim held some of those rows), lock and read the rest of
#: the ready rows from the index (parameters: queue, due by, batch; for ``MYSQL_PICK_CANCELS`` the store's now
#: comes first, its column being first in the text) ...
MYSQL_PICK = f"{_READY.format(columns=_RETURNED, m='%s')} FOR UPDATE SKIP LOCKED"
MYSQL_PICK_CANCELS = (f"{_READY.format(columns=f'{_RETURNED}, ' + _IS_CANCELLED.format(m='%s'), m='%s')} "
                      "FOR UPDATE SKIP LOCKED")


@lru_cache(maxsize=TEXTS_KEPT)
def mysql_lock(count: int, cancels: bool) -> str:
    """... then lock and read those ``count`` rows by primary key, each still ready by the latest committed
    version (a locking read's), skipping any another claim holds (parameters: for ``cancels`` the store's now,
    then the ids, queue, due by). ``FORCE INDEX``: given the queue and ``reserved_until`` in the condition, the
    optimizer would otherwise scan the ready index's front again."""
    columns = f"{_RETURNED}, {_IS_CANCELLED.format(m='%s')}" if cancels else _RETURNED
    return (f"SELECT {columns} FROM {_T} FORCE INDEX (PRIMARY) WHERE id IN ({', '.join(['%s'] * count)}) "
            "AND queue = %s AND reserved_until IS NULL AND available_at <= %s FOR UPDATE SKIP LOCKED")


@lru_cache(maxsize=TEXTS_KEPT)
def mysql_mark(count: int) -> str:
    """... then mark them (parameters: token, lease, then the ``count`` ids); the lock lasts until commit."""
    return f"UPDATE {_T} SET {_MARK.format(m='%s')} WHERE id IN ({', '.join(['%s'] * count)})"


#: PostgreSQL: every receipt as two arrays, so one statement text (prepared) for any batch and any number of
#: tokens; parameters: the ids, the tokens. Sent in binary (``%b``): psycopg quotes each element of a text-format
#: array with a regular expression, which took 359 us per batch of 64 receipts where binary takes 152.
POSTGRES_FORGET = (f"DELETE FROM {_T} AS held USING unnest(%b::text[], %b::text[]) AS receipt(id, token) "
                   "WHERE held.id = receipt.id AND held.token = receipt.token")
#: PostgreSQL: acknowledge and claim in one statement (its own transaction, in autocommit: one round trip
#: where BEGIN, DELETE, UPDATE and COMMIT took four). The rows deleted are reserved and the rows claimed are
#: not, so the two parts never touch one row. Parameters: the ids, the tokens, then the claim's.
POSTGRES_FORGET_AND_CLAIM = f"WITH gone AS ({POSTGRES_FORGET}), {POSTGRES_CLAIM.removeprefix('WITH ')}"
POSTGRES_FORGET_AND_CLAIM_CANCELS = f"WITH gone AS ({POSTGRES_FORGET}), {POSTGRES_CLAIM_CANCELS.removeprefix('WITH ')}"

#: what a claim from a mark (`jobbridge.drivers.database.claim_marks`) adds to the ready rows' scan: only rows
#: after the mark in claim order (parameters: its available_at, its id), so the index scan starts there
_AFTER_MARK = "AND (available_at, id) > (%s, %s) "


#: the four claims above by (acknowledging first, reading cancellations)
_POSTGRES_CLAIMS = {(False, False): POSTGRES_CLAIM, (False, True): POSTGRES_CLAIM_CANCELS,
                    (True, False): POSTGRES_FORGET_AND_CLAIM, (True, True): POSTGRES_FORGET_AND_CLAIM_CANCELS}


def postgres_claim(*, forget: bool, cancels: bool, after_mark: bool) -> str:
    """One of the four PostgreSQL claims above; ``after_mark``: its scan starts after a mark, whose two
    parameters follow the claim's due-by one (queue, due by, mark available_at, mark id, batch, ...)."""
    sql = _POSTGRES_CLAIMS[forget, cancels]
    return _marked(sql) if after_mark else sql


@cache
def _marked(sql: str) -> str:
    ready = "AND available_at <= %s "
    assert sql.count(ready) == 1  # the one scan of the ready rows
    return sql.replace(ready, ready + _AFTER_MARK)


@lru_cache(maxsize=TEXTS_KEPT)
def forget_in(mark: str, count: int) -> str:
    """SQLite and MariaDB: delete ``count`` ids still held under one token (parameters: token, then the ids)."""
    return f"DELETE FROM {_T} WHERE token = {mark} AND id IN ({', '.join([mark] * count)})"


def forget_statements(dialect: str, paramstyle: str,
                      receipts: Sequence[tuple[str, str]]) -> Iterator[tuple[str, tuple[object, ...]]]:
    """The DELETEs (SQL, parameters) that acknowledge ``receipts``: one per token, per `ACK_CHUNK` ids.

    A worker's acknowledgement holds the jobs of one or two reserve calls, so one or two statements
    (on PostgreSQL always one).
    """
    if dialect == POSTGRESQL:
        yield POSTGRES_FORGET, receipt_arrays(receipts)
        return
    by_token: dict[str, list[str]] = {}
    for job_id, token in receipts:
        by_token.setdefault(token, []).append(job_id)
    for token, ids in by_token.items():
        mark = "?" if paramstyle == "qmark" else "%s"
        for at in range(0, len(ids), ACK_CHUNK):
            chunk = ids[at:at + ACK_CHUNK]
            yield forget_in(mark, len(chunk)), (token, *chunk)



def receipt_arrays(receipts: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """``(id, token)`` receipts as PostgreSQL's two array parameters: the ids, and the tokens beside them."""
    return [job_id for job_id, _ in receipts], [token for _, token in receipts]
