"""Section 5: catch-up of many missed slots vs one slot holding as many jobs."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from ..common import BASE, fmt_n, slot_at
from ..disk import remove_home, settle
from ..homes import catchup_summary, check_summary

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    k, per = b.a.catchup_slots, b.a.catchup_per_slot
    total = k * per
    rc = b.rep.row("catchup", f"catch-up {k} slots × {fmt_n(per)}", "s", fmt="{:.2f}")
    ro = b.rep.row("oneslot", f"one slot of {fmt_n(total)}", "s", fmt="{:.2f}")
    rr = b.rep.row("catchup_ratio", "catch-up ratio (missed slots / one slot)", "×",
                      "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
    gen_now = BASE - timedelta(hours=1)
    run_now = slot_at(k) + timedelta(seconds=5)  # every missed slot is in the past
    for run in range(b.a.runs):
        hc, ho = b.homes.path("catchup"), b.homes.path("one-slot")
        b.homes.fill(hc, total, lambda i: slot_at(i // per), now=gen_now)
        b.homes.fill(ho, total, lambda i: slot_at(k - 1), now=gen_now)
        times = {}
        for home in ((hc, ho) if run % 2 == 0 else (ho, hc)):
            settle()
            with b.homes.open(home, run_now) as a:
                t0 = time.perf_counter()
                if home == hc:
                    c = a.catchup()
                    summary = catchup_summary(c)
                    nslots = sum(1 for s in c.slots if s.ran)
                else:
                    summary = a.run_slot(slot_at(k - 1)).to_dict()
            times[home] = time.perf_counter() - t0  # close() included
            check_summary(summary, total, "catch-up" if home == hc else "one slot")
        rc.values.append(times[hc])
        ro.values.append(times[ho])
        rr.values.append(times[hc] / times[ho])
        b.rep.details.append(
            f"catch-up run {run + 1}: {nslots} slots ran in {times[hc]:.2f} s "
            f"({total / times[hc]:,.0f}/s); one slot {times[ho]:.2f} s "
            f"({total / times[ho]:,.0f}/s)")
        b.check_receiver()
        remove_home(hc)
        remove_home(ho)
    if b.a.profile:
        hc, ho = b.homes.path("catchup-prof"), b.homes.path("one-slot-prof")
        b.homes.fill(hc, total, lambda i: slot_at(i // per), now=gen_now)
        b.homes.fill(ho, total, lambda i: slot_at(k - 1), now=gen_now)
        with b.homes.open(hc, run_now) as a:
            b.profiled("catchup", a.catchup)
        with b.homes.open(ho, run_now) as a:
            b.profiled("one_slot", lambda: a.run_slot(slot_at(k - 1)))
        remove_home(hc)
        remove_home(ho)
    b.rep.notes.append(
        f"Catch-up: `Awty.catchup()` over {k} missed slots of {fmt_n(per)} jobs vs "
        f"`run_slot` of one slot holding {fmt_n(total)}, both against the receiver, "
        f"fresh homes each run, same FixedClock. Both retire their finished slot "
        f"directories and start one background `rm` when they return; the bench waits "
        f"for it before the next timed run.")
