"""The results of a run and how they are printed: plain tables, ratios to jobbridge, the machine."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Row:
    """One throughput figure (or why there is none)."""

    library: str
    key: str  # scenario key shared across libraries, for the ratio
    scenario: str  # the label shown, may name the library's own configuration
    jobs: int = 0
    seconds: float | None = None
    steady: float | None = None  # jobs/s after the first job started (processing only)
    per_cpu: float | None = None  # jobs per CPU-second of the worker processes, after the first job
    note: str = ""
    error: str = ""

    @property
    def rate(self) -> float | None:
        if self.error or not self.seconds:
            return None
        return self.jobs / self.seconds


@dataclass
class LatencyRow:
    library: str
    config: str
    samples: list[float] = field(default_factory=list)  # seconds
    lost: int = 0
    note: str = ""
    error: str = ""

    def percentile(self, p: float) -> float | None:
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]


def machine() -> str:
    """The machine line printed above every table."""
    cores = os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"machine: {cores} cores, {platform.machine()}, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()} ({sys.executable}); load average {load}")


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_rows(title: str, rows: Sequence[Row], baseline: str = "jobbridge") -> str:
    """The throughput table: jobs/s, and how many times jobbridge's figure for that scenario is this one."""
    base: dict[str, float] = {}
    for r in rows:  # the first jobbridge row of each scenario: the default configuration, before any variant
        if r.library.startswith(baseline) and r.rate:
            base.setdefault(r.key, r.rate)
    header = ("library", "scenario", "jobs", "seconds", "jobs/s", "steady/s", "jobs/cpu-s", "jobbridge ÷ this",
              "note")
    body = []
    for r in rows:
        rate = r.rate
        ratio = "-"
        ref = base.get(r.key)
        if rate and ref:
            ratio = f"{ref / rate:.2f}x"
        note = r.error or r.note
        body.append((r.library, r.scenario, _fmt(r.jobs) if r.jobs else "-",
                     "-" if r.error or r.seconds is None else f"{r.seconds:.2f}",
                     _fmt(rate) if not r.error else "n/a", _fmt(r.steady), _fmt(r.per_cpu), ratio, note))
    under = [line for line in (*log_level_lines(rows), *floor_lines(rows)) if line]
    return "\n".join([_table(title, header, body), *(["", *under] if under else [])])


def log_level_lines(rows: Sequence[Row], suffix: str = "-warning") -> list[str]:
    """Under the table: each jobbridge configuration at its default log level as a share of the same at WARNING.

    The headline rows run the worker at its default level (a line per attempt);
    the share says what that line costs (issue 19's target: at least 85%).
    """
    by_key = {(r.library, r.key): r for r in rows}
    lines = []
    for r in rows:
        quiet = by_key.get((r.library, r.key + suffix))
        if quiet is None or not r.rate or not quiet.rate:
            continue
        share = [f"{r.rate / quiet.rate:.0%} of the jobs/s"]
        if r.per_cpu and quiet.per_cpu:
            share.append(f"{r.per_cpu / quiet.per_cpu:.0%} of the jobs/cpu-s")
        lines.append(f"  {r.library} {r.scenario} at the default log level (INFO): {' and '.join(share)} "
                     "at -l warning")
    return ["", *lines] if lines else []


def floor_lines(rows: Sequence[Row], marker: str = "(bare)") -> list[str]:
    """Under the table: jobbridge's processing at its defaults as a share of the bare client's on the same store.

    Issue 19's targets are a share of what the store itself allows, measured in
    the same run (`benchmarks.store_floor`): a floor row shares its key with
    the jobbridge row it is set beside.
    """
    floors = {r.key: r for r in rows if r.library.endswith(marker) and r.key.startswith("process") and r.rate}
    lines = []
    for r in rows:
        floor = floors.get(r.key)
        if floor is None or floor.rate is None or not r.library.startswith("jobbridge") or not r.rate:
            continue
        lines.append(f"  {r.library} {r.scenario} at INFO: {r.rate / floor.rate:.0%} of the bare client's limit "
                     f"({r.rate:,.0f} jobs/s against {floor.rate:,.0f})")
    return lines


def render_latency(title: str, rows: Sequence[LatencyRow]) -> str:
    header = ("library", "worker", "samples", "p50 ms", "p99 ms", "max ms", "note")
    body = []
    for r in rows:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v * 1000:.2f}"

        note = r.error or "; ".join(filter(None, [r.note, f"{r.lost} not started within 5s" if r.lost else ""]))
        body.append((r.library, r.config, str(len(r.samples)), ms(r.percentile(50)), ms(r.percentile(99)),
                     ms(max(r.samples) if r.samples else None), note))
    return _table(title, header, body)


def _table(title: str, header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for line in body:
        for i, cell in enumerate(line[:-1]):
            widths[i] = max(widths[i], len(cell))
    numeric = {2, 3, 4, 5, 6, 7} if len(header) == 9 else {2, 3, 4, 5}

    def fmt(cells: Sequence[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            if i == len(cells) - 1:
                out.append(cell)
            elif i in numeric:
                out.append(cell.rjust(widths[i]))
            else:
                out.append(cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [title, fmt(header), fmt(["-" * w for w in widths[:-1]] + ["-" * 4])]
    lines += [fmt(line) for line in body]
    return "\n".join(lines)
