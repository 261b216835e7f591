"""Section: recurring schedules (issue 32). A slot of schedules' occurrences against a slot of
one-off jobs (re-arming included: each claim makes the next occurrence in its transaction);
a slot's run with many schedules pending elsewhere against none; ``awty schedule add``
against ``awty add``."""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import BASE, alternate, fmt_n
from ..disk import remove_home, settle
from ..homes import check_summary
from .flat import timed_round

if TYPE_CHECKING:
    from ..context import Bench

HOUR = timedelta(hours=1)
WEEK = timedelta(days=7)


def fill_schedules(b: Bench, home: Path, n: int, at, *, now: datetime,
                   chunk: int = 50_000) -> float:
    """``n`` schedules, the i-th with its pending occurrence at ``at(i)`` (every week from
    there), made as ``awty import`` makes them (``Store.import_home``: the schedule rows and
    their occurrences' jobs, a chunk per transaction) from the template of one schedule made
    through ``Awty.schedule``. Returns the seconds the inserts took."""
    from awty.model import Schedule
    from awty.store.schedrules import occurrence_job

    spent = 0.0
    with b.homes.open(home, now) as a:
        a.init()
        seed = a.schedule("seed", b.url, every="7d", payload={"order": 1, "status": "placed"},
                          tz="UTC")
        a.remove_schedule("seed")
        for start in range(0, n, chunk):
            rows, jobs = [], []
            for i in range(start, min(n, start + chunk)):
                s = Schedule(f"s{i:07d}", None, int(WEEK.total_seconds()), at(i), "UTC",
                             "once", seed.window, seed.resolution, seed.template, at(i),
                             None, now)
                rows.append(s)
                jobs.append(occurrence_job(s, s.next_at, now))
            t0 = time.perf_counter()
            a.store.import_home(jobs, [None] * len(jobs), [], rows)
            spent += time.perf_counter() - t0
    return spent


def _fire(b: Bench) -> None:
    n = b.a.sched_fire
    rs = b.rep.row("sched_fire", f"run-slot (library), {fmt_n(n)} schedules' occurrences "
                   "(re-arming included)", "callbacks/s")
    ro = b.rep.row("sched_oneoff", f"run-slot (library), {fmt_n(n)} one-off jobs",
                   "callbacks/s")
    rr = b.rep.row("sched_ratio", "schedules' occurrences / one-off jobs, same slot size",
                   "×", "≥ 0.8×", lambda v: v >= 0.8, "{:.2f}")
    slot = BASE + 24 * HOUR
    gen_now = slot - HOUR
    for run in range(b.a.runs):
        homes = {"sched": b.homes.path("sched-fire"), "oneoff": b.homes.path("sched-oneoff")}
        fill_schedules(b, homes["sched"], n, lambda i: slot, now=gen_now)
        b.homes.fill(homes["oneoff"], n, lambda i: slot, now=gen_now)
        rate = {}
        for kind in alternate(run, "sched", "oneoff"):
            settle()
            with b.homes.open(homes[kind], slot + timedelta(seconds=5)) as a:
                t0 = time.perf_counter()
                s = a.run_slot(slot)
            took = time.perf_counter() - t0  # close() included
            check_summary(s.to_dict(), n, f"schedules section ({kind})")
            rate[kind] = n / took
            if kind == "sched":
                with b.homes.open(homes[kind], slot + timedelta(seconds=5)) as a:
                    made = a.count()
                if made != n:
                    raise RuntimeError(f"schedules: {made} next occurrences made, expected {n}")
        rs.values.append(rate["sched"])
        ro.values.append(rate["oneoff"])
        rr.values.append(rate["sched"] / rate["oneoff"])
        b.rep.details.append(f"schedules run {run + 1}: occurrences {rate['sched']:,.0f}/s, "
                             f"one-off {rate['oneoff']:,.0f}/s "
                             f"({rate['sched'] / rate['oneoff']:.2f}×; "
                             f"{'schedules' if run % 2 == 0 else 'one-off'} first)")
        for home in homes.values():
            remove_home(home)
        b.check_receiver()


def _flat(b: Bench) -> None:
    n, pending = b.a.sched_due, b.a.sched_pending
    r0 = b.rep.row("sched_flat0", f"{fmt_n(n)}-job slot, no schedules", "s", fmt="{:.3f}")
    r1 = b.rep.row("sched_flat1", f"{fmt_n(n)}-job slot, {fmt_n(pending)} schedules pending "
                   "in other slots", "s", fmt="{:.3f}")
    rr = b.rep.row("sched_flat_ratio", "schedules pending / none, whole run_slot", "×",
                   "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
    empty, full = b.homes.path("sched-empty"), b.homes.path("sched-pending")
    week_slots = 7 * 96
    gen_now = BASE - HOUR
    t0 = time.perf_counter()
    spent = fill_schedules(b, full, pending, lambda i: BASE + timedelta(
        days=2, minutes=15 * (i % week_slots) + 15), now=gen_now)
    built = time.perf_counter() - t0
    with b.homes.open(empty, gen_now) as a:
        a.init()
    # As many rounds as `flat`'s (7 in a full run): a round is ~0.1 s a home, whose ratio
    # spanned 0.68-1.57x within one run of 3 (BENCHMARKS.md, sched_flat_ratio).
    for run in range(-1, b.a.flat_runs):  # run -1: a warm-up of both homes, not counted
        from ..common import slot_at

        times, _ = timed_round(b, slot_at(2 + run), alternate(run, empty, full), n, gen_now)
        if run >= 0:
            r0.values.append(times[empty])
            r1.values.append(times[full])
            rr.values.append(times[full] / times[empty])
        b.check_receiver()
    b.rep.notes.append(
        f"Schedules: {fmt_n(pending)} schedules (each with its pending occurrence, spread "
        f"over a week of slots) were made through `Store.import_home`, as `awty import` makes "
        f"them, in {built:.0f} s ({pending / spent:,.0f} schedules/s inside the inserts); "
        f"then the flatness rounds of `flat` ({fmt_n(n)} one-off jobs added to a past slot of "
        f"each home, `run_slot` timed in-process; as many rounds as `flat`'s, "
        f"{b.a.flat_runs}). The fire rows compare a slot holding "
        f"{fmt_n(b.a.sched_fire)} schedules' occurrences (the claim makes each next "
        f"occurrence in its transaction) with one holding as many one-off jobs, homes "
        f"alternating order.")
    remove_home(empty)
    remove_home(full)


def _cli(b: Bench) -> None:
    n = b.a.cli_calls
    ra = b.rep.row("sched_add_median", f"awty schedule add (CLI) median wall, {n} calls", "ms",
                   fmt="{:,.1f}")
    rb = b.rep.row("sched_plain_add_median", f"awty add (CLI) median wall, {n} calls "
                   "(interleaved)", "ms", fmt="{:,.1f}")
    rr = b.rep.row("sched_add_ratio", "schedule add / add, medians", "×", "≤ 1.2×",
                   lambda v: v <= 1.2, "{:.2f}")
    home = b.homes.path("sched-cli")
    b.awty_cli(["init", "--home", str(home)], BASE)
    payload = ["--payload", '{"order": 42}', "--home", str(home)]

    def add(i: int) -> float:
        return b.awty_cli(["add", b.url, "--in", "2h", *payload], BASE).wall * 1000

    def schedule_add(i: int) -> float:
        return b.awty_cli(["schedule", "add", f"s{i}", b.url, "--cron", "0 9 * * *", "--tz",
                           "UTC", *payload], BASE).wall * 1000

    for i in range(2):  # warm the page cache and the bytecode cache
        add(i)
        schedule_add(-1 - i)
    walls: dict[str, list[float]] = {"schedule": [], "add": []}
    for i in range(n):
        for kind in alternate(i, "schedule", "add"):
            walls[kind].append(schedule_add(i) if kind == "schedule" else add(i))
    ra.values = walls["schedule"]
    rb.values = walls["add"]
    rr.values = [statistics.median(walls["schedule"]) / statistics.median(walls["add"])]
    remove_home(home)


def run(b: Bench) -> None:
    _cli(b)
    _fire(b)
    _flat(b)


LABELS = {
    "sched_add_median": "awty schedule add (CLI) median wall",
    "sched_plain_add_median": "awty add (CLI) median wall, beside schedule add",
    "sched_add_ratio": "schedule add / add", "sched_fire": "run-slot, schedules' occurrences",
    "sched_oneoff": "run-slot, one-off jobs", "sched_ratio": "occurrences / one-off",
    "sched_flat0": "slot, no schedules", "sched_flat1": "slot, schedules pending elsewhere",
    "sched_flat_ratio": "schedules pending / none",
}
KEYS = ("sched_add_median", "sched_plain_add_median", "sched_add_ratio", "sched_fire",
        "sched_oneoff", "sched_ratio", "sched_flat0", "sched_flat1", "sched_flat_ratio")
