"""Section 3: one slot of signed callbacks end to end, against the bare asyncio + httptools
and the ``requests`` references posting the same bodies to the same receiver."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from ..common import RAISED, REQUESTS_THREADS, fmt_n, proc_cpu, self_cpu, slot_at
from ..disk import purge_seconds, remove_home, settle
from ..homes import check_summary
from ..references import bare_reference, requests_reference

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    n, nreq = b.a.slot_jobs, b.a.requests_jobs
    ra = b.rep.row("slot", f"run-slot end to end (library), {fmt_n(n)} callbacks",
                      "callbacks/s", "≥ 10,000 /s", lambda v: v >= 10_000)
    rb = b.rep.row("bare", f"bare asyncio+httptools reference, {fmt_n(n)} posts",
                      "posts/s")
    rq = b.rep.row("requests", f"requests.Session pool reference ({REQUESTS_THREADS} "
                      f"threads), {fmt_n(nreq)} posts", "posts/s")
    rp = b.rep.row("slot_purge", "run-slot, then until its retired slot directory is "
                      f"deleted (background `rm`), {fmt_n(n)} callbacks", "callbacks/s")
    rd = b.rep.row("slot_raised", f"run-slot (library), per-host cap raised to "
                      f"{RAISED}, {fmt_n(n)} callbacks", "callbacks/s")
    rr = b.rep.row("ratio_bare", "run-slot / bare reference", "×", "≥ 0.5×",
                      lambda v: v >= 0.5, "{:.2f}")
    rs = b.rep.row("ratio_requests", "run-slot / requests reference", "×", fmt="{:.1f}")
    from awty.model import Attempt
    from awty.slots import slot_id

    try:
        import requests  # noqa: F401
        have_requests = True
    except ImportError:
        have_requests = False
        rq.error = rs.error = "requests is not installed (the bench extra)"
    from awty.config import Settings

    in_flight = Settings().per_host_concurrency  # what awty keeps in flight to one host
    slot = slot_at(4)
    sid = slot_id(slot)
    attempt = Attempt(slot=sid, check=1, attempt=1, timeout=30.0)
    for run in range(b.a.runs):
        home = b.homes.path("slot")
        b.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
        with b.homes.open(home, slot + timedelta(seconds=5)) as a:
            jobs = list(a.list(slot=slot))
        assert len(jobs) == n, len(jobs)
        # the ceiling first: bare client, same bodies, same receiver
        settle()
        rx0, me0 = proc_cpu(b.rx.pids()), self_cpu()
        tb, ok = bare_reference(jobs, attempt, b.rx.port, in_flight)
        rxb, meb = proc_cpu(b.rx.pids()) - rx0, self_cpu() - me0
        if ok != n:
            raise RuntimeError(f"bare reference: {ok} of {n} answered 2xx")
        rb.values.append(n / tb)
        # awty
        settle()
        with b.homes.open(home, slot + timedelta(seconds=5)) as a:
            rx0, me0 = proc_cpu(b.rx.pids()), self_cpu()
            t0 = time.perf_counter()
            s = a.run_slot(slot)
        ta = time.perf_counter() - t0  # close() included: it may checkpoint the WAL
        rxa, mea = proc_cpu(b.rx.pids()) - rx0, self_cpu() - me0
        tp = purge_seconds()
        rp.values.append(n / (ta + tp))
        check_summary(s.to_dict(), n, "run-slot")
        ra.values.append(n / ta)
        rr.values.append(tb / ta)
        # the same with the per-host cap raised to awty's concurrency (informational)
        home2 = b.homes.path("slot-raised")
        b.homes.fill(home2, n, lambda i: slot, now=slot - timedelta(hours=1))
        settle()
        with b.homes.open(home2, slot + timedelta(seconds=5), per_host=RAISED) as a:
            t0 = time.perf_counter()
            s2 = a.run_slot(slot)
        td = time.perf_counter() - t0
        check_summary(s2.to_dict(), n, f"run-slot (per-host cap {RAISED})")
        rd.values.append(n / td)
        remove_home(home2)
        line = (f"run-slot run {run + 1}: awty {ta:.2f} s ({mea / n * 1e6:.0f} µs CPU per "
                f"callback in awty's process, receiver {rxa / ta:.0%} of a core; its retired slot "
                f"directory deleted {tp:.2f} s after it returned); bare "
                f"{tb:.2f} s ({meb / n * 1e6:.0f} µs CPU per post, receiver "
                f"{rxb / tb:.0%} of a core); awty with its per-host cap raised to {RAISED} "
                f"{td:.2f} s")
        if have_requests:
            sub = jobs[:nreq]
            settle()
            tq, okq = requests_reference(sub, attempt, b.rx.port, REQUESTS_THREADS)
            if okq != len(sub):
                raise RuntimeError(f"requests reference: {okq} of {len(sub)} answered 2xx")
            rq.values.append(len(sub) / tq)
            rs.values.append((n / ta) / (len(sub) / tq))
            line += f"; requests {tq:.2f} s for {fmt_n(len(sub))}"
        b.rep.details.append(line)
        b.check_receiver()
        remove_home(home)
    if b.a.profile:
        home = b.homes.path("slot-prof")
        b.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
        with b.homes.open(home, slot + timedelta(seconds=5)) as a:
            b.profiled("run_slot", lambda: a.run_slot(slot))
        remove_home(home)
    b.rep.notes.append(
        f"run-slot: `Awty.run_slot` timed in-process (FixedClock 5 s after the boundary, a "
        f"fresh `Awty` on a home holding {fmt_n(n)} due jobs; claim, sign, send, record "
        f"and history included, and `close()` (which may checkpoint the WAL), as in every "
        f"library figure here; each callback signed, Standard Webhooks). The finished "
        f"slot's envelopes are not unlinked one by one: its directory is renamed out of "
        f"the tree and a detached `rm -rf` deletes it after `run_slot` returns; the row "
        f"'then until its retired slot directory is deleted' stops the clock only when "
        f"that `rm` has finished. "
        f"awty as shipped: concurrency {Settings().concurrency}, at most {in_flight} in flight to "
        f"one host (its per-host cap), so the bare reference keeps {in_flight} in flight "
        f"too; the row 'per-host cap raised to {RAISED}' is awty with as many in flight "
        f"as its concurrency, for comparison. The references post the same bodies "
        f"(`awty.executors.http.callback_body` on the same jobs) with the same headers and "
        f"signature, built per request inside the timed section, to the same receiver in "
        f"the same run: bare = uvloop/asyncio + httptools, {in_flight} keep-alive "
        f"connections, no bookkeeping; requests = {REQUESTS_THREADS} threads, one Session "
        f"each.")
