"""The console's chart of the next 24 hours: one bar a slot, as geometry for an inline SVG (no
JavaScript, nothing to fetch). Pure: slots and counts in, rectangles and labels out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from ..slots import slot_id

WIDTH, HEIGHT = 960, 190
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 12, 26
SPAN = timedelta(hours=24)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    jobs: int
    slot: str  # its id, for the link to its jobs
    title: str  # the tooltip: the slot's local time and its count


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    ticks: list[tuple[float, str]]  # x, local hour label
    grid: list[tuple[float, str]]  # y, count label
    top: int  # the count at the chart's top line
    total: int  # jobs due in the next 24 hours
    overdue: int  # jobs in slots already past (nobody fired them yet)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    base: int = HEIGHT - BOTTOM


def _nice(n: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``n`` (at least 1)."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= n:
                return m * step
        step *= 10


def next_day(slots: list[tuple[datetime, int]], current: datetime, resolution: int,
             tz: tzinfo | None) -> Chart:
    """Bars for each slot from ``current`` (the slot under way) for 24 hours, by jobs."""
    width = timedelta(minutes=resolution)
    n = int(SPAN / width)
    counts = [0] * n
    overdue = 0
    for slot, jobs in slots:
        i = int((slot - current) / width)
        if i < 0:
            overdue += jobs
        elif i < n:
            counts[i] += jobs
    top = _nice(max(counts, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / n
    gap = step * 0.15 if step > 3 else 0
    bars = []
    for i, jobs in enumerate(counts):
        if not jobs:
            continue
        h = max(plot_h * jobs / top, 1.5)
        at = (current + i * width).astimezone(tz)
        bars.append(Bar(round(LEFT + i * step + gap / 2, 2), round(TOP + plot_h - h, 2),
                        round(step - gap, 2), round(h, 2), jobs, slot_id(current + i * width),
                        f"{at:%a %H:%M}: {jobs:,} job{'s' if jobs != 1 else ''}"))
    ticks = []
    for i in range(n):
        at = (current + i * width).astimezone(tz)
        if at.minute == 0 and at.hour % 3 == 0:
            ticks.append((round(LEFT + i * step, 2), f"{at:%H:%M}"))
    grid = [(round(TOP + plot_h * (1 - f), 2), f"{int(top * f):,}") for f in (0, 0.5, 1)
            if f != 0.5 or top > 1]
    return Chart(bars, ticks, grid, top, sum(counts), overdue)
