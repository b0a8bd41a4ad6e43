"""``expires``: a job not started by a moment is acknowledged unrun and reported expired, never run late.

A job whose point has passed (a periodic report superseded by the next tick, a
reminder for a meeting that is over) must not run just because the queue was
backed up or every worker was down. Dispatch sets ``expires_at`` on the
envelope; the worker compares it with its clock when the job's turn comes, and
a job past it is acknowledged without running: a ``job_expired`` signal, a log
line (outcome ``expired``) and, where results are kept, the REVOKED state. A job
that already started runs to its end; a retry after it is not stopped either
(it started in time).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from jobbridge import signals
from jobbridge.clock import Clock
from jobbridge.envelope import Reservation
from jobbridge.outcome import Outcome
from jobbridge.results.base import REVOKED
from jobbridge.tracking import ResultTracker

log = logging.getLogger("jobbridge.job")

#: ``expires``: seconds from now, a timedelta, or a moment (a naive datetime is UTC)
Expires = float | int | timedelta | datetime


def expires_at(now: float, expires: Expires | None) -> float | None:
    """The epoch second a dispatch's ``expires`` names, or None."""
    if expires is None:
        return None
    if isinstance(expires, datetime):
        moment = expires if expires.tzinfo is not None else expires.replace(tzinfo=UTC)
        return moment.timestamp()
    seconds = expires.total_seconds() if isinstance(expires, timedelta) else expires
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"expires must be seconds, a timedelta or a datetime, not {type(expires).__name__}")
    return now + float(seconds)


def has_expired(res: Reservation, clock: Clock) -> bool:
    """Whether this attempt must not start: its envelope's moment passed, and it is the first attempt.

    Only a first attempt is dropped: a job released for a retry had started in time.
    """
    env = res.envelope
    return env.expires_at is not None and env.attempts <= 1 and clock.now() >= env.expires_at


def dropped(res: Reservation, sender: type | None, tracker: ResultTracker | None, duration_ms: float) -> Outcome:
    """An expired job's outcome: acknowledged unrun; its signal, its log line, REVOKED where results are kept."""
    env = res.envelope
    signals.send(signals.job_expired, sender, envelope=env)
    fields = {"name": env.name, "job_id": env.id, "queue": env.queue, "attempt": env.attempts,
              "duration_ms": duration_ms, "outcome": "expired"}
    log.info(" ".join(f"{k}={v}" for k, v in fields.items()), extra={"jobbridge": fields})
    if tracker is not None:
        tracker.write(env.id, REVOKED, name=env.name, meta={"expired": True})
    return Outcome(res, "acknowledge", "expired", duration_ms=duration_ms)
