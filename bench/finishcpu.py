"""Store-level CPU a job of claim, start and finish, each job ended with one execution recorded
as a run records it (its duration, lateness, status, host and pid those of the end): for A/B
runs of the stores' write paths on a machine too loaded for wall figures. Each round adds a
slot of ``--jobs`` jobs to one store and drains it in batches of 1,000; it prints this
process's CPU a job (all of SQLite's work; psycopg's for PostgreSQL) in finish and in the
whole cycle, and for PostgreSQL the CPU of the store's own server backends (found by their
application_name, from /proc: readable without the server's data directory).

``python -m bench.finishcpu sqlite|pg [--jobs 20000] [--rounds 4] [--pg-url URL]``

Run it from the root of the checkout it measures, alternating checkouts (A B A B)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from awty.model import Answer, End, Execution, Outcome, Result

from .pgstore import DEFAULT_URL, NOW, SLOT, _jobs, _Schema

APP = "awty-finishcpu"
OWNER = "bench:1:x"


class Backends:
    """CPU seconds of the server backends named ``APP`` (live ones: a pool keeps them)."""

    def __init__(self, url: str | None):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True) if url else None

    def cpu(self) -> float:
        if self.conn is None:
            return 0.0
        total = 0
        for (pid,) in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,)):
            try:
                f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(f[11]) + int(f[12])
        return total / os.sysconf("SC_CLK_TCK")


def one_round(store, n: int, server: Backends) -> tuple[float, ...]:
    """(finish, cycle, claim) CPU of this process and of the server, µs a job."""
    store.add(_jobs(n, SLOT), [None] * n)
    fin = fin_srv = took = took_srv = 0.0
    c0, s0 = time.process_time(), server.cpu()
    result = Result(Answer.DONE, status=204, duration=0.002)
    with store.owner_session(OWNER):
        while True:
            t0, u0 = time.process_time(), server.cpu()
            got = store.claim(SLOT, now=NOW, owner=OWNER,
                              lease_until=NOW + timedelta(minutes=10), limit=1000)
            took += time.process_time() - t0
            took_srv += server.cpu() - u0
            if not got:
                break
            store.start([j.id for j in got], owner=OWNER, now=NOW)
            ends = [End(j, Outcome.DONE, "ok", result, lateness=3.0) for j in got]
            runs = [Execution(j.id, NOW, "202611221000", 1, 1, Answer.DONE, 204, 2.0, 3000.0,
                              None, "bench", 1) for j in got]
            f0, g0 = time.process_time(), server.cpu()
            store.finish(ends, owner=OWNER, now=NOW, executions=runs)
            fin += time.process_time() - f0
            fin_srv += server.cpu() - g0
    us = 1e6 / n
    return (fin * us, fin_srv * us, (time.process_time() - c0) * us, (server.cpu() - s0) * us,
            took * us, took_srv * us)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.finishcpu",
                                description=__doc__.split("\n")[0])
    p.add_argument("store", choices=("sqlite", "pg"))
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--pg-url", default=DEFAULT_URL)
    a = p.parse_args(argv)
    rounds = []
    if a.store == "sqlite":
        from awty import store as store_mod

        with tempfile.TemporaryDirectory() as d:
            store = store_mod.open(store_mod.StoreSpec("sqlite", str(Path(d) / "awty.db")),
                                   mode="init")
            rounds = [one_round(store, a.jobs, Backends(None)) for _ in range(a.rounds)]
            store.close()
    else:
        url = a.pg_url + ("&" if "?" in a.pg_url else "?") + f"application_name={APP}"
        with _Schema(url) as store:
            server = Backends(a.pg_url)
            rounds = [one_round(store, a.jobs, server) for _ in range(a.rounds)]
    for i, (f, fs, c, cs, k, ks) in enumerate(rounds, 1):
        print(f"round {i}: finish {f:.1f} µs a job (server {fs:.1f}), claim {k:.1f} "
              f"(server {ks:.1f}), claim+start+finish {c:.1f} (server {cs:.1f})")
    med = [statistics.median(r[i] for r in rounds) for i in range(6)]
    print(f"median: finish {med[0]:.1f} (server {med[1]:.1f}), claim {med[4]:.1f} "
          f"(server {med[5]:.1f}), cycle {med[2]:.1f} (server {med[3]:.1f}) µs a job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
