"""``driver.failed`` of a celery-wire connection: the shared store's failed jobs, retried onto Celery's queues.

A retry publishes each job again as a Celery message (attempts reset, due now, its
unique key dropped, as on every driver), then deletes its failed row: a crash in
between leaves the job both queued and failed, never neither. A failed entry that
was never a readable message (pickle, garbage) goes back exactly as it was, to be
failed again with its reason: retrying it is how an operator who fixed the sender
learns it still cannot run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobbridge.clock import Clock
from jobbridge.drivers.shared.republishing import FailedRows, RepublishingFailedStore
from jobbridge.envelope import Envelope


class CeleryWireFailedStore(RepublishingFailedStore):
    def __init__(self, store: FailedRows, clock: Clock, publish: Callable[[Sequence[Envelope]], None],
                 push_raw: Callable[[str, bytes], None]) -> None:
        super().__init__(store, clock)
        self._publish, self._push_raw = publish, push_raw

    def republish(self, rows: Sequence[tuple[str, str, bytes]], now: float) -> None:
        envelopes = []
        for _, queue, body in rows:
            try:
                env = Envelope.decode(body)
            except Exception:  # never a readable message: back as it was
                self._push_raw(queue, body)
                continue
            envelopes.append(env.replace(attempts=0, available_at=now, unique_key=None,
                                         headers={**env.headers, "retries": 0}))
        self._publish(envelopes)
