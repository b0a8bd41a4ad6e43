"""A failed job as every shared store can keep it.

The failed store is a database table or redis hashes, and a failure that
cannot be written there would be retried by the worker for ever: so the name
is cut to the 191 characters of the database's column (the body keeps it
whole), the error to its last `MAX_ERROR` characters, NUL in either is
replaced (PostgreSQL refuses it in text), and the attempt count is held to a
32-bit column.
"""

from __future__ import annotations

from jobbridge.limits import MAX_NAME_LENGTH
from jobbridge.store_reports import FailedJob

#: the most characters of an error kept (the end, where a traceback says what happened)
MAX_ERROR = 32_000


def _kept(text: str) -> str:
    return text.replace("\x00", "\ufffd")


def failed_record(job_id: str, queue: str, name: str, attempts: int, error: str, now: float,
                  body: bytes) -> FailedJob:
    """The `FailedJob` to write: storable in every shared store, whatever the job carried."""
    error = _kept(error)
    if len(error) > MAX_ERROR:
        error = "\u2026" + error[-MAX_ERROR:]
    attempts = max(-(2**31), min(attempts, 2**31 - 1))
    return FailedJob(job_id, queue, _kept(name)[:MAX_NAME_LENGTH], attempts, error, now, body)
