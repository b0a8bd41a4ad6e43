"""The issues' targets, checked against a run's figures and printed under each table (never asserted).

A target is a rate (jobs/s) a scenario must reach, a latency it must stay
under, or a ratio to a peer's rate in the same run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.report import LatencyRow, Row


@dataclass(frozen=True)
class Target:
    label: str
    library: str
    key: str  # a Row key, or "latency-p50" / "latency-p99"
    at_least: float | None = None
    at_most: float | None = None
    times: str | None = None  # compare with this library's rate in the same scenario

    def check(self, rows: Sequence[Row], latency: Sequence[LatencyRow]) -> str:
        """One line: the target, the figure measured, and whether it was met."""
        value = self._value(self.library, rows, latency)
        goal = (f">= {self.at_least:,g}" if self.at_least is not None else f"<= {self.at_most:,g}")
        if self.key.startswith("latency") and self.at_most is not None:
            goal = f"< {self.at_most * 1000:g} ms"
        if self.times is not None:
            peer = self._value(self.times, rows, latency)
            if value is None or not peer:
                return f"  target {self.label} {goal}x {self.times}: not measured"
            ratio = value / peer
            verdict = "met" if ratio >= (self.at_least or 0) else "MISSED"
            return (f"  target {self.label}: {goal}x {self.times} -> {ratio:.1f}x "
                    f"({value:,.0f} vs {peer:,.0f} jobs/s): {verdict}")
        if value is None:
            return f"  target {self.label} {goal}: not measured"
        met = (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)
        shown = f"{value * 1000:.2f} ms" if self.key.startswith("latency") else f"{value:,.0f} jobs/s"
        return f"  target {self.label} {goal}: {shown}: {'met' if met else 'MISSED'}"

    def _value(self, library: str, rows: Sequence[Row], latency: Sequence[LatencyRow]) -> float | None:
        if self.key.startswith("latency-"):
            percentile = float(self.key.removeprefix("latency-p"))
            for lat in latency:
                if lat.library == library:
                    return lat.percentile(percentile)
            return None
        for row in rows:
            if row.library == library and row.key == self.key:
                return row.rate
        return None
