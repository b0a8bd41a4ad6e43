"""The overview's charts, drawn on the server as inline SVG: no script, no chart library, nothing to fetch.

A chart is a row of bars over equal time buckets (a minute over the last hour,
a quarter of an hour over the last day) from the store's per-minute counters
(`jobbridge.drivers.throughput_port`). Two series per chart are stacked: the
attempts that succeeded and those that failed or were retried, so one look
tells throughput and failure rate; the failure rate chart draws that share as
a percentage. The browser only lays out rectangles, so a page with 96 bars is
a few kilobytes and renders with scripts turned off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup, escape

from jobbridge.drivers.throughput_port import MINUTE, MinuteCount

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 180, 44, 22, 12
OK_COLOUR, BAD_COLOUR, RATE_COLOUR = "#2f7d4f", "#c0392b", "#b9770e"


@dataclass(frozen=True, slots=True)
class Bucket:
    """The attempts that ended in one bucket of a chart, summed over queues."""

    start: int
    processed: int = 0
    bad: int = 0  # failed for good, or failed with tries left

    @property
    def rate(self) -> float:
        return 100.0 * self.bad / self.processed if self.processed else 0.0


def buckets(counts: Sequence[MinuteCount], *, now: float, span: int, width: int,
            queue: str | None = None) -> list[Bucket]:
    """``span`` seconds up to ``now`` cut into buckets ``width`` seconds wide, oldest first."""
    last = int(now // width) * width
    first = last - (span // width - 1) * width
    sums: dict[int, list[int]] = {start: [0, 0] for start in range(first, last + 1, width)}
    for count in counts:
        if queue is not None and count.queue != queue:
            continue
        start = int(count.minute // width) * width
        if start in sums:
            sums[start][0] += count.processed
            sums[start][1] += count.failed + count.released
    return [Bucket(start, p, b) for start, (p, b) in sums.items()]


def throughput_chart(data: Sequence[Bucket], title: str) -> Markup:
    """Attempts per bucket, succeeded below and failed or retried stacked on top."""
    top = _nice(max((b.processed for b in data), default=0))
    bars = []
    for i, bucket in enumerate(data):
        ok = bucket.processed - bucket.bad
        bars.append(_bar(i, len(data), 0, ok, top, OK_COLOUR, f"{_when(bucket.start)}: {ok} succeeded"))
        bars.append(_bar(i, len(data), ok, bucket.bad, top, BAD_COLOUR,
                         f"{_when(bucket.start)}: {bucket.bad} failed or retried"))
    return _frame(title, data, bars, f"{top:g}")


def failure_rate_chart(data: Sequence[Bucket], title: str) -> Markup:
    """The share of attempts that failed or were retried, per bucket, in percent."""
    top = min(100.0, _nice(max((b.rate for b in data), default=0.0)))
    bars = [_bar(i, len(data), 0, b.rate, top, RATE_COLOUR,
                 f"{_when(b.start)}: {b.rate:.1f}% of {b.processed} attempts failed")
            for i, b in enumerate(data) if b.processed]
    return _frame(title, data, bars, f"{top:g}%")


def _bar(i: int, n: int, below: float, value: float, top: float, colour: str, label: str) -> str:
    if value <= 0 or top <= 0:
        return ""
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    step = plot_w / max(n, 1)
    height = max(1.0, plot_h * value / top)
    y = TOP + plot_h - plot_h * below / top - height
    return (f'<rect x="{LEFT + i * step + step * 0.1:.1f}" y="{y:.1f}" width="{max(step * 0.8, 1):.1f}" '
            f'height="{height:.1f}" fill="{colour}"><title>{escape(label)}</title></rect>')


def _frame(title: str, data: Sequence[Bucket], bars: list[str], top_label: str) -> Markup:
    base = HEIGHT - BOTTOM
    start = _when(data[0].start) if data else ""
    end = _when(data[-1].start + (data[1].start - data[0].start if len(data) > 1 else MINUTE)) if data else ""
    empty = "" if any(bars) else (f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                                  'class="empty">no attempts ended in this span</text>')
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - 4}" y2="{base}" stroke="#888"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{escape(top_label)}</text>',
        f'<text x="{LEFT - 4}" y="{base}" text-anchor="end">0</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 4}">{escape(start)}</text>',
        f'<text x="{WIDTH - 4}" y="{HEIGHT - 4}" text-anchor="end">{escape(end)} UTC</text>',
        *bars, empty, "</svg>",
    ]
    return Markup("".join(parts))


def _nice(value: float) -> float:
    """A round axis top at or above ``value`` (1, 2, 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 1.0
    while power * 10 <= value:
        power *= 10
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M")
