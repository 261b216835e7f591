"""Section 3b (issue 12 #1 and #2): ``awty run-slot`` as cron starts it — a whole CLI process,
AWTY_NOW making its slot due — timed from the timing receiver's clock (bench/stamps.py): due
(the moment the process is started) → first and → last callback, for a small and a big slot;
and the big slot's callbacks/s beside the bare asyncio + httptools client in the same run."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ..common import fmt_n, slot_at
from ..disk import remove_home, settle
from ..references import bare_reference

if TYPE_CHECKING:
    from ..context import Bench

FIRST_MS = 100  # issue 12 #1: first callback within 100 ms of run-slot starting
RATE = 20_000  # issue 12 #2: ≥ 20,000 callbacks/s for a 100k slot, CLI process included
RATIO = 0.25  # … and ≥ 0.25× the bare client in the same run


def run(b: Bench) -> None:
    small, big = b.a.cli_small, b.a.cli_big
    rows = {}
    for n in (small, big):
        rows[n] = (
            b.rep.row(f"cli_first_{n}", f"run-slot (CLI) due → first callback, {fmt_n(n)}-job "
                      "slot", "ms", f"≤ {FIRST_MS} ms", lambda v: v <= FIRST_MS, "{:,.0f}"),
            b.rep.row(f"cli_last_{n}", f"run-slot (CLI) due → last callback, {fmt_n(n)}-job "
                      "slot", "s", fmt="{:.2f}"))
    rr = b.rep.row("cli_rate", f"run-slot (CLI) end to end, {fmt_n(big)} callbacks "
                   "(n / due → last)", "callbacks/s", f"≥ {RATE:,} /s", lambda v: v >= RATE)
    rb = b.rep.row("cli_bare", f"bare asyncio+httptools, {fmt_n(big)} posts, same run "
                   "(bench receiver)", "posts/s")
    rbs = b.rep.row("cli_bare_stamps", f"bare asyncio+httptools, {fmt_n(big)} posts, same "
                    "run (timing receiver)", "posts/s")
    rq = b.rep.row("cli_ratio", "run-slot (CLI) / bare (bench receiver)", "×", f"≥ {RATIO}×",
                   lambda v: v >= RATIO, "{:.2f}")
    from awty.config import Settings
    from awty.model import Attempt
    from awty.slots import slot_id

    in_flight = Settings().per_host_concurrency
    st = b.stamps
    _warm_cli(b)
    for run in range(b.a.runs):
        for k, n in enumerate((small, big)):
            slot = slot_at(12 + 2 * run + k)
            home = b.homes.path(f"cli-slot-{n}")
            b.homes.fill(home, n, lambda i, s=slot: s, now=slot - timedelta(hours=1),
                         url=st.url())
            if n == big:  # the ceiling, same bodies, in this run: to both receivers
                with b.homes.open(home, slot + timedelta(seconds=5)) as a:
                    jobs = list(a.list(slot=slot))
                attempt = Attempt(slot=slot_id(slot), check=1, attempt=1, timeout=30.0)
                settle()
                tb, ok = bare_reference(jobs, attempt, b.rx.port, in_flight)
                settle()
                st.reset()
                tbs, oks = bare_reference(jobs, attempt, st.port, in_flight)
                del jobs
                if ok != n or oks != n:
                    raise RuntimeError(f"bare reference: {ok} and {oks} of {n} answered 2xx")
                rb.values.append(n / tb)
                rbs.values.append(n / tbs)
            settle()
            st.reset()
            p = b.awty_cli(["run-slot", slot_id(slot), "--home", str(home)],
                           slot + timedelta(seconds=5), timeout=1800)
            due = p.started  # the fork of `awty run-slot` (bench/launch.py's start-up is not in it)
            s = st.wait(n, 30, quiet=0.2)
            if s.distinct != n or s.dups:
                raise RuntimeError(f"run-slot (CLI): {s.distinct} of {n} callbacks arrived, "
                                   f"{s.dups} duplicates")
            first, last = s.first - due, s.last - due
            rows[n][0].values.append(first * 1000)
            rows[n][1].values.append(last)
            line = (f"CLI run-slot run {run + 1}, {fmt_n(n)} jobs: due → first {first * 1000:.0f} "
                    f"ms, → last {last:.2f} s, process {p.wall:.2f} s (exit after the last "
                    f"callback: {p.wall - last:.2f} s)")
            if n == big:
                rr.values.append(n / last)
                rq.values.append((n / last) / (n / tb))
                line += (f"; bare {tb:.2f} s to the bench receiver, {tbs:.2f} s to the timing "
                         f"receiver")
            b.rep.details.append(line)
            b.check_receiver()
            remove_home(home)
    b.rep.notes.append(
        f"run-slot (CLI) rows (issue 12 #1/#2): `awty run-slot SLOT --home H` as a subprocess, "
        f"AWTY_NOW 5 s after the slot boundary, on a home whose {fmt_n(small)} or "
        f"{fmt_n(big)} due jobs (entity 'order', keys 0…N-1 given in order: ids of one moment "
        f"follow the order they are made, so a run meets the keys in order) were added beforehand "
        f"through `add_many`; due is the moment "
        f"the bench starts the process (cron's moment), first and last are stamped by the "
        f"timing receiver ({st.name}) with its own clock, so interpreter start, imports and "
        f"opening the home count. callbacks/s = N / (due → last). The bare client posts the "
        f"same {fmt_n(big)} signed bodies with {in_flight} connections in the same run, to "
        f"the bench receiver (the ratio's reference, as in the run-slot / bare row) and to "
        f"the timing receiver (which is slower than nginx: a floor on what it can take).")


def _warm_cli(b: Bench) -> None:
    """One untimed CLI run first: the bench's bytecode cache starts empty, and the first
    ``awty run-slot`` process would compile the command line's modules inside a timed row."""
    from awty.slots import slot_id

    slot = slot_at(11)
    home = b.homes.path("cli-slot-warm")
    b.homes.fill(home, 10, lambda i: slot, now=slot - timedelta(hours=1), url=b.stamps.url())
    b.awty_cli(["run-slot", slot_id(slot), "--home", str(home)], slot + timedelta(seconds=5))
    remove_home(home)
