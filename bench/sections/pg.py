"""Section 8: the PostgreSQL store (issue 11) beside SQLite, in the same run and to the same
receiver: ``add_many``, ``run_slot`` end to end, two ``awty run-slot`` processes sharing one
slot against one, and flatness with a million other jobs pending.

Each PostgreSQL "home" is a schema of its own (``bench_<hex>``) in the server's database,
dropped at the end. With no server answering, the rows are skipped and a note says why: a
newcomer's ``./scripts/bench`` does not need PostgreSQL."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import (AWTY_SCRIPT, BASE, R, alternate, die_with_parent, fmt_n, run_proc,
                      slot_at)
from ..disk import remove_home, settle
from ..homes import check_summary
from .flat import timed_round

if TYPE_CHECKING:
    from ..context import Bench

# Where a local server usually answers (trust auth, as on CI and the dev machines).
LOCAL_URLS = ("postgresql://postgres@/test?host=/var/run/postgresql",
              "postgresql://postgres@127.0.0.1:5432/test")
ADD_MIN, SLOT_MIN = 60_000, 5_000  # jobs/s (issue 34, round 3), callbacks/s (issue 11)
ONE_ADD_MAX = 1.5  # one `awty add` on PostgreSQL / on SQLite (issue 34 #5)
SLOT_RATIO_MIN = 0.9  # run-slot on PostgreSQL / on SQLite, same run (issue 34 #5)

KEYS = ("pg_add", "pg_add_sqlite", "pg_one_add", "pg_one_add_sqlite", "pg_one_add_ratio",
        "pg_slot", "pg_slot_sqlite", "pg_slot_ratio", "pg_one",
        "pg_two", "pg_two_ratio", "pg_flat_ratio", "pg_flat_last_ratio")
LABELS = {
    "pg_add": "PostgreSQL: add_many (library)", "pg_add_sqlite": "SQLite, same run: add_many",
    "pg_one_add": "PostgreSQL: one awty add (CLI) median wall",
    "pg_one_add_sqlite": "SQLite, same run: one awty add (CLI) median wall",
    "pg_one_add_ratio": "PostgreSQL / SQLite, one awty add (CLI)",
    "pg_slot": "PostgreSQL: run-slot end to end (library)",
    "pg_slot_sqlite": "SQLite, same run: run-slot end to end",
    "pg_slot_ratio": "PostgreSQL / SQLite, run-slot",
    "pg_one": "PostgreSQL: 1 run-slot process (CLI)",
    "pg_two": "PostgreSQL: 2 run-slot processes on one slot (CLI)",
    "pg_two_ratio": "PostgreSQL: 2 processes / 1",
    "pg_flat_ratio": "PostgreSQL flatness ratio (pending / none), whole run_slot",
    "pg_flat_last_ratio": "PostgreSQL flatness ratio (pending / none), due → last",
}


def server_url(given: str | None) -> str | None:
    """The first URL that answers: ``--pg-url`` if given, else the usual local ones."""
    import psycopg

    for url in ([given] if given else LOCAL_URLS):
        try:
            with psycopg.connect(url, connect_timeout=3, autocommit=True) as c:
                c.execute("SELECT 1")
            return url
        except psycopg.Error:
            continue
    return None


class Schemas:
    """PostgreSQL homes: a home directory (config, logs) and a schema of its own each."""

    def __init__(self, b: Bench, url: str):
        self.b, self.url, self.made = b, url, []

    def new(self, tag: str) -> tuple[Path, dict[str, str]]:
        name = f"bench_{uuid.uuid4().hex[:8]}"
        self.made.append(name)
        return self.b.homes.path(tag), {"database_url": self.url, "database_schema": name}

    def drop_all(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as c:
            for name in self.made:
                c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def analyze(self, settings: dict[str, str]) -> None:
        # After a bulk load, as autovacuum would (it may be off on a test server).
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f'ANALYZE "{settings["database_schema"]}".future_job')


def run(b: Bench) -> None:
    url = server_url(b.a.pg_url)
    if url is None:
        for k in KEYS:
            b.rep.row(k, LABELS[k], "").skipped = True
        b.rep.notes.append(f"PostgreSQL: skipped, no server answered at "
                           f"{b.a.pg_url or ' or '.join(LOCAL_URLS)} (`--pg-url URL`).")
        return
    homes = Schemas(b, url)
    try:
        _add(b, homes)
        _one_add(b, homes)
        _slot(b, homes)
        _two_vs_one(b, homes)
        _flat(b, homes)
    finally:
        homes.drop_all()
    b.rep.notes.append(
        f"PostgreSQL ({_version(url)}, the local server on these same 2 cores, trust auth, "
        f"its settings as installed): every figure beside SQLite's measured in the same run, "
        f"alternating which store goes first. add_many: {fmt_n(b.a.batch_jobs)} jobs as in the "
        f"batch section (COPY into PostgreSQL). One awty add: {b.a.cli_calls} `awty add` CLI "
        f"processes on each store, alternated (two untimed first), medians. run-slot: {fmt_n(b.a.slot_jobs)} signed callbacks "
        f"in-process, close() included. 1 vs 2 processes: {fmt_n(2 * b.a.slot_jobs)} due jobs, "
        f"whole `awty run-slot --json` processes started together (claims with FOR UPDATE SKIP "
        f"LOCKED), wall clock until the last exits, every job checked done exactly once from "
        f"their summaries. Flatness: a {fmt_n(b.a.flat_due)}-job slot with "
        f"{fmt_n(b.a.flat_pending)} jobs pending in other slots (one week) against none "
        f"(ANALYZE after the bulk load), whole run_slot and due → last callback.")


def _version(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0].split()[0]}" if row else "PostgreSQL"


def _add(b: Bench, homes: Schemas) -> None:
    n = b.a.batch_jobs
    rp = b.rep.row("pg_add", f"{LABELS['pg_add']}, {fmt_n(n)} jobs", "jobs/s",
                   f"≥ {ADD_MIN:,} jobs/s", lambda v: v >= ADD_MIN)
    rs = b.rep.row("pg_add_sqlite", f"{LABELS['pg_add_sqlite']}, {fmt_n(n)} jobs", "jobs/s")

    def at(i: int):
        return BASE + timedelta(minutes=5 + R * (i % 96))

    for run in range(b.a.runs):
        rates = {}
        for store in alternate(run, "pg", "sqlite"):
            home, settings = homes.new("pg-add") if store == "pg" else (b.homes.path("add"), {})
            with b.homes.open(home, BASE, **settings) as a:
                a.init()
                specs = b.homes.specs(n, at)
                settle()
                t0 = time.perf_counter()
                assert len(a.add_many(specs)) == n
            rates[store] = n / (time.perf_counter() - t0)  # close() included
            remove_home(home)
        rp.values.append(rates["pg"])
        rs.values.append(rates["sqlite"])


def _one_add(b: Bench, homes: Schemas) -> None:
    """One `awty add` CLI process on a PostgreSQL home and on a SQLite one, calls alternated
    (after two untimed calls each: bytecode, page cache)."""
    n = b.a.cli_calls
    rp = b.rep.row("pg_one_add", f"{LABELS['pg_one_add']}, {n} calls", "ms", fmt="{:,.1f}")
    rs = b.rep.row("pg_one_add_sqlite", f"{LABELS['pg_one_add_sqlite']}, {n} calls", "ms",
                   fmt="{:,.1f}")
    rr = b.rep.row("pg_one_add_ratio", LABELS["pg_one_add_ratio"], "×", f"≤ {ONE_ADD_MAX}×",
                   lambda v: v <= ONE_ADD_MAX, "{:.2f}")
    pg_home, settings = homes.new("pg-one-add")
    sq_home = b.homes.path("one-add")
    envs = {}
    for store, home, extra in (("pg", pg_home, settings), ("sqlite", sq_home, {})):
        with b.homes.open(home, BASE, **extra) as a:
            a.init()
        envs[store] = {**b.cli_env(BASE), "AWTY_HOME": str(home),
                       **{f"AWTY_{k.upper()}": v for k, v in extra.items()}}
    args = [str(AWTY_SCRIPT), "add", b.url, "--in", "2h", "--entity", "order", "--key", "42"]
    walls: dict[str, list[float]] = {"pg": [], "sqlite": []}
    for i in range(n + 2):
        for store in alternate(i, "pg", "sqlite"):
            p = run_proc(args, envs[store], b.workdir, 60)
            if p.rc != 0:
                raise RuntimeError(f"awty add ({store}) exited {p.rc}: {p.stderr[-300:]}")
            if i >= 2:
                walls[store].append(p.wall * 1000)
    rp.values, rs.values = walls["pg"], walls["sqlite"]
    rr.values = [statistics.median(walls["pg"]) / statistics.median(walls["sqlite"])]
    remove_home(sq_home)
    remove_home(pg_home)


def _slot(b: Bench, homes: Schemas) -> None:
    n = b.a.slot_jobs
    rp = b.rep.row("pg_slot", f"{LABELS['pg_slot']}, {fmt_n(n)} callbacks", "callbacks/s",
                   f"≥ {SLOT_MIN:,} /s", lambda v: v >= SLOT_MIN)
    rs = b.rep.row("pg_slot_sqlite", f"{LABELS['pg_slot_sqlite']}, {fmt_n(n)} callbacks",
                   "callbacks/s")
    rr = b.rep.row("pg_slot_ratio", LABELS["pg_slot_ratio"], "×", f"≥ {SLOT_RATIO_MIN}×",
                   lambda v: v >= SLOT_RATIO_MIN, "{:.2f}")
    slot = slot_at(4)
    for run in range(b.a.runs):
        rates = {}
        for store in alternate(run, "pg", "sqlite"):
            home, settings = homes.new("pg-slot") if store == "pg" else (b.homes.path("slot"), {})
            b.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1), **settings)
            if settings:
                homes.analyze(settings)
            settle()
            with b.homes.open(home, slot + timedelta(seconds=5), **settings) as a:
                t0 = time.perf_counter()
                s = a.run_slot(slot)
            rates[store] = n / (time.perf_counter() - t0)
            check_summary(s.to_dict(), n, f"run-slot ({store})")
            remove_home(home)
        rp.values.append(rates["pg"])
        rs.values.append(rates["sqlite"])
        rr.values.append(rates["pg"] / rates["sqlite"])
        b.check_receiver()


def _two_vs_one(b: Bench, homes: Schemas) -> None:
    n = 2 * b.a.slot_jobs
    r1 = b.rep.row("pg_one", f"{LABELS['pg_one']}, {fmt_n(n)} callbacks", "callbacks/s")
    r2 = b.rep.row("pg_two", f"{LABELS['pg_two']}, {fmt_n(n)} callbacks", "callbacks/s")
    rr = b.rep.row("pg_two_ratio", LABELS["pg_two_ratio"], "×", fmt="{:.2f}")
    slot = slot_at(5)
    for run in range(b.a.runs):
        rates = {}
        for procs in alternate(run, 1, 2):
            home, settings = homes.new(f"pg-{procs}proc")
            b.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1), **settings)
            homes.analyze(settings)
            settle()
            env = {**b.cli_env(slot + timedelta(seconds=5)), "AWTY_HOME": str(home),
                   "AWTY_DATABASE_URL": settings["database_url"],
                   "AWTY_DATABASE_SCHEMA": settings["database_schema"]}
            wall, summaries = _together(procs, [str(AWTY_SCRIPT), "run-slot", "--json"], env,
                                        b.workdir)
            ran = sum(s["ran"] for s in summaries)
            done = sum(s.get("outcomes", {}).get("done", 0) for s in summaries)
            if ran != n or done != n:
                raise RuntimeError(f"{procs} run-slot processes: ran {ran}, done {done} of {n}")
            rates[procs] = n / wall
            remove_home(home)
        r1.values.append(rates[1])
        r2.values.append(rates[2])
        rr.values.append(rates[2] / rates[1])
        b.check_receiver()


def _together(procs: int, cmd: list[str], env: dict[str, str],
              workdir: Path) -> tuple[float, list[dict]]:
    """Start ``procs`` copies of ``cmd`` at once; wall seconds until the last exits, and the
    JSON summary each printed."""
    outs = [workdir / f".pg-run-{i}.out" for i in range(procs)]
    files = [open(p, "wb") for p in outs]
    try:
        t0 = time.perf_counter()
        ps = [subprocess.Popen(cmd, stdout=f, stderr=subprocess.PIPE, env=env,
                               preexec_fn=die_with_parent) for f in files]
        errs = [p.communicate(timeout=600)[1] for p in ps]
        wall = time.perf_counter() - t0
    finally:
        for f in files:
            f.close()
    for proc, err in zip(ps, errs, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"run-slot exited {proc.returncode}: {err.decode()[-400:]}")
    summaries = [json.loads(out.read_text()) for out in outs]
    for out in outs:
        os.unlink(out)
    return wall, summaries


def _flat(b: Bench, homes: Schemas) -> None:
    n, pending = b.a.flat_due, b.a.flat_pending
    rr = b.rep.row("pg_flat_ratio", f"{LABELS['pg_flat_ratio']}, {fmt_n(n)}-job slot, "
                   f"{fmt_n(pending)} pending", "×", "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
    rl = b.rep.row("pg_flat_last_ratio", f"{LABELS['pg_flat_last_ratio']}, {fmt_n(n)}-job "
                   f"slot, {fmt_n(pending)} pending", "×", "≤ 1.2×", lambda v: v <= 1.2,
                   "{:.2f}")
    (empty, s_empty), (full, s_full) = homes.new("pg-flat-empty"), homes.new("pg-flat-full")
    gen_now = BASE - timedelta(hours=1)
    week = 7 * 96
    t0 = time.perf_counter()
    b.homes.fill(full, pending, lambda i: BASE + timedelta(days=2, minutes=R * (i % week) + 1),
                 now=gen_now, **s_full)
    homes.analyze(s_full)
    filled = time.perf_counter() - t0
    with b.homes.open(empty, gen_now, **s_empty) as a:
        a.init()
    settings = {empty: s_empty, full: s_full}
    for run in range(-1, b.a.flat_runs):  # run -1: a warm-up of both, not counted
        times, lasts = timed_round(b, slot_at(2 + run), alternate(run, empty, full), n,
                                   gen_now, settings)
        b.rep.details.append(
            f"PostgreSQL flatness {'warm-up' if run < 0 else f'run {run + 1}'}: 0 pending "
            f"{times[empty]:.3f} s, {fmt_n(pending)} pending {times[full]:.3f} s; due → last "
            f"{lasts[empty]:.3f} s and {lasts[full]:.3f} s")
        if run >= 0:
            rr.values.append(times[full] / times[empty])
            rl.values.append(lasts[full] / lasts[empty])
    b.rep.details.append(f"PostgreSQL flatness: {fmt_n(pending)} pending added through "
                         f"add_many in {filled:.0f} s (ANALYZE included).")
    remove_home(empty)
    remove_home(full)
