"""The worker: reserve in batches, run attempts on threads, settle in batches, keep leases alive.

One loop thread (the caller of `Worker.run`) talks to the store; ``concurrency``
threads (`jobbridge.pool`) run attempts through the `Executor`. The loop
reserves what the threads will start soon, stores finished attempts together
(`jobbridge.settling`), renews every held reservation each quarter lease, and
reclaims lapsed ones every half lease. Store errors, and anything else a store
call raises, are logged, signalled and retried with backoff: no message and no
outcome can stop the loop (`jobbridge.store_calls`). Whether a lease is still the worker's is judged by
this process's monotonic clock (`jobbridge.worker_leases`). When
to stop is the `Lifecycle`'s (jobbridge.worker_lifecycle: running, draining,
stopping, halted): `stop` drains (finishes and settles what is held),
`stop(now=True)` leaves at once, and an attempt stuck past its timeout (blocked
in C) drains and sets ``replace_process``: the caller exits with
`REPLACE_EXIT_CODE` or re-executes itself. docs/worker.md is the manual.
"""

from __future__ import annotations

import logging
import random
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from jobbridge import signals
from jobbridge.drivers.base import AcknowledgingReserve, ReadsCancellations
from jobbridge.envelope import Reservation
from jobbridge.execution import Executor
from jobbridge.outcome import Outcome, WorkStats
from jobbridge.pool import Pool
from jobbridge.rate_gate import RateGate
from jobbridge.settling import Settler
from jobbridge.store_calls import MAX_BACKOFF as MAX_BACKOFF
from jobbridge.store_calls import StoreCalls
from jobbridge.wake import Wake
from jobbridge.worker_leases import Leases
from jobbridge.worker_lifecycle import REPLACE_EXIT_CODE as REPLACE_EXIT_CODE
from jobbridge.worker_lifecycle import STOPPED_AT_ONCE_EXIT_CODE as STOPPED_AT_ONCE_EXIT_CODE
from jobbridge.worker_lifecycle import Lifecycle
from jobbridge.worker_options import WorkerOptions as WorkerOptions
from jobbridge.worker_process import banner
from jobbridge.worker_process import check_worker_driver as check_worker_driver
from jobbridge.worker_process import on_stop_signals as on_stop_signals
from jobbridge.worker_tally import Tally
from jobbridge.worker_window import HeldBack, room

if TYPE_CHECKING:
    from jobbridge.app import JobBridge

log = logging.getLogger("jobbridge.worker")


class _StopNow(BaseException):
    """Raised by the second signal's handler to leave the loop wherever it is."""


class Worker:
    """Runs jobs from one connection's queues until stopped; see the module docstring."""

    def __init__(self, bridge: JobBridge, options: WorkerOptions | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.bridge = bridge
        #: the clock of the worker's own timers and lease bookkeeping (a test may shift it)
        self.monotonic = monotonic
        self.options = options or WorkerOptions()
        conn = bridge.settings.connection(self.options.connection)
        self.connection = conn.name
        self.lease = conn.reservation
        self.driver = bridge.driver(conn.name)
        #: the driver, when it can acknowledge and reserve in one transaction (`_settle`), starting the batch
        #: held back from its last call while the store works (`worker_window`)
        self._combined = self.driver if isinstance(self.driver, AcknowledgingReserve) else None
        self._held_back = HeldBack(self._start)
        #: the driver looks the result store's cancellations up in its reserve (`ReadsCancellations`, set by `run`)
        self._reads_cancellations = False
        self.executor: Executor = bridge.executor(conn.name)
        self.tally = Tally()
        self.stats, self.counts = self.tally.stats, self.tally.counts  # the monitor thread reads `counts`
        self._pool: Pool | None = None
        self._wake = Wake()  # set by a stop signal's handler on this same thread, too (`jobbridge.wake`)
        self.lifecycle = Lifecycle(wake=self._wake.set, once=self.options.once, max_jobs=self.options.max_jobs,
                                   stop_when_empty=self.options.stop_when_empty)
        self._done: deque[Outcome] = deque()
        self.leases = Leases(self.lease)
        self._held = self.leases.held  # the same dict, never replaced: read on every round
        self._handed_back = 0  # jobs `_hand_back` gave back to the store, ever (`_accept` counts what it took)
        self._stuck: set[str] = set()
        self._calls = StoreCalls(self, sleep=self.options.sleep, connection=self.connection, monotonic=monotonic)
        self._store = self._calls.call
        self._settler = Settler(self.driver, failed=self._calls.failed, succeeded=self._calls.ok)
        self._next_beat = self._next_reclaim = 0.0
        #: when (``monotonic``) the loop last came round; a liveness file is touched only while it does
        self.last_loop = monotonic()
        self.gate = RateGate.for_worker(bridge.registry, self.driver, lease=self.lease, monotonic=monotonic,
                                        store=self._store, file=self.options.rate_limit_file,
                                        ends_by_itself=self.options.once or self.options.stop_when_empty)

    # -- life cycle --------------------------------------------------------------------------

    def run(self) -> WorkStats:
        """Work until stopped (or --once / --max-jobs / --stop-when-empty); returns what was done."""
        self.bridge.settings.check_reservations()
        self.gate.check(self.connection, self.bridge.settings.connection(self.connection).driver)
        tracker = self.executor.tracker
        self._reads_cancellations = (tracker is not None and isinstance(self.driver, ReadsCancellations)
                                     and self.driver.read_cancellations(tracker.store))
        pool = self._pool = Pool(self.options.concurrency, self.executor.run, self._finished, executor=self.executor)
        watchdog = self.executor.watchdog
        watchdog.listeners.append(self._on_stuck)
        restore = on_stop_signals(self._on_signal)
        signals.send(signals.worker_started, self, worker=self)
        try:
            self._loop(pool)
        except _StopNow:
            pass  # the lifecycle is stopping already: the second signal's handler said so
        finally:
            restore()
            pool.close()
            watchdog.listeners.remove(self._on_stuck)
            self.lifecycle.halt()
        if self.lifecycle.stopped_at_once:
            self._announce_stop()
            log.warning("stopped at once: %d job(s) left reserved; they run again once their "
                        "reservations lapse", len(self._held))
        signals.send(signals.worker_stopped, self, worker=self, stats=self.stats)
        return self.stats

    def stop(self, now: bool = False) -> None:
        """Take no new jobs and finish the held ones; ``now``: leave without settling anything."""
        if now:
            self.lifecycle.stop_now("asked to stop")
        else:
            self.lifecycle.drain("asked to stop")

    @property
    def exit_code(self) -> int:
        """What a worker process should exit with after `run` returned."""
        return self.lifecycle.exit_code

    @property
    def replace_process(self) -> bool:
        """An attempt got stuck: the process must be replaced."""
        return self.lifecycle.replace_process

    @property
    def held(self) -> int:
        """How many reservations this worker holds now (running, or reserved ahead of its threads)."""
        return len(self._held)

    @property
    def running(self) -> int:
        """How many attempts run now, on this worker's threads."""
        pool = self._pool
        return 0 if pool is None else pool.running

    @property
    def stopped_at_once(self) -> bool:
        """A second signal (or ``stop(now=True)``) left without settling."""
        return self.lifecycle.stopped_at_once

    @property
    def ignore_second_signal(self) -> bool:
        """Set for a supervised child: its supervisor escalates with SIGKILL, not a second signal."""
        return self.lifecycle.ignore_second_signal

    @ignore_second_signal.setter
    def ignore_second_signal(self, value: bool) -> None:
        self.lifecycle.ignore_second_signal = value

    def banner(self) -> str:
        """What a starting worker prints: where the jobs are, which queues, how many at once."""
        return banner(self.bridge, self.options, self.driver, connection=self.connection, lease=self.lease)

    def _announce_stop(self) -> None:
        """Once, on the loop's thread, after the lifecycle left running: log and signal why."""
        reason = self.lifecycle.announcement()
        if reason is not None:
            log.info("worker stopping (%s): no new jobs; finishing %d held job(s)", reason, len(self._held))
            signals.send(signals.worker_stopping, self, worker=self, stats=self.stats, reason=reason)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.lifecycle.signalled(signal.Signals(signum).name):
            raise _StopNow

    def _on_stuck(self, job_id: str) -> None:
        """From the watchdog: an attempt outlived its timeout by the grace period (blocked in C)."""
        self._stuck.add(job_id)
        log.error("job %s is still running after its timeout and cannot be interrupted (blocked outside "
                  "Python); this process takes no new jobs and will be replaced", job_id)
        self.lifecycle.stuck(job_id)

    # -- the loop ----------------------------------------------------------------------------

    def _loop(self, pool: Pool) -> None:
        self._next_reclaim = self.monotonic()  # reclaim at once: a dead worker's jobs come back now
        while not self.lifecycle.stopping:
            self._wake.clear()
            self.last_loop = self.monotonic()
            if self.lifecycle.draining:
                self._held_back.start_now()
                self._announce_stop()
                if not (self.options.once or self.options.stop_when_empty):
                    self.gate.hand_back_all(self._hand_back)  # a stopping worker starts no waiting job
                if not self._busy():
                    return
            backoff = self._calls.backoff_until - self.monotonic()
            if backoff > 0:
                self._pause(backoff)
                continue
            self._settle()
            self._timers()
            self.gate.start_due(pool.submit, self._hand_back)
            room = self._room()
            if not self.lifecycle.running or room <= 0:
                if self.lifecycle.running or self._busy():
                    self._pause(self._until_timer())
                continue
            self._take(pool, room)

    def _take(self, pool: Pool, limit: int) -> None:
        combined, held_back, queues = self._combined, self._held_back, self.options.queues
        blocking = not self._held and not self.lifecycle.drains and self.driver.capabilities.blocking_reserve
        wait = min(self.options.sleep, self._until_timer()) if blocking else 0.0
        asked = self.monotonic()  # a lease granted by this call ends no sooner than a lease from now
        overlapped = bool(held_back) and combined is not None  # only a combining driver's batch is held back
        if overlapped:  # the held-back batch starts while this one is reserved
            assert combined is not None
            got = self._store("reserve", lambda: held_back.call(combined, (), queues, limit))
        else:
            got = self._store("reserve", lambda: self.driver.reserve(queues, limit, wait=wait))
        if got is None:
            return
        self._accept(got, asked, hold_back=overlapped and self._holds_back())  # an idle worker's: at once
        if got and blocking:  # an idle worker's jobs start before the loop goes on in Python (`Pool.let_them_start`)
            pool.let_them_start()
        if got or not self.lifecycle.running:
            return
        if self.lifecycle.drains:
            self._pause(self._until_timer())  # until a held job finishes
        elif not blocking:
            self._pause(min(self.options.sleep, self._until_timer()))

    def _holds_back(self) -> bool:
        """Whether the batch a call returns now waits for the loop's next call (`worker_window`); never with a
        job budget (``--once``, ``--max-jobs``), which counts a batch as it starts."""
        life = self.lifecycle
        return self._combined is not None and life.running and not life.draining and life.budget is None

    def _accept(self, got: list[Reservation], asked: float, *, hold_back: bool = False) -> None:
        """Hold what a reserve (``asked``: when it was called) returned, and hand it to the threads (or, with
        ``hold_back``, to `HeldBack`, which does when the next call is on its way)."""
        if got and not self._reads_cancellations:  # one look at the cancelled set per batch: a cancelled job
            # is acknowledged unrun (a driver that read them in the reserve marked its reservations instead)
            self._store("check cancellations", lambda: self.executor.refresh_cancellations([r.id for r in got]))
        self.leases.hold(got, asked)
        if hold_back and got and not self.gate.limits_any(got):  # a rate limit's turns are a store call, which
            self._held_back.hold(got)  # must not be made from inside another (`HeldBack` starts it there)
        else:
            self._start(got)

    def _start(self, got: list[Reservation]) -> None:
        pool = self._pool
        assert pool is not None
        handed_back = self._handed_back
        self.gate.admit(got, pool.submit, self._hand_back)  # a rate-limited job may wait for its turn
        taken = len(got) - (self._handed_back - handed_back)  # a job handed back unstarted was not taken
        self.lifecycle.took(taken, held=len(self._held))  # the budget spent, or the drain done, ends the run

    def _room(self, settling: int = 0) -> int:
        """How many jobs to reserve now (`worker_window.room`): the free threads, plus a few ahead while jobs
        are short. Jobs held ahead are renewed by the heartbeat like running ones and run before a graceful
        stop. ``settling``: held jobs about to be let go (acknowledged in the same call as the reserve).
        """
        held = len(self._held) - self.gate.waiting - settling  # waiting: no thread
        return self.lifecycle.room(room(self.options.concurrency, held, self.tally.avg_ms,
                                        overlapping=self._combined is not None))

    def _busy(self) -> bool:
        """Held jobs still to finish (a stuck one is not waited for) or outcomes still to store."""
        return bool(self._done or self._settler.pending) or any(i not in self._stuck for i in self._held)

    def _pause(self, seconds: float) -> None:
        if self._held_back and not (self._done and self.lifecycle.running):  # no outcome to settle next:
            self._held_back.start_now()  # no call comes to start it
        if seconds > 0:
            self._wake.wait(seconds)

    def _until_timer(self) -> float:
        """Seconds until the loop has something to do of its own: a heartbeat, a reclaim, a settle retry."""
        due = min(self._next_beat, self._next_reclaim)
        if self._settler.pending:
            due = min(due, self._calls.backoff_until)
        return min(max(0.0, due - self.monotonic()), self.gate.until_due())

    def _finished(self, outcome: Outcome) -> None:
        """From a pool thread: hand the outcome to the loop.

        The wake is set only when it is not set already: the loop clears it before it
        collects, so an outcome appended while it is still set is collected by that same round.
        """
        self._done.append(outcome)
        if not self._wake.is_set():
            self._wake.set()

    # -- settling ----------------------------------------------------------------------------

    def _settle(self) -> None:
        """Store finished attempts (see `jobbridge.settling`), then let go of those done with.

        With acknowledgements to store and room to reserve, a driver that offers
        `AcknowledgingReserve` stores them and claims the next jobs in one
        transaction; with no room they are acknowledged alone, never held back.
        """
        self._collect()
        plain = self._settler.combinable()  # once per round: the room and the combined call both use it
        limit = self._combined_room(len(plain))
        taken: list[tuple[list[Reservation], float]] = []
        if not (plain and limit > 0):
            self._held_back.start_now()  # no combined call is coming to start it

        def acknowledging(done: Sequence[Reservation]) -> None:
            assert self._combined is not None  # _combined_room is 0 without it
            asked = self.monotonic()  # as in `_take`: the lease runs from before the call
            taken.append((self._held_back.call(self._combined, done, self.options.queues, limit), asked))

        self._let_go(self._settler.settle(self._still_ours, acknowledging=acknowledging if limit > 0 else None,
                                          plain=plain))
        for got, asked in taken:
            self._accept(got, asked, hold_back=self._holds_back())

    def _combined_room(self, combinable: int) -> int:
        """How many jobs to reserve with the ``combinable`` acknowledgements now pending (0: acknowledge them alone)."""
        if self._combined is None or not self.lifecycle.running or self.gate.waiting:
            return 0
        return self._room(combinable)

    def _collect(self) -> None:
        """Finished attempts to the settler; one whose lease was lost is let go unstored."""
        done, lost = self._done, self.leases.lost
        pending = self._settler.pending  # appended to here: `Settler.add`, without a call per job
        while done:
            outcome = done.popleft()
            if lost and outcome.reservation.envelope.id in lost:
                log.warning("job %s finished after its reservation was lost; its outcome (%s) is not "
                            "stored, and another attempt runs or will run", outcome.reservation.id, outcome.label)
                self._let_go((outcome,))
            else:
                pending.append(outcome)

    def _hand_back(self, res: Reservation, delay: float) -> bool:
        """A rate-limited job that did not start goes back to the store, its attempt uncounted."""
        def hand_back() -> bool:
            self.driver.hand_back(res, delay)
            return True

        if self._store("hand back", hand_back) is None:
            return False
        self.leases.drop(res.id)
        self._handed_back += 1
        return True

    def _still_ours(self, job_id: str) -> bool:
        """Whether the lease of ``job_id`` lasts yet, by this process's monotonic clock (never the wall clock)."""
        return self.leases.still_ours(job_id, self.monotonic())

    def _let_go(self, outcomes: Sequence[Outcome]) -> None:
        """Done with these jobs: no longer held, so no longer renewed; counted (`Tally`)."""
        self.tally.let_go(outcomes, self.leases.drop, self._stuck)

    # -- leases and reclaim ------------------------------------------------------------------

    def _timers(self) -> None:
        now = self.monotonic()
        if self._held_back and (now >= self._next_beat or now >= self._next_reclaim):
            self._held_back.start_now()  # it waits for no store call but the next reserve
        if now >= self._next_beat:
            self._next_beat = now + self.lease / 4
            self._heartbeat()
        if now >= self._next_reclaim:
            self._next_reclaim = now + self.lease / 2 * random.uniform(0.8, 1.2)
            count = self._store("reclaim", self.driver.reclaim_expired)
            if count:
                log.info("reclaimed %d job(s) whose reservation lapsed", count)
            if self.executor.tracker is not None:
                self.executor.tracker.maybe_prune()

    def _heartbeat(self) -> None:
        """Renew every held reservation that is running or waiting to run (`Leases.to_renew`)."""
        live = self.leases.to_renew(self._settler.waiting())
        if not live:
            return
        asked = self.monotonic()
        kept = self._store("extend", lambda: self.driver.extend(live, self.lease))
        # a cancellation reaches held jobs within one heartbeat: waiting ones are skipped, and
        # running ones cancelled with terminate are stopped
        self._store("check cancellations", lambda: self.executor.refresh_cancellations(list(self._held)))
        if kept is not None:
            self.leases.renewed_by(live, kept, asked)
