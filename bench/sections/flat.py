"""Section 4: flatness — a slot's run time with a million other jobs pending vs with none."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import BASE, R, alternate, fmt_n, slot_at
from ..disk import remove_home, settle
from ..homes import check_summary

if TYPE_CHECKING:
    from awty.api import Awty

    from ..context import Bench


def _cancel_entity(a: Awty, pending: int, keys: int = 5) -> list[float]:
    """Milliseconds per ``cancel_entity`` of one key held by one pending job."""
    out = []
    for k in range(keys):
        t0 = time.perf_counter()
        res = a.cancel_entity("order", str((pending // 2 + 7919 * k) % pending))
        out.append((time.perf_counter() - t0) * 1000)
        if len(res.cancelled) != 1:
            raise RuntimeError(f"flatness cancel --entity: cancelled {len(res.cancelled)}, "
                               "expected 1")
    return out


def timed_round(b: Bench, slot: datetime, homes: tuple[Path, ...], n: int, gen_now: datetime,
                settings: dict[Path, dict[str, str]] | None = None
                ) -> tuple[dict[Path, float], dict[Path, float]]:
    """Add ``n`` jobs due at ``slot`` to each home in turn (their callbacks to the timing
    receiver) and time its ``run_slot``: seconds with ``close()`` included, and due → last
    callback, per home. ``settings``: a home's own (a PostgreSQL schema)."""
    st = b.stamps
    times, lasts = {}, {}
    for home in homes:
        own = (settings or {}).get(home, {})
        b.homes.fill(home, n, lambda i: slot, now=gen_now, url=st.url(), **own)
        settle()
        st.reset()
        with b.homes.open(home, slot + timedelta(seconds=5), **own) as a:
            due = time.time()
            t0 = time.perf_counter()
            s = a.run_slot(slot)
        times[home] = time.perf_counter() - t0  # close() included
        check_summary(s.to_dict(), n, "flatness run-slot")
        lasts[home] = st.wait(n, 30, quiet=0).last - due
    return times, lasts


def run(b: Bench) -> None:
    n, pending = b.a.flat_due, b.a.flat_pending
    r0 = b.rep.row("flat0", f"flatness: {fmt_n(n)}-job slot, 0 pending", "s",
                      fmt="{:.3f}")
    r1 = b.rep.row("flat1", f"flatness: {fmt_n(n)}-job slot, {fmt_n(pending)} pending",
                      "s", fmt="{:.3f}")
    rr = b.rep.row("flat_ratio", "flatness ratio (pending / none), whole run_slot incl. "
                   "close()", "×", "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
    l0 = b.rep.row("flat_last0", f"flatness due → last callback: {fmt_n(n)}-job slot, 0 "
                   "pending", "s", fmt="{:.3f}")
    l1 = b.rep.row("flat_last1", f"flatness due → last callback: {fmt_n(n)}-job slot, "
                   f"{fmt_n(pending)} pending", "s", fmt="{:.3f}")
    lr = b.rep.row("flat_last_ratio", "flatness ratio (pending / none), due → last callback",
                   "×", "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
    rc = b.rep.row("flat_cancel", f"cancel --entity order --key K at {fmt_n(pending)} pending "
                   "(one job, library call)", "ms", fmt="{:.1f}")
    empty, full = b.homes.path("flat-empty"), b.homes.path("flat-pending")
    week = 7 * 96
    gen_now = BASE - timedelta(hours=1)
    t0 = time.perf_counter()
    spent = b.homes.fill(full, pending,
                            lambda i: BASE + timedelta(days=2, minutes=R * (i % week) + 1),
                            now=gen_now)
    gen_wall = time.perf_counter() - t0
    with b.homes.open(empty, gen_now) as a:
        a.init()
    db_size = (full / "awty.db").stat().st_size
    runs = b.a.flat_runs
    for run in range(-1, runs):  # run -1: a warm-up of both homes, not counted
        order = alternate(run, empty, full)
        times, lasts = timed_round(b, slot_at(2 + run), order, n, gen_now)
        b.rep.details.append(
            f"flatness {'warm-up' if run < 0 else f'run {run + 1}'}: 0 pending "
            f"{times[empty]:.3f} s, {fmt_n(pending)} pending {times[full]:.3f} s "
            f"({times[full] / times[empty]:.2f}×; due → last callback {lasts[empty]:.3f} s and "
            f"{lasts[full]:.3f} s, {lasts[full] / lasts[empty]:.2f}×; "
            f"{'empty home first' if order[0] == empty else 'full home first'})")
        if run >= 0:
            r0.values.append(times[empty])
            r1.values.append(times[full])
            rr.values.append(times[full] / times[empty])
            l0.values.append(lasts[empty])
            l1.values.append(lasts[full])
            lr.values.append(lasts[full] / lasts[empty])
        b.check_receiver()
    with b.homes.open(full, BASE) as a:
        left = a.count()
        rc.values.extend(_cancel_entity(a, pending))
    b.rep.notes.append(
        f"Flatness: the {fmt_n(pending)} pending jobs were added through the public "
        f"`add_many` in chunks of 50,000 (rows and envelope files, exactly as a user's adds), "
        f"spread over {week} future slots (one week); that took {gen_wall:.0f} s "
        f"({pending / spent:,.0f} jobs/s inside add_many); database {db_size / 1e6:,.0f} MB. "
        f"Each run adds {fmt_n(n)} jobs to a fresh past slot in both homes, then times "
        f"`run_slot` (homes alternate order); {runs} runs (they are cheap once the rows "
        f"exist) after one uncounted warm-up run of each home, as a cron-driven home is "
        f"warm from its previous slot. Both ways (issue 12 #5): the whole `run_slot` "
        f"including `close()` (which may checkpoint the WAL), timed in-process, and due → "
        f"last callback, from the moment `run_slot` is called to the last callback stamped "
        f"by the timing receiver (these homes' callbacks go to it). In-process, not the CLI: "
        f"a CLI process adds the same start-up to both homes, which would flatten the ratio."
        + (f" Pending after the runs: {fmt_n(left)}." if left is not None else "")
        + " A run's jobs are added on the same fixed clock as the pending ones; their ids "
        "(ULIDs of their first due time, `ids.new_id`) sit together in the id index, as a "
        "real slot's do whenever its jobs were added (with ids of the time of adding they fell "
        "on ~950 random leaf pages, which the checkpoint in `close()` wrote back: 1.57× here)."
        + " Then `cancel_entity('order', K)` is timed on the full home for 5 keys each held by "
        "one pending job (the entity index must keep it one lookup per slot, not a scan).")
    remove_home(empty)
    remove_home(full)
