"""The scheduler: look at the entries that are due, and hand each due tick to the store to fire.

Any number of schedulers may run at once, on any host: a thread in every
``jobbridge worker --schedule`` (in the process that supervises the others,
never in each child) and any number of ``jobbridge scheduler`` processes. None
of them leads. Each computes the same ticks from the same triggers and offers
each due tick to the store, which pushes the tick's job only if no one fired
that tick yet (`jobbridge.drivers.schedule_port`). So a scheduler that dies
at any instant costs nothing: the next one that looks fires what is due,
and no tick is dispatched twice.

A scheduler reads the store only when one of its entries is due (it keeps
each entry's next tick in memory), once per due tick and batch of entries,
and sleeps until the next tick in between (at most `MAX_WAIT`). Due ticks are
judged by the store's clock, so schedulers on hosts whose clocks disagree
agree on when a tick is due.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobbridge import signals
from jobbridge.drivers.schedule_port import Fire, Firing, LastTick, ScheduleStore, schedule_store_of
from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError, JobBridgeError
from jobbridge.scheduling.entries import Entry, Step, Tick

if TYPE_CHECKING:
    from jobbridge.app import JobBridge

log = logging.getLogger("jobbridge.schedule")

#: ticks handed to the store per round trip (one transaction, one pipeline)
FIRE_BATCH = 500
#: the longest a scheduler sleeps between looks, whatever its entries' next ticks
MAX_WAIT = 30.0
#: the longest pause after the store failed, doubling from `FIRST_BACKOFF`
MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5


@dataclass(frozen=True, slots=True)
class Fired:
    """What one tick handed to the store came to."""

    entry: str
    tick: float
    outcome: Fire
    job_id: str | None


def store_for(bridge: JobBridge, connection: str, entries: Sequence[str]) -> ScheduleStore:
    """The connection's schedule store; a boot error saying what to declare when its driver has none."""
    store = schedule_store_of(bridge.driver(connection))
    if store is not None:
        return store
    kind = bridge.settings.connection(connection).driver
    names = ", ".join(repr(e) for e in entries)
    raise ConfigurationError(
        f"schedule {names}: connection {connection!r} uses the {kind} driver, which cannot record an entry's "
        "last tick in the same step as the push of the tick's job, so two schedulers could both dispatch one "
        "tick. Give the entry connection = \"<name>\" of a database or redis connection (the job is pushed "
        "to that store's queue, and its workers run it)")


class Scheduler:
    """Fires an app's due ticks; `step` once (tests, with a `FixedClock`), or `run` until stopped."""

    def __init__(self, bridge: JobBridge, entries: Sequence[Entry] | None = None) -> None:
        self.bridge = bridge
        self.entries = list(bridge.schedules.entries() if entries is None else entries)
        self._groups: dict[str, list[Entry]] = {}
        for entry in self.entries:
            name = bridge.settings.connection(entry.connection).name
            self._groups.setdefault(name, []).append(entry)
        self._stores = {name: store_for(bridge, name, [e.name for e in group])
                        for name, group in self._groups.items()}
        self._next: dict[str, float] = {}
        self._errors = 0

    def step(self) -> list[Fired]:
        """One look: every due tick of every entry handed to its store; what each came to."""
        fired: list[Fired] = []
        for connection, group in self._groups.items():
            fired += self._step(connection, group)
        return fired

    def _step(self, connection: str, group: list[Entry]) -> list[Fired]:
        store = self._stores[connection]
        now = store.now()
        due = [entry for entry in group if self._next.get(entry.name, -math.inf) <= now]
        if not due:
            return []
        last = store.last([entry.name for entry in due])
        shift = now - self.bridge.clock.now()
        planned: list[tuple[Entry, Step, Envelope | None]] = []
        for entry in due:
            stored = last.get(entry.name)
            for step in entry.plan(None if stored is None else stored.tick, now):
                planned.append((entry, step, self._envelope(entry, step, shift)))
        fired: list[Fired] = []
        for start in range(0, len(planned), FIRE_BATCH):
            chunk = planned[start:start + FIRE_BATCH]
            outcomes = store.fire_many([Firing(entry.name, step.tick, env) for entry, step, env in chunk])
            fired += [self._report(connection, entry, step, env, outcome)
                      for (entry, step, env), outcome in zip(chunk, outcomes, strict=True)]
        for entry in due:  # only once every tick is in the store: a failed call leaves them due
            following = entry.trigger.next_after(now)
            self._next[entry.name] = math.inf if following is None else following
        return fired

    @staticmethod
    def _envelope(entry: Entry, step: Step, shift: float) -> Envelope | None:
        """The tick's job, or None to record the tick alone (skipped, or a job that cannot be built)."""
        if not step.push:
            return None
        try:
            return entry.envelope(Tick(entry.name, step.tick), shift)
        except (JobBridgeError, ValueError) as exc:
            log.error("schedule %s: the job of tick %s could not be built (%s); the tick is skipped",
                      entry.name, _when(step.tick), exc)
            return None

    def _report(self, connection: str, entry: Entry, step: Step, env: Envelope | None, outcome: Fire) -> Fired:
        """The log line and signal of one fired tick."""
        job_id = env.id if env is not None and outcome is Fire.PUSHED else None
        if job_id is not None and env is not None:
            log.info("schedule=%s tick=%s job_id=%s queue=%s fired", entry.name, _when(step.tick), job_id, env.queue)
            cls = self.bridge.registry.get(env.name) if env.name in self.bridge.registry else None
            signals.send(signals.job_dispatched, cls, id=job_id, envelope=env, connection=connection)
        elif outcome is Fire.ADVANCED:
            why = "a unique job of it is still pending" if env is not None else "missed, or expired before it fired"
            log.info("schedule=%s tick=%s skipped (%s)", entry.name, _when(step.tick), why)
        return Fired(entry.name, step.tick, outcome, job_id)

    def fire_now(self, name: str) -> str | None:
        """Fire ``name`` now, by hand: a tick of its own (it never stands for a grid tick); the job's id."""
        entry = next((e for e in self.entries if e.name == name), None)
        if entry is None:
            entry = self.bridge.schedules.entry(name)  # the error naming what is declared
        connection = self.bridge.settings.connection(entry.connection).name
        store = self._stores[connection]
        now = store.now()
        env = entry.envelope(Tick(entry.name, now, manual=True), now - self.bridge.clock.now())
        return self.bridge.push([env], connection=connection)[0]

    def now(self, entry: Entry) -> float:
        """The clock of the store ``entry`` fires in."""
        return self._stores[self.bridge.settings.connection(entry.connection).name].now()

    def last_ticks(self) -> dict[str, LastTick]:
        """Every entry's stored last tick (for ``jobbridge schedules``)."""
        found: dict[str, LastTick] = {}
        for connection, group in self._groups.items():
            found.update(self._stores[connection].last([e.name for e in group]))
        return found

    def until_due(self) -> float:
        """Seconds until the earliest next tick (at most `MAX_WAIT`)."""
        wait = MAX_WAIT
        for connection, group in self._groups.items():
            soonest = min((self._next.get(e.name, -math.inf) for e in group), default=math.inf)
            if soonest < math.inf:
                wait = min(wait, soonest - self._stores[connection].now())
        return max(0.0, wait)

    def run(self, stop: threading.Event) -> None:
        """Fire due ticks until ``stop`` is set; a failing store is logged and tried again with backoff."""
        log.info("scheduler started: %d entr%s", len(self.entries), "y" if len(self.entries) == 1 else "ies")
        while not stop.is_set():
            try:
                self.step()
            except Exception as exc:  # a store outage (or a driver bug) must not end the scheduler
                self._errors += 1
                delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** min(self._errors - 1, 10))
                log.warning("scheduler: a store call failed (%s: %s); looking again in %.1fs",
                            type(exc).__name__, exc, delay)
                stop.wait(delay)
                continue
            self._errors = 0
            stop.wait(self.until_due())
        log.info("scheduler stopped")


class SchedulerThread:
    """A scheduler in a thread of its own: what ``jobbridge worker --schedule`` starts beside the worker."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._stop = threading.Event()
        self._thread = threading.Thread(target=scheduler.run, args=(self._stop,), name="jobbridge-scheduler",
                                        daemon=True)

    def start(self) -> SchedulerThread:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop looking; a tick being fired finishes first (it is one store call)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


def _when(tick: float) -> str:
    return datetime.fromtimestamp(tick, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
