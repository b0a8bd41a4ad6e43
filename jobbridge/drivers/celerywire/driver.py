"""`CeleryWireDriver`: the reservation protocol on the queues of a Celery broker, in Celery's own messages.

Every job is a Celery protocol-2 message (`jobbridge.drivers.celerywire.protocol`),
so a Celery worker runs what jobbridge pushes and a jobbridge worker runs what a
Celery client sends, on the same queues. The broker's side is a `Wire`
(`jobbridge.drivers.celerywire.transport`): kombu's lists on Redis (`redis_wire`),
a channel's deliveries on RabbitMQ (`amqp_wire`). On both:

- push: publish kombu's message; a delayed job carries its ``eta``, as Celery's does;
- reserve: take a delivery, unacknowledged; a message whose ``eta`` has not come is
  held by this process until it is due (what a Celery worker does with an ETA task);
- acknowledge: settle the delivery; release: publish it again with its ``eta`` and
  ``retries`` one on, then acknowledge it (what Celery's ``retry`` does); hand back: the
  same with ``retries`` as it was; fail: write it to the shared store's failed jobs,
  then acknowledge it. A stale receipt (the delivery went back meanwhile) does none of it;
- extend: renew the delivery (Redis: its ``unacked_index`` score; RabbitMQ: the
  delivery is held while the channel is); reclaim: put back the deliveries whose
  reservation lapsed (Redis: kombu's restore after the visibility timeout, anyone's;
  RabbitMQ: this process's own, rejected to their queue; a dead worker's come back
  when its connection drops).

On Redis the reservation is kombu's visibility timeout: a message held
unacknowledged longer than it, by a worker that does not renew it, is delivered
again. A jobbridge worker renews what it holds; a Celery worker does not, so its
long tasks and far ETA tasks can run twice. `describe` and docs/celery-wire.md say so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.amqp.store import SharedStore, scoped_locks
from jobbridge.drivers.base import Capabilities
from jobbridge.drivers.celerywire import protocol
from jobbridge.drivers.celerywire.failed import CeleryWireFailedStore
from jobbridge.drivers.celerywire.protocol import WireRefused
from jobbridge.drivers.celerywire.settings import CeleryWireSettings
from jobbridge.drivers.celerywire.transport import Held, Popped, Wire
from jobbridge.drivers.shared.failed_rows import failed_record
from jobbridge.envelope import Envelope, Reservation, new_id, undecodable
from jobbridge.store_reports import QueueCounts

#: seconds a message may come before its eta and still be handed out (two hosts' clocks differ a little)
EARLY = 0.5
#: seconds between two polls of an empty queue while a reserve waits
POLL = 0.2


@dataclass(frozen=True, slots=True)
class Receipt:
    """The delivery a reservation is: its delivery tag and digest (tag None: not tracked), its queue."""

    tag: str | None
    digest: str
    queue: str
    raw: bytes

    @property
    def held(self) -> Held | None:
        return None if self.tag is None else (self.tag, self.digest)


def open_wire(settings: CeleryWireSettings) -> Wire:
    """The broker's side: kombu's Redis transport, or its py-amqp one for RabbitMQ."""
    if settings.transport == "redis":
        from jobbridge.drivers.celerywire.redis_wire import RedisWire

        return RedisWire(settings.broker_url, settings.visibility_timeout, settings.connect_timeout,
                         settings.request_timeout)
    from jobbridge.drivers.celerywire.amqp_wire import AmqpWire

    return AmqpWire(settings.broker_url, settings.connect_timeout, settings.request_timeout)


class CeleryWireDriver:
    """Celery's queues on the broker its fleet uses; failed jobs and locks in the shared store."""

    def __init__(self, settings: CeleryWireSettings, store: SharedStore, *, clock: Clock = SYSTEM_CLOCK,
                 wire: Wire | None = None) -> None:
        self.settings, self.store, self.clock = settings, store, clock
        self.reservation = settings.reservation
        self.wire = wire if wire is not None else open_wire(settings)
        self.capabilities = Capabilities(
            is_deferred=True, survives_a_restart=True, needs_a_worker=True,
            may_lose_an_accepted_job=self.wire.may_lose_an_accepted_job,
            delayed_push=True, per_message_release=True, priorities=False, transactional_push=False,
            blocking_reserve=True, max_message_bytes=None,
        )
        self.failed = CeleryWireFailedStore(store, clock, self._publish, self.wire.push_raw)
        self.locks = scoped_locks(store, settings.scope)
        self._guard = threading.RLock()
        #: (delivery tag, digest) -> (lease deadline, queue) of each delivery handed out
        self._leases: dict[Held, tuple[float, str]] = {}
        #: a key of its own -> (envelope, receipt) of each message held until its eta
        self._early: dict[str, tuple[Envelope, Receipt]] = {}
        self._early_renewed = 0.0

    # -- push ---------------------------------------------------------------------------------

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        if transaction is not None:
            raise TypeError("the celery-wire driver cannot join a transaction; the app pushes after the commit")
        self._publish(envelopes)

    def _publish(self, envelopes: Sequence[Envelope]) -> None:
        if not envelopes:
            return
        now = self.clock.now()
        items = []
        for env in envelopes:
            message = protocol.write(env, now)
            properties = {"correlation_id": message.headers["id"], "delivery_mode": 2,
                          "reply_to": env.headers.get("reply_to")}
            items.append((env.queue, message, properties))
        self.store.remember(sorted({env.queue for env in envelopes}))
        self.wire.publish(items)

    # -- reserve ------------------------------------------------------------------------------

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        names = list(dict.fromkeys(queues))
        if limit <= 0 or not names:
            return []
        got = self._reserve_now(names, limit)
        deadline = time.monotonic() + wait
        while not got and time.monotonic() < deadline:
            time.sleep(max(0.0, min(POLL, deadline - time.monotonic())))
            got = self._reserve_now(names, limit)
        return got

    def _reserve_now(self, names: list[str], limit: int) -> list[Reservation]:
        with self._guard:
            now = self.clock.now()
            self._renew_early(now)
            got = self._due(names, limit, now)
            for queue in names:
                if len(got) >= limit:
                    break
                for popped in self.wire.reserve(queue, limit - len(got), now):
                    res = self._reservation(popped, queue, now)
                    if res is not None:
                        got.append(res)
            return got

    def _reservation(self, popped: Popped, queue: str, now: float) -> Reservation | None:
        """A delivery as a reservation; None when it is held until its eta."""
        receipt = Receipt(popped.tag, popped.digest, queue, popped.raw)
        lease = now + self.reservation
        try:
            env = protocol.read(self.wire.read(popped), queue, now)
        except Exception as exc:  # anything at all: failed with the reason, never raised
            reason = str(exc) if isinstance(exc, WireRefused) else f"message could not be read ({type(exc).__name__})"
            stand_in = undecodable(id=(self.wire.task_id(popped) or new_id())[:191], queue=queue, attempts=1, now=now)
            self._lease(receipt, lease)
            return Reservation(stand_in, receipt, lease, body=popped.raw, decode_error=reason)
        if env.available_at > now + EARLY:
            self._early[new_id()] = (env, receipt)
            return None
        self._lease(receipt, lease)
        return Reservation(env, receipt, lease)

    def _lease(self, receipt: Receipt, until: float) -> None:
        if receipt.held is not None:
            self._leases[receipt.held] = (until, receipt.queue)

    def _due(self, names: list[str], limit: int, now: float) -> list[Reservation]:
        """Held messages whose eta has come, in queue order."""
        got: list[Reservation] = []
        for queue in names:
            for key, (env, receipt) in list(self._early.items()):
                if len(got) < limit and env.queue == queue and env.available_at <= now + EARLY:
                    del self._early[key]
                    self._lease(receipt, now + self.reservation)
                    got.append(Reservation(env, receipt, now + self.reservation))
        return got

    def _renew_early(self, now: float) -> None:
        """Keep the messages held until their eta from being restored to another worker meanwhile."""
        if not self._early or now < self._early_renewed + self.reservation / 4:
            return
        self._early_renewed = now
        kept = self.wire.extend(self._early_held(), now)
        for key, (_, receipt) in list(self._early.items()):
            if receipt.held is not None and receipt.held not in kept:
                del self._early[key]  # went back meanwhile (this process stalled): someone else has it now

    def _early_held(self) -> list[Held]:
        return [held for _, r in self._early.values() if (held := r.held) is not None]

    # -- settle -------------------------------------------------------------------------------

    def _settle(self, reservations: Sequence[Reservation]) -> None:
        held = [pair for r in reservations if (pair := r.receipt.held) is not None]
        with self._guard:
            self.wire.acknowledge(held)
            for pair in held:
                self._leases.pop(pair, None)

    def _still_held(self, reservation: Reservation) -> bool:
        pair = reservation.receipt.held
        with self._guard:
            return pair is None or self.wire.held([pair]) == [True]

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self._settle(reservations)

    def release(self, reservation: Reservation, delay: float) -> None:
        """Publish the job again, due after ``delay``, its retries one on (Celery's retry), then acknowledge it."""
        self._send_again(reservation, delay, reservation.envelope.attempts)

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """As `release`, with the retries it had: the job never started."""
        self._send_again(reservation, delay, max(0, reservation.envelope.attempts - 1))

    def _send_again(self, reservation: Reservation, delay: float, attempts: int) -> None:
        if not self._still_held(reservation):
            return  # stale: the delivery went back, and whoever holds it now settles it
        if reservation.decode_error is not None:  # never a readable message: back as it was
            self.wire.push_raw(reservation.receipt.queue, reservation.receipt.raw)
        else:
            env = reservation.envelope.replace(attempts=attempts, available_at=self.clock.now() + max(0.0, delay))
            self._publish([env])
        self._settle([reservation])

    def fail(self, reservation: Reservation, error: str) -> None:
        if not self._still_held(reservation):
            return  # stale: the delivery went back, and whoever holds it now settles it
        env = reservation.envelope
        self.store.record(failed_record(env.id, env.queue, env.name, env.attempts, error, self.clock.now(),
                                        reservation.stored_body()))
        self._settle([reservation])

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        with self._guard:
            now = self.clock.now()
            self._renew_early(now)
            kept = self.wire.extend([pair for r in reservations if (pair := r.receipt.held) is not None], now)
            out = []
            for r in reservations:
                pair = r.receipt.held
                if pair is None or pair in kept:
                    out.append(Reservation(r.envelope, r.receipt, now + seconds, r.body, r.decode_error))
                    if pair is not None:
                        self._leases[pair] = (now + seconds, r.receipt.queue)
                else:
                    self._leases.pop(pair, None)
            return out

    def reclaim_expired(self) -> int:
        """Put back every delivery whose reservation lapsed (on Redis: kombu's restore, whoever held it)."""
        with self._guard:
            now = self.clock.now()
            self._renew_early(now)
            lapsed = [pair for pair, (until, _) in self._leases.items() if until <= now]
            back = self.wire.reclaim(now - self.settings.visibility_timeout, lapsed)
            for pair in back:
                self._leases.pop(pair, None)
            return len(back)

    # -- what is there ------------------------------------------------------------------------

    def counts(self) -> list[QueueCounts]:
        """Per queue: the waiting messages (a Celery ETA message on the broker counts as delayed where the
        broker shows it), the ETA messages this process holds, and the deliveries it runs.

        A message another worker holds is invisible here: ``reserved`` counts this process's.
        """
        out = []
        now = self.clock.now()
        for queue in self.store.queues():
            ready, delayed = self.wire.waiting(queue, now)
            delayed += sum(1 for env, _ in self._early.values() if env.queue == queue)
            reserved = sum(1 for _, q in self._leases.values() if q == queue)
            counts = QueueCounts(queue, ready, delayed, reserved)
            if counts.pending:
                out.append(counts)
        return out

    def purge(self, queues: Sequence[str]) -> int:
        """Delete the waiting messages of ``queues`` (and the ETA messages this process holds), releasing
        their unique locks; a message any worker has reserved stays."""
        total = 0
        for queue in dict.fromkeys(queues):
            envelopes: list[Envelope | None] = [self._decoded(p, queue) for p in self.wire.take_all(queue)]
            with self._guard:
                held = [(key, env, receipt) for key, (env, receipt) in self._early.items() if env.queue == queue]
                for key, _, _ in held:
                    del self._early[key]
                self.wire.acknowledge([pair for _, _, r in held if (pair := r.held) is not None])
            envelopes += [env for _, env, _ in held]
            for env in envelopes:
                if env is not None and env.unique_key:
                    self.locks.release(env.unique_key, env.id)
            total += len(envelopes)
        return total

    def _decoded(self, popped: Popped, queue: str) -> Envelope | None:
        try:
            return protocol.read(self.wire.read(popped), queue, 0.0)
        except Exception:  # an unreadable entry is purged all the same; it holds no lock anyone could name
            return None

    # -- the connection -----------------------------------------------------------------------

    def migrate(self) -> None:
        """The shared store's tables (Celery's queues appear when first pushed to)."""
        self.store.migrate()

    def check(self) -> None:
        """The broker answers, and the shared store's own check passes."""
        self.wire.ping()
        self.store.check()

    def describe(self) -> str:
        return f"{self.wire.describe()}; failed jobs and locks in {self.store.describe()})"

    def close(self) -> None:
        """Hand back the ETA messages held here at once (as a Celery worker does at shutdown), then disconnect."""
        with self._guard:
            held = self._early_held()
            self._early.clear()
            try:
                self.wire.restore(held)
            finally:
                self.wire.close()
