"""Section 2: adding many jobs at once, through ``add_many`` and through ``add --batch FILE``."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..common import BASE, R, fmt_n, self_cpu
from ..disk import disk_written, remove_home, settle

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    n = b.a.batch_jobs
    # issue 12, item 3
    rl = b.rep.row("add_many", f"add_many (library), {fmt_n(n)} jobs", "jobs/s",
                      "≥ 30,000 jobs/s", lambda v: v >= 30_000)
    rc = b.rep.row("add_batch", f"add --batch FILE (CLI), {fmt_n(n)} jobs", "jobs/s",
                      "≥ 25,000 jobs/s", lambda v: v >= 25_000)
    now = BASE

    def at(i: int) -> datetime:  # spread over one day of slots
        return BASE + timedelta(minutes=5 + R * (i % 96))

    jsonl = b.workdir / "batch.jsonl"
    with open(jsonl, "w") as f:
        for spec in b.homes.specs(n, at):
            f.write(json.dumps(spec) + "\n")
    for run in range(b.a.runs):
        home = b.homes.path("add-many")
        with b.homes.open(home, now) as a:
            a.init()
            specs = b.homes.specs(n, at)
            settle()
            c0, w0 = self_cpu(), disk_written()
            t0 = time.perf_counter()
            res = a.add_many(specs)
        d = time.perf_counter() - t0  # close() included: it may checkpoint the WAL
        cpu, written = self_cpu() - c0, disk_written() - w0
        assert len(res) == n
        rl.values.append(n / d)
        remove_home(home)
        home = b.homes.path("add-batch")
        b.awty_cli(["init", "--home", str(home)], now)
        settle()
        p = b.awty_cli(["add", "--batch", str(jsonl), "--home", str(home)], now)
        rc.values.append(n / p.wall)
        b.rep.details.append(
            f"batch run {run + 1}: add_many {d:.2f} s ({cpu / d:.0%} of it on a CPU; the "
            f"disk wrote {written / 1e6:,.0f} MB meanwhile); CLI add --batch {p.wall:.2f} s wall "
            f"(process start included), peak RSS {p.maxrss_kb / 1024:.0f} MiB")
        remove_home(home)
    if b.a.profile:
        home = b.homes.path("add-many-prof")
        with b.homes.open(home, now) as a:
            a.init()
            specs = b.homes.specs(n, at)
            b.profiled("add_many", lambda: a.add_many(specs))
        remove_home(home)
    b.rep.notes.append(
        f"Batch add: {fmt_n(n)} HTTP jobs (small JSON payload, entity 'order' and its number "
        f"as key, in order) spread over "
        f"96 slots; add_many timed alone (specs built beforehand, home initialised; close() "
        f"included); the CLI figure is the whole `awty add --batch` process, start-up and "
        f"output included.")
    remove_home(jsonl)
