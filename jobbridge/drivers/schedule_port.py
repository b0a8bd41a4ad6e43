"""The schedule store: each schedule entry's last fired tick, advanced in one step with the push of its job.

Any number of schedulers may look at the same entry at the same moment (one in
every worker, one standalone, on every host). What makes each tick dispatch
exactly once is that the store, not a scheduler, decides: `ScheduleStore.fire`
pushes the tick's job only if the tick is later than the entry's stored last
tick, and records the tick in the same atomic step (one transaction on the
database driver, one script on redis). A scheduler killed at any instant
leaves either both the job and the tick, or neither: the next scheduler that
looks fires what is due. No leader, no lease to lose.

A driver offers its store as ``driver.schedules``; one whose store cannot do
the two in one step (SQS, Kafka) has none, and a schedule on it is refused at
boot (`schedule_store_of` returns None, the scheduler says what to declare).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jobbridge.envelope import Envelope


class Fire(enum.Enum):
    """What one `ScheduleStore.fire` call did."""

    #: the tick was later than the stored one: it is recorded, and its job pushed
    PUSHED = "pushed"
    #: the tick is recorded and nothing was pushed (a skipped tick, or a unique job already pending)
    ADVANCED = "advanced"
    #: another scheduler recorded this tick (or a later one) first: nothing changed
    TAKEN = "taken"


@dataclass(frozen=True, slots=True)
class LastTick:
    """What the store keeps per entry: its last fired tick, that tick's job id (None: skipped), when."""

    tick: float
    job_id: str | None
    fired_at: float


@dataclass(frozen=True, slots=True)
class Firing:
    """One tick to fire: the entry, the tick, and its job (None: record the tick alone)."""

    entry: str
    tick: float
    envelope: Envelope | None


@runtime_checkable
class ScheduleStore(Protocol):
    """Each entry's last tick, read in batches and advanced atomically with a push."""

    def now(self) -> float:
        """The store's clock (epoch seconds): every scheduler on this store judges due ticks by it."""
        ...

    def last(self, entries: Sequence[str]) -> dict[str, LastTick]:
        """The stored last tick of each of ``entries`` that has one (never fired: absent)."""
        ...

    def fire(self, entry: str, tick: float, envelope: Envelope | None) -> Fire:
        """Record ``tick`` and push ``envelope`` in one atomic step, only if ``tick`` is later than the last.

        ``envelope`` None records the tick alone (a missed tick skipped). A unique
        job (``unique_key``) whose lock is held is not pushed: the tick is still
        recorded (`Fire.ADVANCED`), as a dispatch would drop the duplicate.
        """
        ...

    def fire_many(self, firings: Sequence[Firing]) -> list[Fire]:
        """`fire` for each of ``firings``, in one round trip (one transaction, one pipeline); their outcomes.

        Each firing stays atomic on its own (its tick with its job); a firing that
        another scheduler took first does not stop the others, and each is judged
        after the ones before it in the batch (a second tick of one entry, a unique
        lock one of them took). Several ticks of one entry come oldest first, as the
        scheduler plans them. Many entries fall due at the same instant (every one on
        the minute): a store does the batch in a few statements or script calls, not
        a few per firing, or the last of 10,000 would fire seconds late.
        """
        ...


def schedule_store_of(driver: object) -> ScheduleStore | None:
    """The driver's schedule store, or None when it keeps none (the caller says what to declare)."""
    found = getattr(driver, "schedules", None)
    return found if isinstance(found, ScheduleStore) else None
