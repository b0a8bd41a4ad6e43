"""Storing finished attempts: one batch while the store takes it, outcome by outcome when it does not.

The worker stores a batch of finished attempts in one round trip. When that
call fails, the reason decides what happens:

- the store is unreachable (`DriverUnavailable`): every outcome is kept and
  the batch tried again, with the worker's backoff, for as long as each job's
  lease is still the worker's (a job that finished while the database
  restarted is acknowledged when it is back, not run again);
- anything else (the store refused some data, `StoreRefused`, or a driver
  raised something that is no store error at all): the outcomes are stored
  one at a time, so the good ones are stored now. One the store refuses
  `MAX_REFUSALS` times running is given up, logged as an error naming the job
  and why, and let go, so that its lease is no longer renewed and lapses.

When the worker also has room to reserve, the plain acknowledgements of a
batch (`combinable`) may be stored by a call the worker hands in
(``acknowledging``: the driver's `AcknowledgingReserve`, the acknowledgement
and the next claim in one transaction), and the rest of the batch as above. If
that call fails, it stored nothing: every outcome is kept, and the next try
(after the worker's backoff) is the plain one above, whose rules then apply.

Before this, one outcome the store could not hold (a name too long for its
column) held its whole batch for good while the heartbeat renewed the batch's
leases: the worker never moved on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from jobbridge.drivers.base import Driver
from jobbridge.envelope import Reservation
from jobbridge.errors import DriverUnavailable
from jobbridge.outcome import Outcome

log = logging.getLogger("jobbridge.worker")

#: how many times running the store may refuse one outcome before the worker gives it up
MAX_REFUSALS = 5


def store_outcomes(driver: Driver, outcomes: Sequence[Outcome]) -> None:
    """Apply outcomes to the store: acknowledgements in one batch, then releases and failures.

    A unique job's lock is released on success and on final failure, never on a release:
    a retrying job is still pending, so a duplicate dispatched meanwhile is rightly dropped.
    (`Executor.settle` is this.)
    """
    done = [o.reservation for o in outcomes if o.action == "acknowledge"]
    if done:
        driver.acknowledge(done)
    for o in outcomes:
        if o.action == "release":
            driver.release(o.reservation, o.delay)
        elif o.action == "fail":
            driver.fail(o.reservation, o.error)
    for o in outcomes:
        env = o.reservation.envelope
        if env.unique_key is not None and o.action != "release":
            driver.locks.release(env.unique_key, env.id)


class Settler:
    """The outcomes a worker has still to store, and how often the store refused each."""

    def __init__(self, driver: Driver, *, failed: Callable[[str, Exception], None],
                 succeeded: Callable[[], None]) -> None:
        self.driver = driver
        self.pending: list[Outcome] = []
        self._failed = failed  # logs, signals and backs off: the worker's handling of a store error
        self._succeeded = succeeded
        self._refusals: dict[str, int] = {}
        #: False after a failed combined call, until a plain settle succeeds: its error is then the plain one's
        self.may_combine = True

    def add(self, outcome: Outcome) -> None:
        self.pending.append(outcome)

    def waiting(self) -> set[str]:
        """The ids of the jobs whose outcomes are still to store (the heartbeat no longer renews them)."""
        return {outcome.reservation.envelope.id for outcome in self.pending}

    def combinable(self) -> list[Outcome]:
        """The pending acknowledgements a combined call may store: no unique-job lock, never refused."""
        if not self.may_combine:
            return []
        refusals = self._refusals  # per job: attributes read, no property call (`Reservation.id`)
        return [o for o in self.pending if o.action == "acknowledge" and o.reservation.envelope.unique_key is None
                and (not refusals or o.reservation.envelope.id not in refusals)]

    def settle(self, still_ours: Callable[[str], bool], *,
               acknowledging: Callable[[Sequence[Reservation]], None] | None = None,
               plain: list[Outcome] | None = None) -> list[Outcome]:
        """Store what is pending; returns the outcomes done with (stored, or given up).

        ``acknowledging``, when given, stores the `combinable` outcomes in one call (the rest as ever);
        ``plain``: those outcomes, when the caller has just asked `combinable` for them.
        """
        if acknowledging is None:
            plain = []
        elif plain is None:
            plain = self.combinable()
        if acknowledging is not None and plain:
            try:
                acknowledging([o.reservation for o in plain])
            except Exception as exc:  # nothing was stored: all kept, and tried the plain way next
                self.may_combine = False
                self._failed("acknowledge and reserve", exc)
                return []
            self._succeeded()
            if len(plain) == len(self.pending):  # the usual batch: nothing but plain acknowledgements
                self.pending = []
                return plain
            ids = {id(o) for o in plain}
            self.pending = [o for o in self.pending if id(o) not in ids]
            return plain + self._settle_batch(still_ours) if self.pending else plain
        return self._settle_batch(still_ours)

    def _settle_batch(self, still_ours: Callable[[str], bool]) -> list[Outcome]:
        batch, self.pending = self.pending, []
        if len(batch) > 1:
            try:
                store_outcomes(self.driver, batch)
            except DriverUnavailable as exc:
                self._failed("settle", exc)
                return self._keep(batch, still_ours)
            except Exception as exc:  # some outcome the store refused: find it, store the others now
                self._failed("settle", exc)
            else:
                self._succeeded()
                self.may_combine = True
                if self._refusals:
                    for outcome in batch:
                        self._refusals.pop(outcome.reservation.envelope.id, None)
                return batch
        return self._one_by_one(batch, still_ours)

    def _one_by_one(self, batch: Sequence[Outcome], still_ours: Callable[[str], bool]) -> list[Outcome]:
        done: list[Outcome] = []
        for index, outcome in enumerate(batch):
            job_id = outcome.reservation.id
            try:
                store_outcomes(self.driver, [outcome])
            except DriverUnavailable as exc:  # the store went away meanwhile: the rest wait for it
                self._failed("settle", exc)
                return done + self._keep(batch[index:], still_ours)
            except Exception as exc:
                if self._refused(outcome, exc, still_ours):
                    done.append(outcome)
                continue
            self._succeeded()
            self.may_combine = True
            self._refusals.pop(job_id, None)
            done.append(outcome)
        return done

    def _refused(self, outcome: Outcome, exc: Exception, still_ours: Callable[[str], bool]) -> bool:
        """Count one refusal of ``outcome``; True when it is given up (too many, or no longer ours)."""
        job_id = outcome.reservation.id
        refusals = self._refusals.get(job_id, 0) + 1
        self._failed(f"settle job {job_id}", exc)
        if refusals < MAX_REFUSALS and still_ours(job_id):
            self._refusals[job_id] = refusals
            self.pending.append(outcome)
            return False
        self._refusals.pop(job_id, None)
        log.error("gave up storing the outcome (%s) of job %s (%s): the store refused it %d time(s) (%s: %s); "
                  "its reservation is no longer renewed, so it lapses and the job is handed out again",
                  outcome.label, job_id, outcome.reservation.envelope.name, refusals, type(exc).__name__, exc)
        return True

    def _keep(self, outcomes: Sequence[Outcome], still_ours: Callable[[str], bool]) -> list[Outcome]:
        """Keep the outcomes whose leases are still ours for the next try; give the others up."""
        lapsed: list[Outcome] = []
        for outcome in outcomes:
            (self.pending if still_ours(outcome.reservation.id) else lapsed).append(outcome)
        if lapsed:
            log.warning("gave up storing the outcome of %d attempt(s): the store stayed unreachable until "
                        "their reservations lapsed, so those jobs run again", len(lapsed))
        return lapsed
