"""The "awty beside the alternatives" table: one column per peer, each cell the median of the
finished runs with their range; printed, and kept in BENCHMARKS.md between two markers that
the default bench's report carries over (so either run leaves the other's figures in place)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ..common import fmt_n
from .run import Figures

from ..kept import markers

START, END = markers("peers")


def _cell(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    if not values:
        return "—"
    med = fmt(statistics.median(values))
    if len(values) == 1 or min(values) == max(values):
        return med
    return f"{med} ({fmt(min(values))}–{fmt(max(values))})"


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def _secs(v: float) -> str:
    return f"{v:.2f} s" if abs(v) >= 1 else f"{v * 1000:.0f} ms"


def rows(figs: list[Figures], n: int) -> tuple[list[str], list[list[str]]]:
    head = ["", *(f.peer.name for f in figs)]
    body = [
        ["callbacks/s (first → last callback)", *(_cell(f.rate, _rate) for f in figs)],
        ["due → first callback", *(_cell(f.first, _secs) for f in figs)],
        ["due → last callback", *(_cell(f.last, _secs) for f in figs)],
        ["duplicates", *(_cell(f.dups, fmt_n) for f in figs)],
        ["missing", *(_cell(f.missing, fmt_n) for f in figs)],
        [f"jobs/s scheduled ({fmt_n(n)} in one process)",
         *(_cell(f.scheduled, _rate) for f in figs)],
        ["one CLI call to schedule a job", *(_cell(f.one_ms, lambda v: f"{v:.1f} ms")
                                              for f in figs)],
        ["signed callbacks", *("—" if f.signed is None else "yes" if f.signed else "no"
                               for f in figs)],
        ["runs finished", *(_finished(f) for f in figs)],
    ]
    return head, body


def _finished(f: Figures) -> str:
    if f.skipped:
        return f"skipped: {f.skipped}"
    done = len(f.first)
    tried = done + sum(1 for x in f.failures if x.startswith("round"))
    return f"{done} of {tried}" + (f" ({f.failures[0]})" if f.failures else "")


def markdown(figs: list[Figures], a, receiver: str, took: float, python_pass_ms: float | None,
             busy: str = "") -> str:
    head, body = rows(figs, a.peers_jobs)
    lines = [START, "## awty beside the alternatives", "",
             f"Written by `scripts/bench --peers` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC "
             f"({a.peers_rounds} rounds, peers in rotating order, {a.peers_timeout:.0f} s "
             f"limit per step; took {took:.0f} s). The same workload for each: "
             f"{fmt_n(a.peers_jobs)} jobs all due at once, one POST each to one receiver "
             f"on 127.0.0.1 ({receiver}), which stamps every POST with its own clock. "
             "Median of the finished runs (min–max)."
             + (f" Other load: {busy}." if busy else ""), "",
             "| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    lines += ["", "How each was measured:", "",
              "- **due**: awty and the naive runner are what cron starts at the due moment, so "
              "due is the moment the bench starts their process (awty: the whole `awty "
              "run-slot` CLI process); APScheduler, Huey and atd are already running when "
              "their jobs' time comes, so due is the time the jobs were scheduled for.",
              "- **callbacks/s** is distinct callbacks / (last − first arrival); **duplicates** "
              "are POSTs whose `webhook-id` had already arrived; **missing** are jobs that "
              "never arrived; **jobs/s scheduled** is N / the wall time of the one process "
              "that scheduled them (interpreter start included; `at`: a shell loop of N `at` "
              "calls); **one CLI call** is the median wall time of "
              "5 processes each scheduling one job (after one untimed call)"
              + (f"; `python -c pass` takes {python_pass_ms:.1f} ms here." if python_pass_ms
                 else "."), ""]
    lines += ["How each peer was configured:", ""]
    for f in figs:
        ver = ""
        if not f.skipped:
            try:
                ver = f" ({f.peer.versions()})"
            except Exception:  # a version is a nicety
                ver = ""
        lines.append(f"- **{f.peer.name}**{ver}: {f.peer.how}"
                     + (f" Skipped: {f.skipped}." if f.skipped else ""))
    details = [d for f in figs for d in f.details]
    if details:
        lines += ["", "<details><summary>Per-run details</summary>", ""]
        lines += [f"- {d}" for d in details] + ["", "</details>"]
    lines.append(END)
    return "\n".join(lines)


def print_table(figs: list[Figures], n: int) -> None:
    from rich.console import Console
    from rich.table import Table

    head, body = rows(figs, n)
    t = Table(title=f"awty beside the alternatives ({fmt_n(n)} jobs due at once)",
              title_justify="left")
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
    for row in body:
        t.add_row(*row)
    Console(width=200).print(t)
