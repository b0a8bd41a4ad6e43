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
each entry's next tick in memory), and sleeps until the next tick in between
(at most `MAX_WAIT`). Due ticks are judged by the store's clock, so schedulers
on hosts whose clocks disagree agree on when a tick is due. An entry's stored
last tick is read once; after that the scheduler plans from the latest tick it
saw the store record (fired by it, or found taken), which the stored one can
only have passed: a tick it offers that another scheduler fired meanwhile is
judged TAKEN by the store, as it would be anyway. While it waits, it builds the
jobs of the ticks coming up (`jobbridge.scheduling.ahead`), so that at a tick
only the store's work is left.

Entries from entry sources (`jobbridge.scheduling.sources`: a table edited
in an admin while schedulers run) are read at construction, and again when a
source's version changes (asked at most every `SOURCE_POLL` seconds, on the
app's clock, so a `FixedClock` test decides when). An entry added starts
firing, one removed stops, and one changed (its trigger, its job) is judged
afresh at the next step: its next tick in memory is forgotten. Its stored last
tick is kept, on purpose: the store holds "the latest tick that fired under
this name", a fact about the past, and a tick at or before it is a moment that
is gone whatever the new trigger says, so keeping it can only stop a double
dispatch (two schedulers, one with the old trigger and one with the new, both
offering ticks) and never hides a tick still to come. What a change must not do
is fire ticks of the new trigger that fell before the change as "missed"; a
source says so itself, bounding each entry's ticks to those after the moment
it was last defined (`jobbridge.scheduling.windows.Window`), a moment stored
with the entry, so every scheduler draws the same line whenever it noticed the
change.
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
from jobbridge.errors import ConfigurationError, JobBridgeError, UnknownConnection
from jobbridge.scheduling.ahead import LEAD, Ahead
from jobbridge.scheduling.entries import Entry, Step, Tick
from jobbridge.scheduling.relay import Relay, Then, batches
from jobbridge.wake import Wake

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.scheduling.sources import EntrySource

log = logging.getLogger("jobbridge.schedule")

#: ticks handed to the store per round trip (one transaction, one pipeline): the first batch of a step
#: `FIRST_BATCH` entries, so the earliest ticks go out at once, each next one twice the last, up to FIRE_BATCH
FIRE_BATCH = 2000
FIRST_BATCH = 250
#: the longest a scheduler sleeps between looks, whatever its entries' next ticks
MAX_WAIT = 30.0
#: the longest pause after the store failed, doubling from `FIRST_BACKOFF`
MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5
#: how often a scheduler asks each entry source whether its entries changed (one cheap read each)
SOURCE_POLL = 5.0
_UNREAD = object()


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

    def __init__(self, bridge: JobBridge, entries: Sequence[Entry] | None = None,
                 sources: Sequence[EntrySource] | None = None) -> None:
        """``entries`` None: the app's declared entries and its sources; given: those (and ``sources``) alone."""
        self.bridge = bridge
        self._static = list(bridge.schedules.entries() if entries is None else entries)
        if sources is None:
            sources = bridge.schedules.sources() if entries is None else ()
        self._sources = list(sources)
        self._read: list[tuple[object, list[Entry]]] = [(_UNREAD, []) for _ in self._sources]
        self._owner: dict[str, int] = {}
        self._polled = -math.inf
        self.entries: list[Entry] = []
        self._groups: dict[str, list[Entry]] = {}
        self._stores: dict[str, ScheduleStore] = {}
        self._next: dict[str, float] = {}
        #: the latest tick of each entry the store was seen to hold (it can only have moved on since)
        self._seen: dict[str, float] = {}
        self._ahead = Ahead()
        self._errors = 0
        self._place()
        self._poll_sources()

    def step(self) -> list[Fired]:
        """One look: sources read again if they changed, every due tick handed to its store; what each came to."""
        self._poll_sources()
        fired: list[Fired] = []
        for connection, group in self._groups.items():
            fired += self._step(connection, group)
        if self._owner and fired:
            self._tell_sources(fired)
        return fired

    # -- entry sources -----------------------------------------------------------------------

    def _poll_sources(self) -> None:
        """Ask each source for its version (at most every `SOURCE_POLL` s); read the entries of a changed one.

        Judged by the app's clock, so a `FixedClock` test decides when a look happens. A source
        that fails (its database down) is logged and keeps the entries it gave last.
        """
        now = self.bridge.clock.now()
        if not self._sources or now < self._polled + SOURCE_POLL:
            return
        self._polled = now
        changed = False
        for index, source in enumerate(self._sources):
            try:
                version = source.version()
                if version == self._read[index][0]:
                    continue
                self._read[index] = (version, list(source.entries()))
            except Exception as exc:  # an outage of the source's database must not stop the other entries
                log.warning("schedule source %s could not be read (%s: %s); keeping its entries as they were",
                            source.name, type(exc).__name__, exc)
                continue
            changed = True
        if changed:
            self._place()

    def _place(self) -> None:
        """Group the entries by connection: the declared ones, then each source's (a clash is skipped).

        Each source entry's next tick is forgotten, so the next step looks at every one of
        them in the store: a changed trigger is judged afresh, and the stored last tick
        still decides what fired already (the module docstring says why that is right).
        """
        entries, owner = self._merged()
        groups: dict[str, list[Entry]] = {}
        for entry in entries:
            try:
                connection = self.bridge.settings.connection(entry.connection).name
            except UnknownConnection as exc:
                if entry.name not in owner:
                    raise
                log.error("schedule %s: connection: %s; it is skipped", entry.name, exc)
                continue
            groups.setdefault(connection, []).append(entry)
        for name, group in list(groups.items()):
            if name not in self._stores and not self._store_for(name, group, owner):
                del groups[name]
        kept = {entry.name for group in groups.values() for entry in group}
        self.entries = [entry for entry in entries if entry.name in kept]
        self._groups, self._owner = groups, {name: i for name, i in owner.items() if name in kept}
        self._next = {name: tick for name, tick in self._next.items() if name in kept and name not in owner}
        self._seen = {name: tick for name, tick in self._seen.items() if name in kept and name not in owner}
        self._ahead.keep(kept)

    def _merged(self) -> tuple[list[Entry], dict[str, int]]:
        """The declared entries, then each source's; which source each came from (a clash is skipped)."""
        entries, owner = list(self._static), {}
        taken = {entry.name for entry in entries}
        for index, (_, found) in enumerate(self._read):
            for entry in found:
                if entry.name in taken:
                    log.warning("schedule %s from %s: an entry of that name is declared already; the declared "
                                "one fires, this one is skipped (rename one of them)", entry.name,
                                self._sources[index].name)
                    continue
                taken.add(entry.name)
                entries.append(entry)
                owner[entry.name] = index
        return entries, owner

    def _store_for(self, connection: str, group: list[Entry], owner: dict[str, int]) -> bool:
        """Open ``connection``'s schedule store; refused: a boot error for declared entries, a log line for others."""
        try:
            self._stores[connection] = store_for(self.bridge, connection, [e.name for e in group])
        except ConfigurationError as exc:
            if any(entry.name not in owner for entry in group):
                raise
            log.error("%s; these entries are skipped", exc)
            return False
        return True

    def _tell_sources(self, fired: list[Fired]) -> None:
        """Each source hears what fired of its own entries; a source that fails is logged, the ticks stay fired."""
        for index, source in enumerate(self._sources):
            own = [f for f in fired if self._owner.get(f.entry) == index]
            if not own:
                continue
            try:
                source.fired(own)
            except Exception as exc:
                log.warning("schedule source %s could not record what fired (%s: %s)", source.name,
                            type(exc).__name__, exc)

    def _step(self, connection: str, group: list[Entry]) -> list[Fired]:
        store = self._stores[connection]
        now = store.now()
        due = sorted((entry for entry in group if self._next.get(entry.name, -math.inf) <= now),
                     key=lambda entry: self._next.get(entry.name, -math.inf))  # the earliest due first
        if not due:
            return []
        shift = now - self.bridge.clock.now()
        fired: list[Fired] = []

        def heard(chunk: list[tuple[Entry, Step, Envelope | None]]) -> Then:
            return lambda outcomes: fired.extend(self._report(connection, entry, step, env, outcome)
                                                 for (entry, step, env), outcome in zip(chunk, outcomes, strict=True))

        # more than one batch: each is in the store (in a thread) while the next is read and built
        with Relay(store.fire_many, threaded=len(due) > FIRST_BATCH) as relay:
            for entries in batches(due, FIRST_BATCH, FIRE_BATCH):
                last = self._last_of(store, entries)
                planned = [(entry, step, self._envelope(entry, step, shift)) for entry in entries
                           for step in entry.plan(last.get(entry.name), now)]
                for start in range(0, len(planned), FIRE_BATCH):
                    chunk = planned[start:start + FIRE_BATCH]
                    relay.send([Firing(entry.name, step.tick, env) for entry, step, env in chunk], heard(chunk))
        for entry in due:  # only once every tick is in the store: a failed call leaves them due
            following = entry.trigger.next_after(now)
            self._next[entry.name] = math.inf if following is None else following
        return fired

    def _last_of(self, store: ScheduleStore, entries: Sequence[Entry]) -> dict[str, float]:
        """Each entry's last tick: the one seen in the store, else read (missing: never fired)."""
        last = {entry.name: self._seen[entry.name] for entry in entries if entry.name in self._seen}
        unread = [entry.name for entry in entries if entry.name not in last]
        if unread:
            last.update((name, got.tick) for name, got in store.last(unread).items())
        return last

    def _envelope(self, entry: Entry, step: Step, shift: float) -> Envelope | None:
        """The tick's job, or None to record the tick alone (skipped, or a job that cannot be built)."""
        if not step.push:
            return None
        built = self._ahead.take(entry, step.tick, shift)
        if built is not None:
            return built
        try:
            return entry.envelope(Tick(entry.name, step.tick), shift)
        except (JobBridgeError, ValueError) as exc:
            log.error("schedule %s: the job of tick %s could not be built (%s); the tick is skipped",
                      entry.name, _when(step.tick), exc)
            return None

    def _report(self, connection: str, entry: Entry, step: Step, env: Envelope | None, outcome: Fire) -> Fired:
        """The log line and signal of one fired tick."""
        if step.tick > self._seen.get(entry.name, -math.inf):  # every outcome: the store holds this tick or later
            self._seen[entry.name] = step.tick
        job_id = env.id if env is not None and outcome is Fire.PUSHED else None
        logged = log.isEnabledFor(logging.INFO)  # 10,000 ticks on the minute: no time formatted for nothing
        if job_id is not None and env is not None:
            if logged:
                log.info("schedule=%s tick=%s job_id=%s queue=%s fired", entry.name, _when(step.tick), job_id,
                         env.queue)
            if signals.job_dispatched.receivers:
                cls = self.bridge.registry.get(env.name) if env.name in self.bridge.registry else None
                signals.send(signals.job_dispatched, cls, id=job_id, envelope=env, connection=connection)
        elif outcome is Fire.ADVANCED and logged:
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

    def prepare(self) -> None:
        """Build the jobs of the ticks due within `LEAD` seconds (`jobbridge.scheduling.ahead`)."""
        for connection, group in self._groups.items():
            store = self._stores[connection]
            now, local = store.now(), self.bridge.clock.now()
            coming = [(entry, tick) for entry in group
                      if now < (tick := self._next.get(entry.name, math.inf)) <= now + LEAD]
            self._ahead.build(coming, now - local, local)

    def until_due(self) -> float:
        """Seconds until the earliest next tick (at most `MAX_WAIT`)."""
        wait = MAX_WAIT
        for connection, group in self._groups.items():
            soonest = min((self._next.get(e.name, -math.inf) for e in group), default=math.inf)
            if soonest < math.inf:
                wait = min(wait, soonest - self._stores[connection].now())
        if self._sources:
            wait = min(wait, self._polled + SOURCE_POLL - self.bridge.clock.now())
        return max(0.0, wait)

    def run(self, stop: Wake) -> None:
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
            self._prepared()
            stop.wait(self.until_due())
        log.info("scheduler stopped")

    def _prepared(self) -> None:
        """`prepare`; a failure only means the jobs are built at their ticks, so it is logged and passed."""
        try:
            self.prepare()
        except Exception as exc:
            log.warning("scheduler: the jobs of the coming ticks could not be built ahead (%s: %s); they are "
                        "built at their ticks", type(exc).__name__, exc)


class SchedulerThread:
    """A scheduler in a thread of its own: what ``jobbridge worker --schedule`` starts beside the worker."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._stop = Wake()
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
