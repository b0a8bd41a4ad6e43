"""Where jobbridge reads the time: one injectable clock, so tests fix it instead of sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock seconds since the epoch, as a float."""

    def now(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()


SYSTEM_CLOCK = SystemClock()
