"""The jobs of each entry's next tick, built while the scheduler waits for that tick.

Building a tick's job (the factory, the payload's encoding, its checks) is most
of a scheduler's own work at a tick: tens of microseconds per entry, so a
quarter of a second when 10,000 entries fall due on the same minute, all of it
between the tick and the last push. The scheduler knows each entry's next tick,
so it builds the job of that tick beforehand, while it would otherwise sleep
(`Ahead.build`), and at the tick only the store's work remains.

A job built early is the job built at its tick: its clock-derived times (created,
available, a factory's expiry) are moved forward to the tick (`Entry.envelope`'s
``early``). One is used only for the very entry it was built for (an entry changed by
its source is another object), for the very tick, and under the same clock shift;
anything else is built afresh at the tick, as it would have been without this.
Nothing here decides what fires: the store still judges every tick.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from jobbridge.envelope import Envelope
from jobbridge.errors import JobBridgeError
from jobbridge.scheduling.entries import Entry, Tick

log = logging.getLogger("jobbridge.schedule")

#: a job is built ahead when its tick is at most this many seconds away
LEAD = 45.0
#: a job built under a store-clock shift further than this from the tick's is built again
SHIFT_TOLERANCE = 0.05


@dataclass(frozen=True, slots=True)
class _Built:
    entry: Entry
    tick: float
    shift: float
    envelope: Envelope


class Ahead:
    """Jobs built for entries' next ticks, each taken (once) at its tick."""

    def __init__(self) -> None:
        self._built: dict[str, _Built] = {}

    def build(self, due: Iterable[tuple[Entry, float]], shift: float, local_now: float) -> None:
        """Build the job of each ``(entry, tick)`` not built yet; ``local_now`` is this process's clock now."""
        for entry, tick in due:
            held = self._built.get(entry.name)
            if held is not None and held.entry is entry and held.tick == tick:
                continue
            try:
                env = entry.envelope(Tick(entry.name, tick), shift, early=max(0.0, tick - shift - local_now))
            except (JobBridgeError, ValueError):
                continue  # built again at the tick, where the failure is logged and the tick skipped
            self._built[entry.name] = _Built(entry, tick, shift, env)

    def take(self, entry: Entry, tick: float, shift: float) -> Envelope | None:
        """The job built for ``entry``'s ``tick`` under ``shift``, or None (then build it now)."""
        held = self._built.pop(entry.name, None)
        if held is None or held.entry is not entry or held.tick != tick or abs(held.shift - shift) > SHIFT_TOLERANCE:
            return None
        return held.envelope

    def keep(self, names: set[str]) -> None:
        """Forget the jobs of every entry not in ``names``."""
        self._built = {name: held for name, held in self._built.items() if name in names}
