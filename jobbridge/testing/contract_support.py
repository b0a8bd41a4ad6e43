"""What the contract suites share: building an envelope, counting what a queue still holds, push and reserve.

Its own module so that each suite (`jobbridge.testing.contract`,
`jobbridge.testing.failed_contract`) imports it without importing the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from jobbridge.drivers.base import Driver
from jobbridge.envelope import Envelope, Reservation, new_id
from jobbridge.testing.clock import FixedClock


def make_envelope(clock: FixedClock, queue: str = "default", delay: float = 0.0, **fields: Any) -> Envelope:
    """A small envelope available ``delay`` seconds from the clock's now."""
    now = clock.now()
    values: dict[str, Any] = {
        "id": new_id(), "name": "contract.noop", "queue": queue, "payload": {"n": 1},
        "tries": 3, "timeout": 60.0, "available_at": now + delay, "created_at": now,
    }
    values.update(fields)
    return Envelope(**values)


def pending(driver: Driver, queue: str) -> int:
    """Jobs on ``queue`` not yet acknowledged or failed (waiting, delayed or reserved), read off `Driver.counts`."""
    return sum(c.pending for c in driver.counts() if c.queue == queue)


class ContractHelpers:
    """What every suite shares: the lease length its drivers are built with, and how to push and reserve."""

    RESERVATION: ClassVar[float] = 60.0
    inject_undecodable: ClassVar[Callable[..., None] | None] = None
    #: a driver whose store cannot tell waiting jobs from reserved ones at all refuses `Driver.purge`
    purge_refused: ClassVar[bool] = False
    #: whether `Driver.purge` deletes delayed jobs too (SQS cannot see a delayed message to delete it)
    purges_delayed: ClassVar[bool] = True

    def push(self, driver: Driver, clock: FixedClock, n: int = 1, **kw: Any) -> list[Envelope]:
        kw.setdefault("payload", None)
        envs = [make_envelope(clock, **{**kw, "payload": kw["payload"] or {"n": i}}) for i in range(n)]
        driver.push(envs)
        return envs

    def reserve_one(self, driver: Driver, queues: tuple[str, ...] = ("default",)) -> Reservation:
        got = driver.reserve(list(queues), 1)
        assert len(got) == 1, f"expected one reservation, got {len(got)}"
        return got[0]
