"""Section 2: adding many jobs at once, through ``add_many`` and through ``add --batch FILE``,
beside a bare ``executemany`` of the same rows into the same schema (issue 34 #2)."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..common import BASE, R, fmt_n, self_cpu
from ..disk import disk_written, remove_home, settle
from ..references import bare_sqlite_insert

if TYPE_CHECKING:
    from ..context import Bench


def run(b: Bench) -> None:
    n = b.a.batch_jobs
    # issue 34, items 1 and 2
    rl = b.rep.row("add_many", f"add_many (library), {fmt_n(n)} jobs", "jobs/s",
                      "≥ 60,000 jobs/s", lambda v: v >= 60_000)
    rc = b.rep.row("add_batch", f"add --batch FILE (CLI), {fmt_n(n)} jobs", "jobs/s",
                      "≥ 50,000 jobs/s", lambda v: v >= 50_000)
    rb = b.rep.row("add_bare", f"bare SQLite executemany of the same {fmt_n(n)} rows, same "
                   "run", "rows/s")
    rlb = b.rep.row("add_many_bare", "add_many / bare executemany", "×", "≥ 0.5× (aim)",
                    lambda v: v >= 0.5, fmt="{:.2f}")
    rcb = b.rep.row("add_batch_bare", "add --batch (CLI) / bare executemany", "×",
                    "≥ 0.4× (within 2.5×)", lambda v: v >= 0.4, fmt="{:.2f}")
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
        with sqlite3.connect(home / "awty.db") as conn:
            rows = conn.execute("SELECT * FROM future_job ORDER BY rowid").fetchall()
        remove_home(home)
        home = b.homes.path("add-bare")
        with b.homes.open(home, now) as a:
            a.init()
        settle()
        bare = bare_sqlite_insert(home / "awty.db", rows)
        del rows
        rb.values.append(n / bare)
        remove_home(home)
        home = b.homes.path("add-batch")
        b.awty_cli(["init", "--home", str(home)], now)
        settle()
        p = b.awty_cli(["add", "--batch", str(jsonl), "--home", str(home)], now)
        rc.values.append(n / p.wall)
        rlb.values.append(bare / d)
        rcb.values.append(bare / p.wall)
        b.rep.details.append(
            f"batch run {run + 1}: add_many {d:.2f} s ({cpu / d:.0%} of it on a CPU; the "
            f"disk wrote {written / 1e6:,.0f} MB meanwhile); CLI add --batch {p.wall:.2f} s wall "
            f"(process start included), peak RSS {p.maxrss_kb / 1024:.0f} MiB; bare executemany "
            f"of the same rows {bare:.2f} s")
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
        f"output included. Bare reference (bench/references.py `bare_sqlite_insert`): the "
        f"`future_job` rows add_many stored, read back, inserted into a freshly initialised "
        f"home's database (same schema and indexes) by one `executemany` in one transaction "
        f"(WAL, synchronous NORMAL, connect and close timed): no validation, ids or envelopes. "
        f"Ratios: add_many's and add --batch's jobs/s over the bare rows/s of the same run.")
    remove_home(jsonl)
