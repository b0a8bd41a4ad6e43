"""The issues' targets, checked against a run's figures and printed under each table (never asserted).

A target is a rate (jobs/s) a scenario must reach, a latency it must stay
under, a ratio to a peer's rate in the same run, or the most one configuration
may cost over another of the same library (telemetry on versus off).
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
    cost_versus: str | None = None  # the cost of ``key`` over this key of the same library: 1 - its rate / this rate

    def check(self, rows: Sequence[Row], latency: Sequence[LatencyRow]) -> str:
        """One line: the target, the figure measured, and whether it was met."""
        if self.cost_versus is not None:
            return self._check_cost(rows)
        return self._check_rate(rows, latency)

    def _check_cost(self, rows: Sequence[Row]) -> str:
        """What ``key`` costs over ``cost_versus`` in jobs per CPU-second (what a loaded machine keeps
        meaningful), with the cost in jobs/s beside it."""
        found = {r.key: r for r in rows if r.library == self.library}
        row, base = found.get(self.key), found.get(self.cost_versus or "")
        goal = f"<= {(self.at_most or 0):.0%}"
        if row is None or base is None or not (row.per_cpu and base.per_cpu and row.rate and base.rate):
            return f"  target {self.label} {goal}: not measured"
        cost = 1 - row.per_cpu / base.per_cpu
        verdict = "met" if cost <= (self.at_most or 0) else "MISSED"
        return (f"  target {self.label} {goal}: costs {cost:.1%} of the jobs/cpu-s ({row.per_cpu:,.0f} vs "
                f"{base.per_cpu:,.0f}) and {1 - row.rate / base.rate:.1%} of the jobs/s: {verdict}")

    def _check_rate(self, rows: Sequence[Row], latency: Sequence[LatencyRow]) -> str:
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
