"""PostgreSQL run-slot beside SQLite's, for a machine too loaded for wall figures: a slot of
``--jobs`` due jobs run in-process (``Awty.run_slot``) on each store, the two alternating,
with each round's ratio, the CPU of each party (this runner's own, its store process's, and
the PostgreSQL server's when its data directory is given and readable: the postmaster's
utime+stime+cutime+cstime plus its live children, from /proc) and the store process's
request latencies (start, claim, finish: median and sum).

``python -m bench.slotcpu --pg-url URL [--pg-data DIR] [--jobs 10000] [--rounds 4]``

Run it from the root of the checkout it measures: the store process is
``python -m awty.run.storechild``, which imports awty from the working directory first (an
A/B run from one checkout's root with another's awty gets a store process of the first).
The callbacks go to awty's test receiver (``--constant 204``) on 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from awty.run import storeproc
from awty.testing.receiver import free_port

from .common import slot_at, wait_port
from .homes import Homes, check_summary
from .servecpu import TICK


def server_cpu(data: Path | None) -> float:
    """CPU seconds the PostgreSQL server whose data directory is ``data`` has used (its ended
    backends included); 0 when not given."""
    if data is None:
        return 0.0
    pm = int((data / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{pm}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15])
    for kid in Path(f"/proc/{pm}/task/{pm}/children").read_text().split():
        try:
            f = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile: counted in cutime once waited for
        total += int(f[11]) + int(f[12])
    return total / TICK


class Latencies:
    """The store process's requests, timed from sending to answer."""

    def __init__(self) -> None:
        self.seen: dict[str, list[float]] = {}
        real = storeproc.StoreProcess.request

        def request(process, op, *args, **kw):
            t0 = time.perf_counter()
            fut = real(process, op, *args, **kw)
            fut.add_done_callback(
                lambda _: self.seen.setdefault(op, []).append(time.perf_counter() - t0))
            return fut

        storeproc.StoreProcess.request = request  # type: ignore[method-assign]

    def take(self) -> str:
        out = " ".join(f"{op} n={len(v)} med={statistics.median(v) * 1e3:.0f}ms "
                       f"sum={sum(v) * 1e3:.0f}ms" for op, v in sorted(self.seen.items()))
        self.seen.clear()
        return out or "(no store process)"


def one_run(homes: Homes, store: str, n: int, pg_url: str, pg_data: Path | None,
            lat: Latencies) -> dict[str, float | str]:
    import psycopg

    slot = slot_at(4)
    home = homes.path(store)
    settings = {}
    if store == "pg":
        settings = {"database_url": pg_url, "database_schema": f"bench_{uuid.uuid4().hex[:8]}"}
    homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1), **settings)
    if settings:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'ANALYZE "{settings["database_schema"]}".future_job')
    me0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    srv0 = server_cpu(pg_data)
    lat.take()
    try:
        with homes.open(home, slot + timedelta(seconds=5), **settings) as a:
            t0 = time.perf_counter()
            s = a.run_slot(slot)
        wall = time.perf_counter() - t0
        me1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
            resource.RUSAGE_CHILDREN)
        srv = server_cpu(pg_data) - srv0
        check_summary(s.to_dict(), n, store)
    finally:
        if settings:
            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{settings["database_schema"]}" CASCADE')
        shutil.rmtree(home, ignore_errors=True)
    return {"rate": n / wall,
            "runner": me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime,
            "store_process": (kids1.ru_utime + kids1.ru_stime
                              - kids0.ru_utime - kids0.ru_stime),
            "server": srv, "requests": lat.take()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.slotcpu", description=__doc__.split("\n")[0])
    p.add_argument("--pg-url", required=True)
    p.add_argument("--pg-data", type=Path, help="the server's data directory (its CPU)")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="awty-slotcpu-"))
    port = free_port()
    rx = subprocess.Popen([sys.executable, "-m", "awty.testing.receiver", "--constant", "204",
                           "--port", str(port), "--parent", str(os.getpid())])
    ratios = []
    try:
        wait_port(port)
        homes, lat = Homes(work, f"http://127.0.0.1:{port}/hook"), Latencies()
        for r in range(a.rounds):
            got = {}
            for store in (("pg", "sqlite") if r % 2 == 0 else ("sqlite", "pg")):
                got[store] = one_run(homes, store, a.jobs, a.pg_url, a.pg_data, lat)
                g = got[store]
                print(f"round {r + 1} {store:<6} {g['rate']:8,.0f} callbacks/s  CPU s: runner "
                      f"{g['runner']:.2f} store process {g['store_process']:.2f} server "
                      f"{g['server']:.2f}  {g['requests']}", flush=True)
            ratios.append(float(got["pg"]["rate"]) / float(got["sqlite"]["rate"]))
            print(f"round {r + 1} PostgreSQL / SQLite {ratios[-1]:.2f}", flush=True)
        print(f"PostgreSQL / SQLite: median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")
    finally:
        rx.terminate()
        rx.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
