"""`Schedules`: an app's entries, declared in code (``bridge.schedule(...)``) and in the ``schedules`` section.

Entries are checked when a scheduler starts (`entries`), not when declared:
the app may register its jobs after declaring a schedule, and a check at that
point would refuse a job that is about to exist. The check builds each entry's
envelope once, so an unregistered job, a payload field that cannot be encoded
or a queue name out of range fails the boot, naming the entry.

Entries that change while schedulers run come from entry sources
(`add_source`, `jobbridge.scheduling.sources`): each scheduler reads them
itself, and again whenever a source says it changed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobbridge.envelope import Envelope
from jobbridge.errors import ConfigurationError, JobBridgeError, UnknownConnection
from jobbridge.scheduling import config
from jobbridge.scheduling.entries import CatchUp, Entry, EnvelopeFactory, Tick
from jobbridge.scheduling.triggers import trigger_of

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.scheduling.sources import EntrySource


@dataclass(frozen=True)
class _Declared:
    """An entry as ``bridge.schedule`` was given it: its job is resolved when the entries are checked."""

    name: str
    make: Callable[[JobBridge], tuple[EnvelopeFactory, str]]
    options: Mapping[str, Any] = field(default_factory=dict)


class Schedules:
    """The entries of one app; `entries` returns them checked, each name once."""

    def __init__(self, bridge: JobBridge) -> None:
        self._bridge = bridge
        self._declared: dict[str, _Declared] = {}
        self._checked: list[Entry] | None = None
        self._sources: list[EntrySource] = []
        self._lock = threading.Lock()

    def add(self, name: str, job: Any = None, *, every: object = None, cron: object = None,
            tz: str | None = None, queue: str | None = None, tries: int | None = None, expires: object = None,
            catch_up: CatchUp = "latest", connection: str | None = None, fields: Mapping[str, Any] | None = None,
            headers: Mapping[str, Any] | None = None, envelope: EnvelopeFactory | None = None) -> None:
        """Declare an entry; see `JobBridge.schedule`."""
        if name in self._declared:
            raise ConfigurationError(f"schedule {name!r}: declared twice; an entry's name is its key in the store")
        if (job is None) == (envelope is None):
            raise ConfigurationError(f"schedule {name!r}: job: give a job (an instance, or a class with fields=) "
                                     "or envelope= (a function of the tick), exactly one")
        trigger_of(every, cron, tz)  # a bad trigger fails here, where it was written
        make = _factory_for(job, queue=queue, tries=tries, fields=fields, headers=headers, envelope=envelope)
        options = {"every": every, "cron": cron, "tz": tz, "expires": expires, "catch_up": catch_up,
                   "connection": connection}
        with self._lock:
            self._declared[name] = _Declared(name, make, options)
            self._checked = None

    def add_source(self, source: EntrySource) -> None:
        """Read entries from ``source`` too, in every scheduler made after this; adding it again does nothing.

        A source's entries never fail the boot: a bad one is logged and skipped, and an
        entry whose name code or configuration declares already is skipped (the declared one
        fires), so that an edit in a running admin cannot stop a scheduler.
        """
        with self._lock:
            if not any(found is source for found in self._sources):
                self._sources.append(source)

    def sources(self) -> list[EntrySource]:
        with self._lock:
            return list(self._sources)

    def entries(self) -> list[Entry]:
        """Every entry, code and configuration, checked; a bad one fails naming the entry and the field."""
        with self._lock:
            if self._checked is None:
                self._checked = self._check()
            return list(self._checked)

    def entry(self, name: str) -> Entry:
        for found in self.entries():
            if found.name == name:
                return found
        names = ", ".join(e.name for e in self.entries()) or "none"
        raise ConfigurationError(f"no schedule entry is named {name!r}; declared: {names}")

    def _check(self) -> list[Entry]:
        bridge = self._bridge
        section = bridge.settings.schedules
        entries = [self._resolve(d) for d in self._declared.values()]
        for name, table in section.items():
            if name in self._declared:
                raise ConfigurationError(f"schedule {name!r}: declared both in code and in the schedules "
                                         f"section ({bridge.settings.source}); keep one")
            entries.append(config.entry_from(bridge, name, table, bridge.settings.source))
        return [_probed(bridge, entry) for entry in entries]

    def _resolve(self, declared: _Declared) -> Entry:
        bridge, options = self._bridge, declared.options
        try:
            build, job = declared.make(bridge)
        except JobBridgeError as exc:
            raise ConfigurationError(f"schedule {declared.name!r}: job: {exc}") from None
        trigger = trigger_of(options["every"], options["cron"], options["tz"], bridge.settings.timezone)
        return Entry(declared.name, trigger, build, job, connection=options["connection"],
                     catch_up=options["catch_up"], expires=options["expires"])


def _factory_for(job: Any, *, queue: str | None, tries: int | None, fields: Mapping[str, Any] | None,
                 headers: Mapping[str, Any] | None,
                 envelope: EnvelopeFactory | None) -> Callable[[JobBridge], tuple[EnvelopeFactory, str]]:
    """How to build the entry's envelopes once the app's jobs are registered: (factory, the job's name)."""
    if envelope is not None:
        return lambda bridge: (envelope, "")
    if isinstance(job, type):
        made = job(**dict(fields or {}))
    elif fields is not None:
        raise ConfigurationError("fields= goes with a job class; a job instance carries its own fields")
    else:
        made = job

    def make(bridge: JobBridge) -> tuple[EnvelopeFactory, str]:
        name = bridge.registry.name_of(type(made))

        def build(tick: Tick) -> Envelope:
            return bridge.envelope(made, queue=queue, tries=tries, headers=headers)

        return build, name

    return make


def _probed(bridge: JobBridge, entry: Entry) -> Entry:
    """The entry, its envelope built once, so what cannot be dispatched fails the boot rather than a tick."""
    try:
        env = entry.envelope(Tick(entry.name, bridge.clock.now()))
    except (JobBridgeError, ValueError) as exc:
        raise ConfigurationError(f"schedule {entry.name!r}: job: cannot be dispatched: {exc}") from None
    if entry.connection is not None:
        try:
            bridge.settings.connection(entry.connection)
        except UnknownConnection as exc:
            raise ConfigurationError(f"schedule {entry.name!r}: connection: {exc}") from None
    return entry if entry.job else dataclasses.replace(entry, job=env.name)
