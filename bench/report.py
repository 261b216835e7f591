"""The table: one row per figure (median of its runs, min, max, SPEC 11 target), printed with
Rich and written as Markdown with the notes, import times, per-run details and profiles."""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Row:
    key: str
    label: str
    unit: str
    target: str = "—"
    check: Callable[[float], bool] | None = None
    fmt: str = "{:,.0f}"
    values: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def cell(self, v: float | None) -> str:
        return "—" if v is None else self.fmt.format(v) + (f" {self.unit}" if self.unit else "")

    @property
    def met(self) -> str:
        if self.error:
            return "error"
        if self.skipped or not self.values:
            return "skipped" if self.skipped else "—"
        if self.check is None:
            return "—"
        return "yes" if self.check(self.median) else "NO"


class Report:
    def __init__(self, args):
        self.args = args
        self.rows: dict[str, Row] = {}
        self.notes: list[str] = []
        self.details: list[str] = []
        self.imports: list[tuple[str, float, float]] = []
        self.notable: list[tuple[str, float]] = []
        self.facts: list[tuple[str, str]] = []
        self.profiles: list[str] = []
        self.missed: list[tuple[str, str]] = []  # (key, label) of each row that missed its target

    def row(self, key: str, label: str, unit: str, target: str = "—",
            check: Callable[[float], bool] | None = None, fmt: str = "{:,.0f}") -> Row:
        r = self.rows[key] = Row(key, label, unit, target, check, fmt)
        return r

    def table_rows(self) -> list[list[str]]:
        out = []
        for r in self.rows.values():
            if r.error:
                med, lo, hi = f"error: {r.error}", "", ""
            elif r.skipped:
                med, lo, hi = "skipped", "", ""
            else:
                med = r.cell(r.median)
                lo = r.cell(min(r.values)) if r.values else "—"
                hi = r.cell(max(r.values)) if r.values else "—"
            out.append([r.label, med, lo, hi, str(len(r.values)), r.target, r.met])
        return out


HEADERS = ["Benchmark", "Median", "Min", "Max", "Runs", "SPEC 11 target", "Met"]


def print_table(rep: Report, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    width = None if sys.stdout.isatty() else max(170, int(os.environ.get("COLUMNS") or 0))
    console = Console(width=width)
    t = Table(title=title, title_justify="left")
    for h in HEADERS:
        t.add_column(h, justify="left" if h in ("Benchmark", "SPEC 11 target") else "right",
                     overflow="fold")
    for cells in rep.table_rows():
        met = cells[-1]
        style = {"yes": "green", "NO": "bold red", "error": "bold red"}.get(met)
        t.add_row(*cells[:-1], f"[{style}]{met}[/]" if style else met)
    console.print(t)
    for n in rep.notes:
        console.print(f"• {n}", highlight=False, markup=False)
    if rep.imports:
        console.print("`awty add`: top imports by cumulative time (python -X importtime; "
                      "↳ = nested in the line above it)", highlight=False, markup=False)
        it = Table()
        it.add_column("module")
        it.add_column("cumulative ms", justify="right")
        it.add_column("self ms", justify="right")
        for name, cum, self_ in rep.imports:
            it.add_row(name, f"{cum:.1f}", f"{self_:.1f}")
        console.print(it)


def write_markdown(rep: Report, path: Path, title: str) -> None:
    a = rep.args
    lines = [f"# {title}", ""]
    if a.quick:
        lines += ["> **Quick mode**: reduced sizes and one run each — a smoke test of the bench, "
                  "not the SPEC 11 figures.", ""]
    lines += ["Written by `scripts/bench`. Each figure is the median of the runs shown (min and "
              "max beside it); targets are SPEC 11's. The figures are measurements, not tests.",
              "", "## Command", "", "```", rep.command, "```", "", "## Machine", "",
              "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep.facts]
    lines += ["", "## Results", "", "| " + " | ".join(HEADERS) + " |",
              "|" + "|".join(["---"] + ["---:"] * 4 + ["---", "---"]) + "|"]
    for cells in rep.table_rows():
        cells = [c.replace("|", "\\|") for c in cells]
        if cells[-1] == "NO":
            cells[-1] = "**NO**"
        lines.append("| " + " | ".join(cells) + " |")
    if rep.missed:  # why: the hand-kept block below, by the row's key (kept.py)
        lines += ["", "## Targets not met", "", "Why each was missed, by its key: \"Why a target "
                  "is missed\" below.", ""]
        lines += [f"- **{label}** (`{key}`)" for key, label in rep.missed]
    from .kept import KEPT, carry

    for name in KEPT:  # `--peers` figures stay until it runs again; the history is hand-kept
        if (block := carry(path, name)) is not None:
            lines += ["", block]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in rep.notes]
    if rep.imports:
        lines += ["", "## `awty add` import time", "",
                  "One `awty add` under `python -X importtime`: the top-level imports by "
                  "cumulative time, each followed by its heaviest direct children (↳, counted "
                  "in the parent's figure). A top-level line that is not `awty.cli` was "
                  "imported while the command ran (a lazy import).", "",
                  "| module | cumulative ms | self ms |", "|---|---:|---:|"]
        lines += [f"| `{n}` | {c:.1f} | {s:.1f} |" for n, c, s in rep.imports]
        if rep.notable:
            lines += ["", "Heavy modules loaded by that call (cumulative ms where first imported): "
                      + ", ".join(f"`{n}` {c:.1f}" for n, c in rep.notable) + "."]
    if rep.details:
        lines += ["", "## Per-run details", ""] + [f"- {d}" for d in rep.details]
    if rep.profiles:
        lines += ["", "## Profiles", ""] + rep.profiles
    path.write_text("\n".join(lines) + "\n")
