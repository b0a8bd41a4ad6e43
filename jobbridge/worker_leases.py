"""The worker's held reservations and their leases: what it holds, since when, and which it lost.

Whether a lease is still the worker's is judged by this process's monotonic
clock since the start of the last reserve or renewal that covered it (a lease
granted by a call ends no sooner than a lease from when the call was made),
never by comparing the store's deadline with the local wall clock. Written by
the worker's loop alone (`jobbridge.worker`), which renews each quarter lease.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from jobbridge.envelope import Reservation

log = logging.getLogger("jobbridge.worker")


class Leases:
    """Held reservations by job id, when each was last leased, and the ones whose lease was lost."""

    def __init__(self, lease: float) -> None:
        self.lease = lease
        self.held: dict[str, Reservation] = {}
        self.renewed: dict[str, float] = {}  # job id -> monotonic start of the call that last leased it
        self.lost: set[str] = set()

    def hold(self, got: Sequence[Reservation], asked: float) -> None:
        """Reservations a reserve called at ``asked`` returned: held, leased from then."""
        held, renewed = self.held, self.renewed
        for res in got:
            job_id = res.envelope.id  # not the `Reservation.id` property: once per job
            held[job_id] = res
            renewed[job_id] = asked

    def drop(self, job_id: str) -> None:
        """Done with ``job_id`` (settled, given up or handed back): no longer held, so no longer renewed."""
        self.held.pop(job_id, None)
        self.renewed.pop(job_id, None)
        if self.lost:
            self.lost.discard(job_id)

    def still_ours(self, job_id: str, now: float) -> bool:
        """Whether the lease of ``job_id`` lasts yet at ``now`` (monotonic)."""
        leased = self.renewed.get(job_id)
        return job_id not in self.lost and leased is not None and now < leased + self.lease

    def to_renew(self, waiting: Collection[str]) -> list[Reservation]:
        """The held reservations a heartbeat renews: not lost, and no outcome ``waiting`` to be stored.

        A finished attempt whose outcome the store has not taken yet is not
        renewed: its outcome is tried for the rest of its lease, then given up,
        so that no outcome the store keeps failing can hold its job for ever.
        """
        lost = self.lost
        return [res for job_id, res in self.held.items() if job_id not in lost and job_id not in waiting]

    def renewed_by(self, live: Sequence[Reservation], kept: Sequence[Reservation], asked: float) -> None:
        """A renewal called at ``asked`` for ``live`` kept ``kept``; the others' leases are lost (logged)."""
        for res in kept:
            if res.id in self.held:
                self.held[res.id] = res
                self.renewed[res.id] = asked
        if len(kept) < len(live):
            renewed = {res.id for res in kept}
            for res in live:
                if res.id not in renewed:
                    self.lost.add(res.id)
                    log.warning("the reservation of job %s (%s) was lost before its attempt ended: another "
                                "worker may run it again", res.id, res.envelope.name)
