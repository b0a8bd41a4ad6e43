"""``driver.failed`` of an amqp connection: the shared store's failed jobs, retried by publishing them again.

A retry publishes each job (attempts reset, due now, its unique key dropped,
as on every driver) and waits for the broker's confirm before it deletes the
failed row (`jobbridge.drivers.shared.republishing`): a crash in between leaves
the job both queued and failed, never neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.clock import Clock
from jobbridge.drivers.amqp.publisher import Outgoing
from jobbridge.drivers.amqp.topology import Route
from jobbridge.drivers.shared.republishing import FailedRows, RepublishingFailedStore
from jobbridge.envelope import Envelope


class AmqpFailedStore(RepublishingFailedStore):
    def __init__(self, store: FailedRows, clock: Clock, publish: Callable[[Sequence[Outgoing]], None],
                 route: Callable[[str], Route]) -> None:
        super().__init__(store, clock)
        self._publish, self.route = publish, route

    def republish(self, rows: Sequence[tuple[str, str, bytes]], now: float) -> None:
        self._publish([self._again(job_id, queue, body, now) for job_id, queue, body in rows])

    def _again(self, job_id: str, queue: str, body: bytes, now: float) -> Outgoing:
        try:
            env = Envelope.decode(body)
            body = env.replace(attempts=0, available_at=now, unique_key=None).encode()
        except Exception:  # goes back as it was, to be failed again with its reason
            pass
        return Outgoing(self.route(queue), body, job_id, queue)
