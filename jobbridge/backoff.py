"""How long a failed attempt waits before the next: exponential or fixed, with jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Backoff:
    """A retry delay policy; `delay(attempt)` is seconds to wait after failed attempt ``attempt``.

    Jitter draws the delay uniformly from its upper half, so workers that
    failed together (a dependency went down) do not all retry in the same second.
    """

    kind: Literal["exponential", "fixed"]
    base: float
    max: float
    jitter: bool = True

    @classmethod
    def exponential(cls, base: float = 1.0, max: float = 300.0, jitter: bool = True) -> Backoff:
        """``base`` after the first failure, doubling after each, capped at ``max``."""
        if base < 0 or max < base:
            raise ValueError(f"exponential backoff needs 0 <= base <= max, got base={base}, max={max}")
        return cls("exponential", float(base), float(max), jitter)

    @classmethod
    def fixed(cls, seconds: float, jitter: bool = False) -> Backoff:
        """The same wait after every failure."""
        if seconds < 0:
            raise ValueError(f"fixed backoff needs seconds >= 0, got {seconds}")
        return cls("fixed", float(seconds), float(seconds), jitter)

    def delay(self, attempt: int) -> float:
        exponent = min(max(attempt - 1, 0), 62)
        full = self.base if self.kind == "fixed" else min(self.max, self.base * 2.0**exponent)
        return random.uniform(full / 2, full) if self.jitter else full


DEFAULT_BACKOFF = Backoff.exponential()
