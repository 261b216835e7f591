"""Section 6: peak memory (and throughput) of a real ``awty run-slot`` process on a big slot."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

from ..common import fmt_n, slot_at
from ..disk import remove_home, settle
from ..homes import check_summary

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    n = b.a.rss_jobs
    rm = b.rep.row("rss", f"run-slot (CLI) peak RSS, {fmt_n(n)}-job slot", "MB",
                      "≤ 150 MB", lambda v: v <= 150, "{:,.1f}")
    rt = b.rep.row("rss_rate", f"run-slot (CLI) throughput, {fmt_n(n)} callbacks",
                      "callbacks/s")
    from awty.slots import slot_id

    slot = slot_at(8)
    for run in range(b.a.runs):
        home = b.homes.path("rss")
        b.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
        settle()
        p = b.awty_cli(["run-slot", slot_id(slot), "--json", "--home", str(home)],
                          slot + timedelta(seconds=5), timeout=1800)
        summary = json.loads(p.stdout)
        check_summary(summary, n, "run-slot (CLI)")
        rm.values.append(p.maxrss_kb * 1024 / 1e6)
        rt.values.append(n / p.wall)
        b.rep.details.append(
            f"rss run {run + 1}: peak RSS {p.maxrss_kb / 1024:.1f} MiB, wall {p.wall:.2f} s "
            f"(slot {summary.get('seconds')} s inside)")
        b.check_receiver()
        remove_home(home)
    b.rep.notes.append(
        f"RSS: `awty run-slot <slot> --json` as a subprocess with AWTY_NOW 5 s after the "
        f"boundary; peak RSS is its ru_maxrss, taken by a small launcher (bench/launch.py: "
        f"taken by the bench itself, it would be at least the bench's own size), MB = 10^6 "
        f"bytes; throughput is {fmt_n(n)} / the process's wall time (start-up included).")
