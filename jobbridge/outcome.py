"""How an attempt ended, and the exceptions a job (or the Celery facade) raises to choose it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jobbridge.envelope import Reservation

Action = Literal["acknowledge", "release", "fail"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the worker does with a reservation once its attempt is over."""

    reservation: Reservation
    action: Action
    label: str  # the log's outcome word: succeeded, ignored, revoked, released, failed, discarded
    delay: float = 0.0
    error: str = ""
    exception: BaseException | None = None
    duration_ms: float = 0.0


# As `jobbridge.context.attempt_context`: the frozen ``__init__``'s ``object.__setattr__`` per field,
# replaced by the slot descriptors it ends in, for the outcome every successful attempt builds.
_SET = {name: Outcome.__dict__[name].__set__ for name in Outcome.__slots__}
_reservation, _action, _label, _delay, _error, _exception, _duration_ms = (
    _SET["reservation"], _SET["action"], _SET["label"], _SET["delay"], _SET["error"], _SET["exception"],
    _SET["duration_ms"])
_new = object.__new__


def acknowledged(reservation: Reservation, label: str, duration_ms: float) -> Outcome:
    """``Outcome(reservation, "acknowledge", label, duration_ms=duration_ms)``, in half the time."""
    outcome: Outcome = _new(Outcome)
    _reservation(outcome, reservation)
    _action(outcome, "acknowledge")
    _label(outcome, label)
    _delay(outcome, 0.0)
    _error(outcome, "")
    _exception(outcome, None)
    _duration_ms(outcome, duration_ms)
    return outcome


class ReleaseJob(Exception):
    """Raise in a job to end this attempt and run it again after ``delay`` seconds (a retry).

    It is released even when its tries are used up; the caller decided.
    """

    #: store the ``__cause__`` as the attempt's error, not this exception (see `FailJob`)
    stands_for_cause = False

    def __init__(self, delay: float = 0.0, reason: str = "released by the job") -> None:
        super().__init__(reason)
        self.delay = delay


class FailJob(Exception):
    """Raise in a job to give up now: no further attempts, ``failed()`` runs, the job is stored as failed."""

    #: a subclass that only carries another failure (its ``__cause__``) sets this, so the failed
    #: store and the result store keep that failure's type, message and traceback
    stands_for_cause = False


class AcknowledgeJob(Exception):
    """Raise in a job to end it as done without counting it a success (Celery's ``Ignore``)."""


@dataclass(slots=True)
class WorkStats:
    """What a worker (or `run_pending`) did: attempts by how they ended.

    An attempt that ended ignored (`AcknowledgeJob`, Celery's ``Ignore``) or
    cancelled (`JobBridge.cancel`) is acknowledged like a success but counted as
    itself, so that a summary never reports as done a job that did not run to its end.
    """

    processed: int = 0
    succeeded: int = 0
    released: int = 0
    failed: int = 0
    ignored: int = 0
    cancelled: int = 0
    expired: int = 0  # not started by its expires_at: acknowledged unrun (jobbridge.expiry)

    def add(self, outcome: Outcome) -> None:
        self.processed += 1
        if outcome.label == "ignored":
            self.ignored += 1
        elif outcome.label == "revoked":
            self.cancelled += 1
        elif outcome.label == "expired":
            self.expired += 1
        elif outcome.action == "acknowledge":
            self.succeeded += 1
        elif outcome.action == "release":
            self.released += 1
        else:
            self.failed += 1

    def merge(self, other: WorkStats) -> None:
        self.processed += other.processed
        self.succeeded += other.succeeded
        self.released += other.released
        self.failed += other.failed
        self.ignored += other.ignored
        self.cancelled += other.cancelled
        self.expired += other.expired

    def summary(self) -> str:
        """One line; ignored and cancelled attempts are named only when there were some."""
        rare = [f"{n} {word}" for n, word in ((self.ignored, "ignored"), (self.cancelled, "cancelled"),
                                              (self.expired, "expired")) if n]
        parts = [f"{self.succeeded} succeeded", *rare, f"{self.released} released for retry", f"{self.failed} failed"]
        return f"Processed {self.processed} job attempt(s): {', '.join(parts)}."
