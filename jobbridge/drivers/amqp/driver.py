"""`AmqpDriver`: the reservation protocol on RabbitMQ, with the failed store and locks in a shared store.

A job that is due is published to its queue; one not yet due to the delay
stages (`jobbridge.drivers.amqp.topology`), which hand it to its queue when
its time comes: the broker holds it, never a worker. A reserve hands out
unacknowledged deliveries (`jobbridge.drivers.amqp.consumer`); acknowledge
acks them, release publishes the job again with its delay and then acks it,
fail writes it to the shared store's failed jobs and then acks it. A delivery
is this process's until its connection drops: the broker then hands it to
another worker as a new attempt, which is how a dead worker's jobs come back.
Beside that, each held delivery has a lease on the driver's clock, renewed by
`extend`; `reclaim_expired` hands back those whose lease lapsed (a worker whose
loop stalled), so the port's lease holds here as on every driver.

RabbitMQ cuts a delivery held longer than its ``consumer_timeout`` by closing
the whole channel; so no job may run longer than that allows (`check_jobs`,
called at a worker's start, `jobbridge.drivers.amqp.consumer_timeout`).
See docs/rabbitmq.md.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import amqp

from jobbridge.clock import SYSTEM_CLOCK, Clock
from jobbridge.drivers.amqp import consumer_timeout
from jobbridge.drivers.amqp.consumer import Consumers, Delivery
from jobbridge.drivers.amqp.failed import AmqpFailedStore
from jobbridge.drivers.amqp.parking import Parking
from jobbridge.drivers.amqp.probe import Probe
from jobbridge.drivers.amqp.publisher import Declarations, Outgoing, Publisher
from jobbridge.drivers.amqp.settings import AmqpSettings
from jobbridge.drivers.amqp.store import SharedStore, scoped_locks
from jobbridge.drivers.amqp.topology import Topology
from jobbridge.drivers.base import Capabilities, JobLimits
from jobbridge.drivers.shared.failed_rows import failed_record
from jobbridge.envelope import Envelope, Reservation, reservation_from_body
from jobbridge.errors import PayloadTooLarge
from jobbridge.redaction import mask_url
from jobbridge.store_reports import QueueCounts

log = logging.getLogger("jobbridge.drivers.amqp")
#: seconds a delivery may come before its time and still be handed out (clocks of two hosts differ a little)
EARLY = 0.5
#: what a message carries besides its body (properties, routing), kept free under the broker's size limit
FRAMING = 4096


class Receipt:
    """The delivery a reservation is, and its key among the leases: (generation, tag), made once.

    A plain class rather than a frozen dataclass, as one is made per job (a frozen one sets its
    fields through ``object.__setattr__``, and its key would be a new tuple at every look).
    """

    __slots__ = ("delivery", "key")

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.key = (delivery.generation, delivery.tag)

    def __repr__(self) -> str:
        return f"Receipt(queue={self.delivery.queue!r}, tag={self.delivery.tag}, generation={self.delivery.generation})"


class AmqpDriver:
    """Durable queues for due jobs, delay stages for the others; failures and locks in the shared store."""

    def __init__(self, settings: AmqpSettings, store: SharedStore, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings, self.store, self.clock = settings, store, clock
        self.reservation = settings.reservation
        self.topology = Topology(settings.prefix, settings.queue_type)
        self.declarations = Declarations(self.topology)
        self.publisher = Publisher(settings, self.declarations)
        self.consumers = Consumers(settings, self.declarations)
        self.probe = Probe(self.publisher.link, self.topology)
        self.max_message_bytes = settings.max_message_bytes - FRAMING
        self.capabilities = Capabilities(
            is_deferred=True, survives_a_restart=True, needs_a_worker=True,
            # classic queues dead-letter a delayed job at most once: a broker crash mid-hop can lose it
            may_lose_an_accepted_job=settings.queue_type != "quorum" or bool(store.may_lose_an_accepted_job),
            delayed_push=True, per_message_release=True, priorities=True, transactional_push=False,
            blocking_reserve=True, max_message_bytes=self.max_message_bytes,
        )
        self.failed = AmqpFailedStore(store, self.clock, self._publish, lambda q: self.topology.route(q, 0))
        self.locks = scoped_locks(store, settings.scope)
        #: (generation, tag) of each delivery handed out -> (lease deadline, queue)
        self._leases: dict[tuple[int, int], tuple[float, str]] = {}
        self.parking = Parking(self.publisher.link, self.topology, self._publish_due)

    # -- push ---------------------------------------------------------------------------------

    def check_jobs(self, jobs: Sequence[JobLimits]) -> list[str]:
        """At a worker's start: the broker's consumer_timeout against each job's timeout (`consumer_timeout`)."""
        return consumer_timeout.check_jobs(self.settings.consumer_timeout, self.reservation, jobs)

    def _delay_ms(self, env: Envelope, now: float) -> int:
        remaining = env.available_at - now
        return max(0, round(remaining * self.settings.delay_scale * 1000)) if remaining > 0 else 0

    def _outgoing(self, env: Envelope, body: bytes, now: float) -> Outgoing:
        if self.settings.delay_scale == 0 and env.available_at > now:
            return Outgoing(self.parking.route(env.queue), body, env.id, env.queue)
        return Outgoing(self.topology.route(env.queue, self._delay_ms(env, now)), body, env.id, env.queue)

    def _publish_due(self, jobs: Sequence[tuple[str, bytes, str]]) -> None:
        """``(queue, body, job id)`` straight onto their queues (parked jobs now due)."""
        self._publish([Outgoing(self.topology.route(q, 0), body, job_id, q) for q, body, job_id in jobs])

    def push(self, envelopes: Sequence[Envelope], *, transaction: object | None = None) -> None:
        if transaction is not None:
            raise TypeError("the amqp driver cannot join a transaction; the app pushes after the commit")
        now = self.clock.now()
        out = []
        for env in envelopes:
            self.topology.queue(env.queue)  # a queue RabbitMQ cannot route fails before anything is sent
            body = env.encode()
            if len(body) > self.max_message_bytes:
                raise PayloadTooLarge(
                    f"job {env.id} ({env.name}) is {len(body)} bytes encoded, and this amqp connection publishes at "
                    f"most {self.max_message_bytes} (max_message_bytes less {FRAMING} for properties): keep large "
                    "data elsewhere and pass its key, or raise max_message_size on the server and max_message_bytes")
            out.append(self._outgoing(env, body, now))
        self._publish(out)

    def _publish(self, out: Sequence[Outgoing]) -> None:
        if out:
            self.store.remember(sorted({m.queue for m in out}))
            self.publisher.publish(out)
            for m in out:
                if not m.route.stages and not m.route.parked:
                    self.consumers.pushed[m.queue] = self.consumers.pushed.get(m.queue, 0) + 1

    # -- reserve ------------------------------------------------------------------------------

    def reserve(self, queues: Sequence[str], limit: int, *, wait: float = 0.0) -> list[Reservation]:
        names = list(dict.fromkeys(queues))
        if limit <= 0 or not names:
            return []
        for queue in names:
            self.topology.queue(queue)
        self.publisher.link.heartbeat()
        if self.settings.delay_scale == 0:
            self.parking.promote(names, self.clock.now())
        link = self.consumers.link
        got = link.call("reserve jobs", lambda ch: self._reserve_now(ch, names, limit, idle=wait <= 0))
        if not got and wait > 0:
            self.consumers.wait(names, limit, wait)
            got = link.call("reserve jobs", lambda ch: self._reserve_now(ch, names, limit, idle=False, read=True))
        return got

    def _reserve_now(self, ch: amqp.Channel, names: list[str], limit: int, *, idle: bool, read: bool = False
                     ) -> list[Reservation]:
        """What is here already; then, when a delivery may be on its way that this reserve must not miss
        (`Consumers.worth_a_look`), one round trip to bring it in. ``idle``: a reserve that will not wait;
        ``read``: the socket was read to its end just now (a wait that ended), so it is not read again."""
        held: dict[str, int] = {}
        generation = self.consumers.link.generation
        for (gen, _), (_, queue) in self._leases.items():
            if gen == generation:
                held[queue] = held.get(queue, 0) + 1
        self.consumers.ensure(ch, names, limit, held)
        if not read:
            self.consumers.drain(ch, 0)
        got = self._hand_out(ch, names, limit)
        if len(got) < limit and self.consumers.worth_a_look(
                names, [r.receipt.delivery.queue for r in got], held, idle=idle):
            self.consumers.catch_up(ch, names, limit - len(got), held)
            got += self._hand_out(ch, names, limit - len(got))
        return got

    def _hand_out(self, ch: amqp.Channel, names: list[str], limit: int) -> list[Reservation]:
        """Buffered deliveries as reservations, in queue order; one that came early goes round again."""
        now = self.clock.now()
        got: list[Reservation] = []
        while len(got) < limit:
            batch = self.consumers.take(names, limit - len(got))
            if not batch:
                break
            lease_until = now + self.reservation
            for d in batch:
                res = reservation_from_body(d.body, receipt=Receipt(d), lease_until=lease_until, now=now,
                                            id_hint=d.job_id, queue_hint=d.queue, attempts_added=1 + d.redeliveries)
                if res.decode_error is None and res.envelope.available_at > now + EARLY and self._early(ch, res, now):
                    continue
                self._leases[d.generation, d.tag] = (lease_until, d.queue)  # the receipt's key
                got.append(res)
        return got

    def _early(self, ch: amqp.Channel, res: Reservation, now: float) -> bool:
        """A delivery before its time (a clock behind the pusher's, or a delay beyond the stages' longest)
        goes round the stages again for what is left. With shortened delays (0 < delay_scale < 1) the
        broker's shortened wait is the delay, and the job is due. True when it went round."""
        if self.settings.delay_scale < 1:
            return False
        d: Delivery = res.receipt.delivery
        self.publisher.publish([Outgoing(self.topology.route(d.queue, self._delay_ms(res.envelope, now)), d.body,
                                         res.id, d.queue)])
        ch.basic_ack(d.tag)
        return True

    # -- settle -------------------------------------------------------------------------------

    def _held(self, res: Reservation) -> bool:
        receipt: Receipt = res.receipt
        return receipt.key in self._leases and self.consumers.held(receipt.delivery)

    def _settle(self, action: str, reservations: Sequence[Reservation]) -> None:
        """Ack the deliveries still held, and forget their leases.

        A delivery taken on a connection or channel that has since closed (the
        broker cut it at consumer_timeout, or the connection dropped) cannot be
        settled: the broker handed it back, and the job runs again as a new
        attempt. That is said once per job, since its outcome here is lost.
        """
        held = []
        for r in reservations:
            if self._held(r):
                held.append(r.receipt.delivery)
            elif r.receipt.key in self._leases:
                log.warning("job %s (%s): could not %s, as its delivery went back to RabbitMQ when the reserving "
                            "channel closed (a connection lost, or a delivery held past consumer_timeout); it runs "
                            "again as a new attempt", r.id, r.envelope.name, action.split(" ")[0])
        if held:
            lowest = self._lowest_unsettled({d.tag for d in held})
            self.consumers.link.call(action, lambda ch: self.consumers.acknowledge(ch, held, lowest))
        for r in reservations:
            self._leases.pop(r.receipt.key, None)

    def _lowest_unsettled(self, settling: set[int] | frozenset[int] = frozenset()) -> int | None:
        """The lowest tag the reserving channel still holds unsettled, ``settling`` aside: a lease or a
        delivery not yet handed out. An ack with ``multiple`` may cover every tag below it and none at or above it.
        """
        generation = self.consumers.link.generation
        lowest = min((tag for gen, tag in self._leases if gen == generation and tag not in settling), default=None)
        waiting = self.consumers.lowest_outstanding()
        return waiting if lowest is None or (waiting is not None and waiting < lowest) else lowest

    def acknowledge(self, reservations: Sequence[Reservation]) -> None:
        self._settle("acknowledge jobs", reservations)

    def release(self, reservation: Reservation, delay: float) -> None:
        self._send_again(reservation, delay, reservation.envelope.attempts, "release a job")

    def hand_back(self, reservation: Reservation, delay: float) -> None:
        """As `release`, with the attempts before this delivery: the job never started."""
        self._send_again(reservation, delay, max(0, reservation.envelope.attempts - 1), "hand back a job")

    def _send_again(self, reservation: Reservation, delay: float, attempts: int, action: str) -> None:
        """Publish the job again (due after ``delay``, with ``attempts``), then acknowledge its delivery."""
        if not self._held(reservation):
            self._settle(action, [reservation])  # says so if its delivery went back with a closed channel
            return
        now = self.clock.now()
        env = reservation.envelope.replace(available_at=now + max(delay, 0.0), attempts=attempts)
        body = reservation.body if reservation.decode_error is not None else env.encode()
        self._publish([self._outgoing(env, body, now)])
        self._settle(action, [reservation])

    def fail(self, reservation: Reservation, error: str) -> None:
        if not self._held(reservation):
            self._settle("fail a job", [reservation])
            return
        env = reservation.envelope
        self.store.record(failed_record(reservation.id, env.queue, env.name, env.attempts, error, self.clock.now(),
                                        reservation.stored_body()))
        self._settle("fail a job", [reservation])

    def extend(self, reservations: Sequence[Reservation], seconds: float) -> list[Reservation]:
        self.publisher.link.heartbeat()
        self.consumers.link.heartbeat()
        until = self.clock.now() + seconds
        kept = []
        for r in reservations:
            if self._held(r):
                self._leases[r.receipt.key] = (until, r.receipt.delivery.queue)
                kept.append(dataclasses.replace(r, lease_until=until))
        return kept

    def reclaim_expired(self) -> int:
        """Hand back this process's deliveries whose lease lapsed; other processes' come back when they die."""
        now = self.clock.now()
        generation = self.consumers.link.generation
        lapsed = {key for key, (until, _) in self._leases.items() if until <= now}
        stale = [k for k in self._leases if k[0] != generation]
        for key in stale:
            self._leases.pop(key)  # handed back by the broker when their connection dropped
        if stale:
            log.warning("%d job(s) this process reserved went back to RabbitMQ when the reserving channel closed (a "
                        "connection lost, or a delivery held past consumer_timeout): they run again as new attempts",
                        len(stale))
        back = [Delivery(q, tag, b"", 0, gen, None) for (gen, tag), (_, q) in self._leases.items()
                if (gen, tag) in lapsed and gen == generation]
        if back and self.consumers.link.open:
            self.consumers.link.call("reclaim lapsed jobs", lambda ch: self.consumers.hand_back(ch, back))
        for key in lapsed:
            self._leases.pop(key, None)
        if self.settings.delay_scale == 0:
            self.parking.promote(self._queues(), now)
        return len(back)

    # -- counts and purge ---------------------------------------------------------------------

    def _queues(self) -> list[str]:
        return sorted(set(self.store.queues()) | self.declarations.queues)

    def counts(self) -> list[QueueCounts]:
        """Per queue: ready and delayed as the broker holds them, plus what this process holds.

        A delivery another worker holds is invisible here without the management
        plugin: ``reserved`` counts this process's, ``ready`` the deliveries it
        holds ahead of its threads.
        """
        out = []
        now = self.clock.now()
        if self.consumers.link.open:
            self.consumers.link.call("count jobs", lambda ch: self.consumers.drain(ch, 0))
        for queue in self._queues():
            ready, delayed = self.probe.counts(queue)
            here = [_available_at(d.body, now) for d in self.consumers.buffer.get(queue, ())]
            reserved = sum(1 for (gen, _), (_, q) in self._leases.items()
                           if gen == self.consumers.link.generation and q == queue)
            counts = QueueCounts(queue, ready + sum(1 for at in here if at <= now),
                                 delayed + sum(1 for at in here if at > now), reserved)
            if counts.pending:
                out.append(counts)
        return out

    def purge(self, queues: Sequence[str]) -> int:
        """Delete the waiting jobs (ready and delayed) of ``queues``, releasing their unique locks.

        Jobs this process holds ahead of its threads go too; a job any worker is
        running stays, since it is an unacknowledged delivery, which a purge never touches.
        """
        total = 0
        for queue in dict.fromkeys(queues):
            self.topology.queue(queue)
            envelopes = self.probe.drain(queue)
            envelopes += self._purge_local(queue)
            for env in envelopes:
                if env is not None and env.unique_key:
                    self.locks.release(env.unique_key, env.id)
            total += len(envelopes)
        return total

    def _purge_local(self, queue: str) -> list[Envelope | None]:
        """The deliveries this process holds ahead of its threads: acknowledged, and so deleted."""
        waiting = list(self.consumers.buffer.get(queue, ()))
        self.consumers.buffer.get(queue, type(waiting)()).clear()
        held = [d for d in waiting if self.consumers.held(d)]
        if held:
            lowest = self._lowest_unsettled()
            self.consumers.link.call("purge jobs", lambda ch: self.consumers.acknowledge(ch, held, lowest))
        return [_decoded(d.body) for d in waiting]

    # -- the connection -----------------------------------------------------------------------

    def migrate(self) -> None:
        """The shared store's tables (queues are declared when first pushed to or reserved from)."""
        self.store.migrate()

    def check(self) -> None:
        """The broker answers, and the shared store's own check passes.

        The broker is asked on the reserving connection, which a worker (the one that
        checks, at its start) opens next anyway; its publishing connection opens at its
        first push, which a worker whose jobs never retry never makes.
        """
        self.consumers.link.call("connect", lambda ch: None)
        self.store.check()

    def describe(self) -> str:
        s = self.settings
        return (f"amqp {mask_url(s.url)} ({s.queue_type} queues {s.prefix}<queue>, delays held by the broker; "
                f"failed jobs and locks in {self.store.describe()})")

    def close(self) -> None:
        self.consumers.close()
        self.publisher.close()


def _available_at(body: bytes, now: float) -> float:
    env = _decoded(body)
    return now if env is None else env.available_at


def _decoded(body: bytes) -> Envelope | None:
    try:
        return Envelope.decode(body)
    except Exception:  # an undecodable body is purged all the same; it holds no lock anyone could name
        return None
